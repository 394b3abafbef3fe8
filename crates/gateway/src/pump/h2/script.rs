//! One HTTP/2 connection's frame handling driven by a script of arbitrary bytes, the
//! time and the loop's answers, with no socket: the fuzz target `h2_conn`
//! (crates/gateway/fuzz) and its seeded replay in `cargo test`.
//!
//! Script: byte 0 picks the stream limit (1–16) and the bound on bodies in flight;
//! then records of `[len][ticks][len bytes of client input]`. After each record the
//! loop's side is played: a request gets a "core" (its staged body is taken, as
//! `h2_body` does), every fourth one is answered and ends, resets remove streams.
//!
//! Properties, beyond "no panic": everything we write parses as frames; streams never
//! exceed the limit; no stream keeps staged bytes past its round; the bytes of
//! incomplete bodies stay within their bound; the HPACK table stays within what the
//! client may use; a connection error ends the script (GOAWAY is final).

use super::conn::Limits;
use super::{Action, H2Conn, MAX_BLOCK};
use wire::h2::{self as frames};

/// Runs one script; panics when a property does not hold.
pub fn run(data: &[u8]) {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let limits = |now| Limits {
        max_streams: u32::from(sel & 0xf) + 1,
        receiving: 1024 << (sel >> 4),
        now,
    };
    let mut conn = H2Conn::new(false, 0);
    let (mut now, mut answered) = (0u32, 0usize);
    let mut out = Vec::new();
    while rest.len() >= 2 {
        let (len, ticks) = (usize::from(rest[0]), u32::from(rest[1]));
        rest = &rest[2..];
        let input = &rest[..len.min(rest.len())];
        rest = &rest[input.len()..];
        now = now.wrapping_add(ticks);
        let mut actions = Vec::new();
        out.clear();
        let result = conn.handle_bytes(input, &limits(now), &mut out, &mut actions);
        check_frames(&out);
        if result.is_err() {
            return;
        }
        for action in actions {
            match action {
                Action::Request(id) => {
                    if let Some(s) = conn.stream_by_id(id) {
                        s.slot = 0;
                        std::mem::take(&mut s.head);
                    }
                }
                Action::Body(id) => {
                    if let Some(s) = conn.stream_by_id(id) {
                        s.recv_window += i64::from(std::mem::take(&mut s.staged_flow));
                        s.staged.clear();
                    }
                }
                Action::Reset(id) => conn.streams.retain(|s| s.id != id),
                Action::Close => return,
                Action::Pump | Action::Finish => {}
            }
        }
        // The loop answers some requests: their streams end.
        answered += 1;
        if answered % 4 == 0 {
            if let Some(pos) = conn.streams.iter().position(|s| s.remote_closed) {
                conn.streams.swap_remove(pos);
            }
        }
        let l = limits(now);
        assert!(conn.streams.len() <= l.max_streams as usize);
        assert!(conn.streams.iter().all(|s| s.staged.is_empty()));
        let receiving = conn.receiving();
        assert!(receiving <= l.receiving, "{receiving} > {}", l.receiving);
        assert!(conn.block.as_ref().is_none_or(|b| b.2.len() <= MAX_BLOCK));
        assert!(conn.decoder.table_len() <= wire::h2::hpack::DEFAULT_TABLE / 32);
    }
}

/// What we wrote is a sequence of whole, valid frames.
fn check_frames(mut out: &[u8]) {
    while !out.is_empty() {
        match frames::parse_frame(out, frames::DEFAULT_MAX_FRAME) {
            Ok(Some((_, used))) => out = &out[used..],
            other => panic!("we wrote a bad frame: {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    /// A script record: `len`, `ticks`, bytes.
    fn record(script: &mut Vec<u8>, ticks: u8, bytes: &[u8]) {
        for piece in bytes.chunks(255) {
            script.push(piece.len() as u8);
            script.push(ticks);
            script.extend_from_slice(piece);
        }
    }

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        f.extend_from_slice(&[kind, flags]);
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    /// The fuzz target's seed corpus (and any crash added to it) replays here.
    #[test]
    fn the_seed_corpus_replays() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/h2_conn");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).expect("seeds") {
            super::run(&std::fs::read(entry.expect("entry").path()).expect("seed"));
            n += 1;
        }
        assert!(n >= 2, "{}: seed corpus missing", dir.display());
    }

    /// A few honest and hostile scripts, then random mutations of them.
    #[test]
    fn scripts_keep_their_properties() {
        let mut base = Vec::new();
        let mut honest = vec![0x23];
        record(&mut honest, 0, wire::h2::PREFACE);
        record(&mut honest, 1, &frame(4, 0, 0, &[]));
        record(&mut honest, 1, &frame(4, 1, 0, &[]));
        // GET /sse/1 (static :method GET, :scheme https, literal :path), then a POST
        // with a body in two DATA frames, trailers, a reset, a PING, WINDOW_UPDATEs.
        let get = [
            0x20, 0x82, 0x87, 0x04, 0x06, b'/', b's', b's', b'e', b'/', b'1',
        ];
        record(&mut honest, 2, &frame(1, 0x5, 1, &get));
        let post = [0x83, 0x87, 0x04, 0x06, b'/', b'p', b'u', b'b', b'/', b'1'];
        record(&mut honest, 2, &frame(1, 0x4, 3, &post));
        record(&mut honest, 0, &frame(0, 0, 3, b"hello "));
        record(&mut honest, 0, &frame(0, 1, 3, b"world"));
        record(&mut honest, 3, &frame(3, 0, 1, &8u32.to_be_bytes()));
        record(&mut honest, 3, &frame(6, 0, 0, b"12345678"));
        record(&mut honest, 0, &frame(8, 0, 0, &1000u32.to_be_bytes()));
        base.push(honest);
        let mut bomb = vec![0x01];
        record(&mut bomb, 0, wire::h2::PREFACE);
        record(&mut bomb, 0, &frame(1, 0x5, 1, &[0x3f]));
        base.push(bomb);
        let mut flood = vec![0x01];
        record(&mut flood, 0, wire::h2::PREFACE);
        for _ in 0..600 {
            record(&mut flood, 0, &frame(4, 0, 0, &[]));
        }
        base.push(flood);
        let mut rng = rand::rngs::SmallRng::seed_from_u64(39);
        for script in &base {
            super::run(script);
        }
        for _ in 0..20_000 {
            let mut s = base[rng.gen_range(0..base.len())].clone();
            for _ in 0..rng.gen_range(1..8) {
                let at = rng.gen_range(0..s.len());
                match rng.gen_range(0..3) {
                    0 => s[at] = rng.gen(),
                    1 => s.insert(at, rng.gen()),
                    _ => {
                        s.remove(at);
                    }
                }
                if s.is_empty() {
                    break;
                }
            }
            super::run(&s);
        }
    }
}
