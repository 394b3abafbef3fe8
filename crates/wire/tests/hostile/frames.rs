//! Hostile WebSocket client frames: each row's exact close code.

use wire::{parse_ws_frame, ws_client_frame, Opcode, WsMessageState};

/// The close code a stream of client frames gets (1000 if all are fine).
fn frames_close_code(buf: &[u8], max_payload: usize) -> u16 {
    let mut state = WsMessageState::new();
    let mut pos = 0;
    while pos < buf.len() {
        match parse_ws_frame(&buf[pos..], max_payload) {
            Err(e) => return e.close_code(),
            Ok(None) => panic!("incomplete frame at {pos}: {buf:x?}"),
            Ok(Some((frame, n))) => {
                if let Err(e) = state.handle_frame(&frame) {
                    return e.close_code();
                }
                pos += n;
            }
        }
    }
    1000
}

const M: [u8; 4] = [1, 2, 3, 4];

#[test]
fn hostile_frames() {
    const MAX: usize = 1024;
    let cat = |frames: &[Vec<u8>]| frames.concat();
    let close = |payload: &[u8]| ws_client_frame(Opcode::Close, true, M, payload);
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        (
            "sane text",
            ws_client_frame(Opcode::Text, true, M, b"hi"),
            1000,
        ),
        ("unmasked client frame", vec![0x81, 0x02, b'h', b'i'], 1002),
        ("RSV1 without extension", vec![0xc1, 0x80, 1, 2, 3, 4], 1002),
        ("RSV2", vec![0xa1, 0x80, 1, 2, 3, 4], 1002),
        ("RSV3", vec![0x91, 0x80, 1, 2, 3, 4], 1002),
        ("reserved data opcode 3", vec![0x83, 0x80, 1, 2, 3, 4], 1002),
        (
            "reserved control opcode 0xB",
            vec![0x8b, 0x80, 1, 2, 3, 4],
            1002,
        ),
        (
            "fragmented ping",
            ws_client_frame(Opcode::Ping, false, M, b"p"),
            1002,
        ),
        (
            "fragmented close",
            ws_client_frame(Opcode::Close, false, M, b""),
            1002,
        ),
        (
            "ping of 126 bytes",
            ws_client_frame(Opcode::Ping, true, M, &[0; 126]),
            1002,
        ),
        (
            "pong of 64 KiB",
            ws_client_frame(Opcode::Pong, true, M, &[0; 65536]),
            1002,
        ),
        (
            "16-bit length for 5 bytes",
            vec![0x81, 0xfe, 0, 5, 1, 2, 3, 4, 0, 0, 0, 0, 0],
            1002,
        ),
        (
            "64-bit length for 200 bytes",
            [&[0x82, 0xff, 0, 0, 0, 0, 0, 0, 0, 200][..], &[0; 204]].concat(),
            1002,
        ),
        (
            "64-bit length with top bit",
            vec![0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 1],
            1002,
        ),
        (
            "payload over max",
            ws_client_frame(Opcode::Binary, true, M, &[0; MAX + 1])[..8].to_vec(),
            1009,
        ),
        (
            "2^62 payload announced",
            vec![0x82, 0xff, 0x40, 0, 0, 0, 0, 0, 0, 0],
            1009,
        ),
        ("close with 1-byte payload", close(b"\x03"), 1002),
        ("close code 999", close(&999u16.to_be_bytes()), 1002),
        (
            "close code 1004 (reserved)",
            close(&1004u16.to_be_bytes()),
            1002,
        ),
        (
            "close code 1005 on the wire",
            close(&1005u16.to_be_bytes()),
            1002,
        ),
        (
            "close code 1006 on the wire",
            close(&1006u16.to_be_bytes()),
            1002,
        ),
        (
            "close code 1015 on the wire",
            close(&1015u16.to_be_bytes()),
            1002,
        ),
        ("close code 2999", close(&2999u16.to_be_bytes()), 1002),
        ("close code 5000", close(&5000u16.to_be_bytes()), 1002),
        ("close reason not UTF-8", close(b"\x03\xe8\xc3\x28"), 1007),
        (
            "text not UTF-8",
            ws_client_frame(Opcode::Text, true, M, b"\xff"),
            1007,
        ),
        (
            "text with UTF-16 surrogate",
            ws_client_frame(Opcode::Text, true, M, b"\xed\xa0\x80"),
            1007,
        ),
        (
            "text with overlong NUL",
            ws_client_frame(Opcode::Text, true, M, b"\xc0\x80"),
            1007,
        ),
        (
            "text above U+10FFFF",
            ws_client_frame(Opcode::Text, true, M, b"\xf4\x90\x80\x80"),
            1007,
        ),
        (
            "continuation without start",
            ws_client_frame(Opcode::Continuation, true, M, b"x"),
            1002,
        ),
        (
            "new text while fragmented",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"a"),
                ws_client_frame(Opcode::Text, true, M, b"b"),
            ]),
            1002,
        ),
        (
            "binary while text is fragmented",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"a"),
                ws_client_frame(Opcode::Binary, true, M, b"b"),
            ]),
            1002,
        ),
        (
            "fragments ending mid code point",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"\xe2\x82"),
                ws_client_frame(Opcode::Continuation, true, M, b""),
            ]),
            1007,
        ),
        (
            "invalid UTF-8 in a middle fragment",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"ok"),
                ws_client_frame(Opcode::Continuation, false, M, b"\xff"),
                ws_client_frame(Opcode::Continuation, true, M, b"ok"),
            ]),
            1007,
        ),
        (
            "valid code point split across fragments, with a ping between",
            cat(&[
                ws_client_frame(Opcode::Text, false, M, b"\xe2"),
                ws_client_frame(Opcode::Ping, true, M, b""),
                ws_client_frame(Opcode::Continuation, true, M, b"\x82\xac"),
            ]),
            1000,
        ),
    ];
    let mut failures = Vec::new();
    for (name, buf, want) in &cases {
        let got = frames_close_code(buf, MAX);
        if got != *want {
            failures.push(format!("{name}: want {want}, got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
