//! What one 16 KB HTTP/2 header block costs to decode, by content, with the decoder
//! the gateway used before (`fluke-hpack` 0.3) and with `wire::h2::hpack` (issue 39's
//! "CPU per received byte": a Huffman block must cost about what a plain one does).
//!
//! `cargo run --release -p wire --example hpack_cost`
//!
//! Blocks (each just under 16,384 bytes, one HEADERS frame's worth):
//! - plain: one literal header whose 16 KB value is not Huffman-coded;
//! - huffman text: 26 KB of text Huffman-coded into 16 KB;
//! - empty huffman: `00 80 80` repeated, 5,460 empty Huffman-coded names and values
//!   (the bomb that cost the server ~170 ms a block).
//!
//! Prints the median of 15 timed runs per block and decoder.

use std::time::Instant;
use wire::h2::hpack::{Caps, Decoder};
use wire::h2::write_hpack_int;

const CAPS: Caps = Caps {
    fields: 100,
    list_size: 32 * 1024,
};

fn literal(name: &[u8], value: &[u8], huff: bool) -> Vec<u8> {
    let mut b = vec![0x00];
    write_hpack_int(&mut b, 7, 0, name.len());
    b.extend_from_slice(name);
    write_hpack_int(&mut b, 7, if huff { 0x80 } else { 0 }, value.len());
    b.extend_from_slice(value);
    b
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn time(mut f: impl FnMut()) -> f64 {
    median(
        (0..15)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e6
            })
            .collect(),
    )
}

fn main() {
    let plain = literal(b"x-data", &vec![b'a'; 16_360], false);
    // Letters and digits with five-bit codes: 26,176 of them are exactly 16,360 bytes.
    let text: Vec<u8> = b"aceiost012".iter().cycle().take(26_176).copied().collect();
    let huff = literal(b"x-data", &wire::h2::huffman::encode(&text), true);
    let bomb = b"\x00\x80\x80".repeat(5460);
    println!("16 KB header block: decode time, median of 15 (µs)\n");
    println!("{:<16} {:>10} {:>12}", "block", "bytes", "fluke-hpack");
    for (name, block) in [
        ("plain", &plain),
        ("huffman text", &huff),
        ("empty huffman", &bomb),
    ] {
        let before = time(|| {
            let mut d = fluke_hpack::Decoder::new();
            let _ = d.decode_with_cb(block, |_, _| {});
        });
        let after = time(|| {
            let mut d = Decoder::new();
            let _ = d.decode(block, CAPS, |_, _| {});
        });
        println!(
            "{name:<16} {:>10} {before:>12.1} µs   wire::h2::hpack {after:>8.1} µs",
            block.len()
        );
    }
}
