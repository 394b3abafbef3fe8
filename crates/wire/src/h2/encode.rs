//! Frame writers, and the response HEADERS block encoded by hand: `:status 200` is the
//! static table's index 8 (one byte, 0x88), any other status and every header are
//! literals without indexing, so the encoder keeps no dynamic table and no state per
//! connection (we also advertise SETTINGS_HEADER_TABLE_SIZE = 0 for the decoder side).

use super::{flag, kind, DEFAULT_MAX_FRAME, FRAME_HEADER};

pub(crate) fn write_frame_header(out: &mut Vec<u8>, len: usize, ty: u8, flags: u8, stream: u32) {
    debug_assert!(len < 1 << 24);
    let len = (len as u32).to_be_bytes();
    out.extend_from_slice(&len[1..]);
    out.push(ty);
    out.push(flags);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

/// SETTINGS with `params` (id, value).
pub fn write_settings(out: &mut Vec<u8>, params: &[(u16, u32)]) {
    write_frame_header(out, params.len() * 6, kind::SETTINGS, 0, 0);
    for (id, value) in params {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&value.to_be_bytes());
    }
}

pub fn write_settings_ack(out: &mut Vec<u8>) {
    write_frame_header(out, 0, kind::SETTINGS, flag::ACK, 0);
}

pub fn write_ping(out: &mut Vec<u8>, ack: bool, data: [u8; 8]) {
    write_frame_header(out, 8, kind::PING, if ack { flag::ACK } else { 0 }, 0);
    out.extend_from_slice(&data);
}

pub fn write_goaway(out: &mut Vec<u8>, last_stream: u32, code: u32) {
    write_frame_header(out, 8, kind::GOAWAY, 0, 0);
    out.extend_from_slice(&(last_stream & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn write_rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    write_frame_header(out, 4, kind::RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn write_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    write_frame_header(out, 4, kind::WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}

/// One DATA frame; the caller keeps `data` within the peer's frame size and windows.
pub fn write_data(out: &mut Vec<u8>, stream: u32, end_stream: bool, data: &[u8]) {
    let flags = if end_stream { flag::END_STREAM } else { 0 };
    write_frame_header(out, data.len(), kind::DATA, flags, stream);
    out.extend_from_slice(data);
}

/// A response HEADERS frame (CONTINUATION frames after it if the block is larger than
/// the default frame size). Header names must be lowercase already.
pub fn write_headers(
    out: &mut Vec<u8>,
    stream: u32,
    status: u16,
    headers: &[(&[u8], &[u8])],
    end_stream: bool,
) {
    let mut block = Vec::with_capacity(64);
    if status == 200 {
        block.push(0x88);
    } else {
        // Literal without indexing, name = static index 8 (":status").
        write_int(&mut block, 4, 0x00, 8);
        write_string(&mut block, status.to_string().as_bytes());
    }
    for (name, value) in headers {
        // Literal without indexing, new name.
        block.push(0x00);
        write_string(&mut block, name);
        write_string(&mut block, value);
    }
    let max = DEFAULT_MAX_FRAME as usize;
    let mut chunks = block.chunks(max).peekable();
    let mut first = true;
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        let mut flags = if last { flag::END_HEADERS } else { 0 };
        let ty = if first {
            if end_stream {
                flags |= flag::END_STREAM;
            }
            kind::HEADERS
        } else {
            kind::CONTINUATION
        };
        out.reserve(FRAME_HEADER + chunk.len());
        write_frame_header(out, chunk.len(), ty, flags, stream);
        out.extend_from_slice(chunk);
        first = false;
    }
}

/// An HPACK integer with a `prefix`-bit prefix (RFC 7541 5.1), OR-ed into `first`'s
/// flag bits (the response encoder here; the `hpack_cost` example's request blocks).
pub fn write_int(out: &mut Vec<u8>, prefix: u8, first: u8, mut value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(first | value as u8);
        return;
    }
    out.push(first | max as u8);
    value -= max;
    while value >= 128 {
        out.push((value % 128) as u8 | 0x80);
        value /= 128;
    }
    out.push(value as u8);
}

/// An HPACK string literal, not Huffman-coded.
fn write_string(out: &mut Vec<u8>, s: &[u8]) {
    write_int(out, 7, 0x00, s.len());
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_200_is_one_byte_and_literals_follow() {
        let mut out = Vec::new();
        write_headers(
            &mut out,
            3,
            200,
            &[(b"content-type", b"text/event-stream")],
            false,
        );
        assert_eq!(
            &out[..9],
            &[0, 0, 33, kind::HEADERS, flag::END_HEADERS, 0, 0, 0, 3]
        );
        assert_eq!(out[9], 0x88);
        assert_eq!(out[10], 0x00);
        assert_eq!(out[11] as usize, "content-type".len());
        let mut other = Vec::new();
        write_headers(&mut other, 1, 404, &[], true);
        assert_eq!(&other[9..], &[0x08, 3, b'4', b'0', b'4']);
        assert_eq!(other[4], flag::END_HEADERS | flag::END_STREAM);
    }

    #[test]
    fn long_integers_continue() {
        let mut out = Vec::new();
        write_int(&mut out, 7, 0, 1337);
        assert_eq!(out, [127, 0xba, 0x09]);
    }
}
