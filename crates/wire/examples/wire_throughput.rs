//! Throughput of the `wire` hot paths, one line per scenario
//! (`component_scenario_scale: rate`). A measuring tool, not a test: nothing is
//! asserted about time. Run it optimised:
//!
//! ```sh
//! cargo run --release -p wire --example wire_throughput
//! ```

use std::hint::black_box;
use std::time::Instant;

use wire::{
    parse_edges, parse_head, parse_ws_frame, write_chunk, write_sse_data, write_ws_frame,
    ws_client_frame, BodyDecoder, BodyKind, Limits, Opcode,
};

/// Runs `f` `n` times and prints the rate.
fn measure(name: &str, n: u64, unit: &str, mut f: impl FnMut(u64)) {
    let start = Instant::now();
    for i in 0..n {
        f(i);
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{name}: {:.2} M{unit}/s ({n} in {secs:.3} s)",
        n as f64 / secs / 1e6
    );
}

fn main() {
    let limits = Limits::default();
    let sub = b"GET /sub/123456 HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: myriad-flood\r\nAccept: */*\r\n\r\n";
    measure("head_parse_subscribe_1M", 1_000_000, "heads", |_| {
        black_box(parse_head(black_box(sub), &limits).unwrap());
    });
    let ws = b"GET /ws/42 HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
    measure("head_parse_upgrade_1M", 1_000_000, "heads", |_| {
        black_box(parse_head(black_box(ws), &limits).unwrap());
    });

    let payload = [b'x'; 60];
    // Encoders append to the caller's buffer: one reused buffer, as in the gateway.
    let mut buf = Vec::with_capacity(256);
    measure("sse_encode_60B_10M", 10_000_000, "msgs", |_| {
        buf.clear();
        write_sse_data(&mut buf, black_box(&payload));
        black_box(&buf);
    });
    measure("ws_encode_60B_10M", 10_000_000, "msgs", |_| {
        buf.clear();
        write_ws_frame(&mut buf, Opcode::Text, black_box(&payload));
        black_box(&buf);
    });
    let frame = ws_client_frame(Opcode::Text, true, [1, 2, 3, 4], &payload);
    measure("ws_parse_60B_10M", 10_000_000, "frames", |_| {
        black_box(parse_ws_frame(black_box(&frame), 1 << 16).unwrap());
    });

    let mut chunked = Vec::new();
    for _ in 0..16_384 {
        write_chunk(&mut chunked, &[&[b'a'; 1024]]);
    }
    chunked.extend_from_slice(wire::STREAM_END);
    let mut out = Vec::with_capacity(16 << 20);
    let start = Instant::now();
    for _ in 0..8 {
        out.clear();
        let mut d = BodyDecoder::new(BodyKind::Chunked, 32 << 20);
        black_box(d.handle_bytes(&chunked, &mut out).unwrap());
    }
    let secs = start.elapsed().as_secs_f64();
    println!("body_chunked_1KiB_128MiB: {:.0} MiB/s", 128.0 / secs);

    let edges = 3_000_000u64;
    let mut body = String::with_capacity(edges as usize * 16);
    for i in 0..edges {
        body.push_str(&format!("{} {}\n", i % 1_000_000, (i * 7919) % 1_000_000));
    }
    let start = Instant::now();
    let parsed = parse_edges(body.as_bytes()).unwrap();
    let secs = start.elapsed().as_secs_f64();
    println!(
        "edges_parse_3M: {:.1} M edges/s ({} edges, {:.0} MB, {secs:.3} s)",
        parsed.len() as f64 / secs / 1e6,
        parsed.len(),
        body.len() as f64 / 1e6
    );
}
