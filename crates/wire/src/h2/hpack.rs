//! HPACK decoding (RFC 7541) for request header blocks, sans-IO.
//!
//! Why hand-written: the HPACK decoders published as crates of their own either panic
//! on a cut-short integer (`fluke-hpack` 0.3: one 10-byte frame aborted the server) or
//! build a hash map of the Huffman code for every string they decode (`loona-hpack`:
//! a 16 KB block of empty Huffman strings cost ~170 ms); the `h2` crate's decoder is
//! private to it. This one never panics on input (fuzzed: `h2_conn`, `hpack`), costs
//! a bounded amount per input byte, and enforces the header list's caps *while*
//! decoding, so a block cannot make the server build what it will refuse.
//!
//! Memory: the dynamic table holds what the client inserted, at most our
//! SETTINGS_HEADER_TABLE_SIZE; the gateway announces 0, so once the client has seen
//! that ([`Decoder::set_limit`]) a connection's decoder owns no heap at all.
//!
//! Not here: which headers a request may carry (`request`), frames (`frame`).

use super::huffman::{self, HuffmanError};
use std::collections::VecDeque;

/// Why a header block does not decode: a connection error COMPRESSION_ERROR (RFC
/// 9113 4.3), since the dynamic table can no longer be trusted to match the peer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HpackError {
    #[error("HPACK block cut short")]
    Truncated,
    #[error("HPACK integer too large")]
    Integer,
    #[error("HPACK index not in the tables")]
    Index,
    #[error("HPACK {0}")]
    Huffman(#[from] HuffmanError),
    #[error("HPACK table size update above the allowed size")]
    SizeAbove,
    #[error("HPACK table size update not at the start of the block")]
    SizeMisplaced,
    #[error("HPACK table size update missing after SETTINGS_HEADER_TABLE_SIZE changed")]
    SizeOwed,
}

/// What a request's decoded header list may reach; past either, the block is still
/// decoded (so the table stays in step with the peer's) but no field is handed out.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    /// Fields at most.
    pub fields: usize,
    /// RFC 9113 SETTINGS_MAX_HEADER_LIST_SIZE's measure: name + value + 32 per field.
    pub list_size: usize,
}

/// What one block held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Decoded {
    /// Fields decoded (handed out or not).
    pub fields: usize,
    /// Their size in the list measure.
    pub list_size: usize,
    /// A cap was passed: the fields after it were not handed out.
    pub capped: bool,
}

/// RFC 7541's initial dynamic table size, what a client may use before it has seen
/// our SETTINGS.
pub const DEFAULT_TABLE: usize = 4096;

/// Integers above this are refused: every size and index the decoder meets fits.
const MAX_INTEGER: usize = 1 << 24;

/// A dynamic table entry: name, value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// One connection's decoding context (its dynamic table).
#[derive(Debug)]
pub struct Decoder {
    /// Newest first, as HPACK indexes them.
    table: VecDeque<Entry>,
    /// Sum of entry sizes (name + value + 32 each).
    size: usize,
    /// The table's maximum size, as the peer's encoder last set it.
    max: usize,
    /// What our SETTINGS_HEADER_TABLE_SIZE allows (the encoder's bound).
    limit: usize,
    /// Our limit went down: the next block must start with a size update.
    owed: bool,
}

impl Default for Decoder {
    fn default() -> Decoder {
        Decoder::new()
    }
}

impl Decoder {
    pub fn new() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: DEFAULT_TABLE,
            limit: DEFAULT_TABLE,
            owed: false,
        }
    }

    /// The peer acknowledged our SETTINGS_HEADER_TABLE_SIZE = `limit`: its next block
    /// starts with a size update when the limit went below the table's maximum
    /// (RFC 7541 4.2), and no update may go above it.
    pub fn set_limit(&mut self, limit: usize) {
        if limit < self.max {
            self.owed = true;
        }
        self.limit = limit;
    }

    /// Entries in the dynamic table now.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }

    /// Decodes one complete header block, handing each field to `field` while the
    /// list is within `caps`.
    pub fn decode(
        &mut self,
        block: &[u8],
        caps: Caps,
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Result<Decoded, HpackError> {
        let mut done = Decoded::default();
        let mut pos = 0;
        let mut at_start = true;
        let (mut name_buf, mut value_buf) = (Vec::new(), Vec::new());
        while pos < block.len() {
            let byte = block[pos];
            if byte & 0xe0 == 0x20 {
                // Dynamic table size update (6.3): only before the first field.
                if !at_start {
                    return Err(HpackError::SizeMisplaced);
                }
                let (size, used) = integer(&block[pos..], 5)?;
                pos += used;
                if size > self.limit {
                    return Err(HpackError::SizeAbove);
                }
                self.max = size;
                self.owed = false;
                self.evict(0);
                continue;
            }
            if at_start && self.owed {
                return Err(HpackError::SizeOwed);
            }
            at_start = false;
            let keep = !done.capped;
            if byte & 0x80 != 0 {
                // Indexed field (6.1).
                let (index, used) = integer(&block[pos..], 7)?;
                pos += used;
                let (name, value) = self.get(index)?;
                let size = name.len() + value.len() + 32;
                count(&mut done, size, caps);
                if keep && !done.capped {
                    field(name, value);
                }
                continue;
            }
            // A literal (6.2): with incremental indexing (01xxxxxx, 6-bit index),
            // without or never indexed (0000xxxx / 0001xxxx, 4-bit index).
            let indexing = byte & 0x40 != 0;
            let prefix = if indexing { 6 } else { 4 };
            let (index, used) = integer(&block[pos..], prefix)?;
            pos += used;
            // Strings are decoded when they are handed out or inserted; otherwise
            // only skipped (their Huffman bits cannot change the table).
            let need = indexing || keep;
            let name: &[u8] = if index == 0 {
                pos += string(&block[pos..], need, &mut name_buf)?;
                &name_buf
            } else {
                let (name, _) = self.get(index)?;
                name_buf.clear();
                name_buf.extend_from_slice(name);
                &name_buf
            };
            pos += string(&block[pos..], need, &mut value_buf)?;
            let size = name.len() + value_buf.len() + 32;
            count(&mut done, size, caps);
            if keep && !done.capped {
                field(name, &value_buf);
            }
            if indexing {
                self.insert(name, &value_buf);
            }
        }
        Ok(done)
    }

    /// Index `index` of the static table then the dynamic one (2.3.3).
    fn get(&self, index: usize) -> Result<(&[u8], &[u8]), HpackError> {
        match index {
            0 => Err(HpackError::Index),
            i if i <= STATIC.len() => Ok(STATIC[i - 1]),
            i => self
                .table
                .get(i - STATIC.len() - 1)
                .map(|(n, v)| (&n[..], &v[..]))
                .ok_or(HpackError::Index),
        }
    }

    /// Adds an entry (4.4): older ones leave to make room; one larger than the whole
    /// table empties it and is not kept.
    fn insert(&mut self, name: &[u8], value: &[u8]) {
        let size = name.len() + value.len() + 32;
        if size > self.max {
            self.table.clear();
            self.size = 0;
        } else {
            self.evict(size);
            self.table.push_front((name.into(), value.into()));
            self.size += size;
        }
        self.shrink_when_empty();
    }

    /// Evicts the oldest entries until `room` more bytes fit under the maximum.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((n, v)) = self.table.pop_back() else {
                break;
            };
            self.size -= n.len() + v.len() + 32;
        }
        self.shrink_when_empty();
    }

    /// A table the client stopped using gives its memory back (per connection).
    fn shrink_when_empty(&mut self) {
        if self.table.is_empty() && self.table.capacity() > 0 {
            self.table = VecDeque::new();
        }
    }
}

fn count(done: &mut Decoded, size: usize, caps: Caps) {
    done.fields += 1;
    done.list_size = done.list_size.saturating_add(size);
    if done.fields > caps.fields || done.list_size > caps.list_size {
        done.capped = true;
    }
}

/// An integer with an `n`-bit prefix (5.1): (value, bytes used).
fn integer(buf: &[u8], n: u8) -> Result<(usize, usize), HpackError> {
    let first = *buf.first().ok_or(HpackError::Truncated)?;
    let max_prefix = (1usize << n) - 1;
    let mut value = usize::from(first) & max_prefix;
    if value < max_prefix {
        return Ok((value, 1));
    }
    let mut shift = 0u32;
    for (i, &b) in buf.iter().enumerate().skip(1) {
        // Continuation bytes that add nothing (0x80) still count: past four of them
        // the integer is over MAX_INTEGER or padded without end.
        if shift > 21 {
            return Err(HpackError::Integer);
        }
        value += usize::from(b & 0x7f) << shift;
        if value > MAX_INTEGER {
            return Err(HpackError::Integer);
        }
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
        shift += 7;
    }
    Err(HpackError::Truncated)
}

/// A string literal (5.2) into `out` when `decode`, else only its length checked:
/// bytes used.
fn string(buf: &[u8], decode: bool, out: &mut Vec<u8>) -> Result<usize, HpackError> {
    let huffman = buf.first().ok_or(HpackError::Truncated)? & 0x80 != 0;
    let (len, used) = integer(buf, 7)?;
    let end = used.checked_add(len).ok_or(HpackError::Truncated)?;
    let raw = buf.get(used..end).ok_or(HpackError::Truncated)?;
    out.clear();
    if decode {
        if huffman {
            huffman::decode(raw, out)?;
        } else {
            out.extend_from_slice(raw);
        }
    }
    Ok(end)
}

/// RFC 7541 Appendix A.
const STATIC: [(&[u8], &[u8]); 61] = [
    (b":authority", b""),
    (b":method", b"GET"),
    (b":method", b"POST"),
    (b":path", b"/"),
    (b":path", b"/index.html"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"200"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"304"),
    (b":status", b"400"),
    (b":status", b"404"),
    (b":status", b"500"),
    (b"accept-charset", b""),
    (b"accept-encoding", b"gzip, deflate"),
    (b"accept-language", b""),
    (b"accept-ranges", b""),
    (b"accept", b""),
    (b"access-control-allow-origin", b""),
    (b"age", b""),
    (b"allow", b""),
    (b"authorization", b""),
    (b"cache-control", b""),
    (b"content-disposition", b""),
    (b"content-encoding", b""),
    (b"content-language", b""),
    (b"content-length", b""),
    (b"content-location", b""),
    (b"content-range", b""),
    (b"content-type", b""),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"expect", b""),
    (b"expires", b""),
    (b"from", b""),
    (b"host", b""),
    (b"if-match", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"if-range", b""),
    (b"if-unmodified-since", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"max-forwards", b""),
    (b"proxy-authenticate", b""),
    (b"proxy-authorization", b""),
    (b"range", b""),
    (b"referer", b""),
    (b"refresh", b""),
    (b"retry-after", b""),
    (b"server", b""),
    (b"set-cookie", b""),
    (b"strict-transport-security", b""),
    (b"transfer-encoding", b""),
    (b"user-agent", b""),
    (b"vary", b""),
    (b"via", b""),
    (b"www-authenticate", b""),
];

#[cfg(test)]
#[path = "hpack_tests.rs"]
mod tests;
