//! Unit tests for `ws::message`.

use super::*;

fn f(opcode: Opcode, fin: bool, payload: &[u8]) -> WsFrame {
    WsFrame {
        fin,
        opcode,
        payload: payload.to_vec(),
    }
}

fn run(frames: &[WsFrame]) -> Result<WsMessageState, WsError> {
    let mut s = WsMessageState::new();
    for fr in frames {
        s.handle_frame(fr)?;
    }
    Ok(s)
}

#[test]
fn one_byte_of_state() {
    assert_eq!(std::mem::size_of::<WsMessageState>(), 1);
}

#[test]
fn unfragmented_messages() {
    let s = run(&[
        f(Opcode::Text, true, "héllo".as_bytes()),
        f(Opcode::Binary, true, b"\xff"),
        f(Opcode::Ping, true, b""),
    ])
    .unwrap();
    assert!(!s.in_message());
    assert_eq!(
        run(&[f(Opcode::Text, true, b"\xff")]).unwrap_err(),
        WsError::InvalidUtf8
    );
    assert_eq!(
        run(&[f(Opcode::Text, true, b"\xed\xa0\x80")]).unwrap_err(),
        WsError::InvalidUtf8
    );
}

#[test]
fn fragmented_messages_with_interleaved_control() {
    let s = run(&[
        f(Opcode::Text, false, b"ab"),
        f(Opcode::Ping, true, b"x"),
        f(Opcode::Continuation, false, b"cd"),
    ])
    .unwrap();
    assert!(s.in_message());
    let s = run(&[
        f(Opcode::Binary, false, b"\xff"),
        f(Opcode::Continuation, true, b"\xfe"),
    ])
    .unwrap();
    assert!(!s.in_message());
}

#[test]
fn sequence_errors() {
    assert_eq!(
        run(&[f(Opcode::Continuation, true, b"")]).unwrap_err(),
        WsError::UnexpectedContinuation
    );
    assert_eq!(
        run(&[f(Opcode::Text, false, b""), f(Opcode::Text, true, b"")]).unwrap_err(),
        WsError::MessageNotFinished
    );
    assert_eq!(
        run(&[f(Opcode::Binary, false, b""), f(Opcode::Binary, false, b"")]).unwrap_err(),
        WsError::MessageNotFinished
    );
    assert_eq!(
        run(&[
            f(Opcode::Text, true, b"a"),
            f(Opcode::Continuation, false, b"")
        ])
        .unwrap_err(),
        WsError::UnexpectedContinuation
    );
    assert_eq!(WsError::UnexpectedContinuation.close_code(), 1002);
}

#[test]
fn code_points_split_across_fragments() {
    let text = "aé€😀z".as_bytes();
    for a in 0..=text.len() {
        for b in a..=text.len() {
            let frames = [
                f(Opcode::Text, false, &text[..a]),
                f(Opcode::Continuation, false, &text[a..b]),
                f(Opcode::Continuation, true, &text[b..]),
            ];
            assert!(!run(&frames).unwrap().in_message(), "{a} {b}");
        }
    }
}

#[test]
fn invalid_fragments() {
    let bad = |frames: &[WsFrame]| {
        assert_eq!(run(frames).unwrap_err(), WsError::InvalidUtf8, "{frames:?}")
    };
    // Truncated sequence at the end of the message.
    bad(&[
        f(Opcode::Text, false, b"a\xe2\x82"),
        f(Opcode::Continuation, true, b""),
    ]);
    // Bad continuation after a split.
    bad(&[
        f(Opcode::Text, false, b"\xe2"),
        f(Opcode::Continuation, true, b"\x41"),
    ]);
    // Surrogate split after ED.
    bad(&[
        f(Opcode::Text, false, b"\xed"),
        f(Opcode::Continuation, true, b"\xa0\x80"),
    ]);
    // Overlong after E0, above U+10FFFF after F4.
    bad(&[
        f(Opcode::Text, false, b"\xe0"),
        f(Opcode::Continuation, true, b"\x80\x80"),
    ]);
    bad(&[
        f(Opcode::Text, false, b"\xf4"),
        f(Opcode::Continuation, true, b"\x90\x80\x80"),
    ]);
    // Invalid byte in the middle of a first fragment: fails early.
    bad(&[f(Opcode::Text, false, b"ok\xffok")]);
    bad(&[f(Opcode::Text, false, b"\xc0\xaf")]);
}

#[test]
fn automaton_agrees_with_std_on_all_short_sequences() {
    // Every 1..=3 byte sequence over interesting bytes, split at every point.
    let bytes = [
        0x41u8, 0x7f, 0x80, 0x8f, 0x90, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xdf, 0xe0, 0xe1, 0xed, 0xef,
        0xf0, 0xf1, 0xf4, 0xf5, 0xff,
    ];
    let mut seqs: Vec<Vec<u8>> = bytes.iter().map(|&b| vec![b]).collect();
    for _ in 0..3 {
        let longer: Vec<Vec<u8>> = seqs
            .iter()
            .flat_map(|s| bytes.iter().map(move |&b| [s.as_slice(), &[b]].concat()))
            .collect();
        seqs.extend(longer.into_iter().filter(|s| s.len() <= 4));
        seqs.sort();
        seqs.dedup();
    }
    for s in &seqs {
        let want = std::str::from_utf8(s).is_ok();
        for cut in 0..=s.len() {
            let frames = [
                f(Opcode::Text, false, &s[..cut]),
                f(Opcode::Continuation, true, &s[cut..]),
            ];
            assert_eq!(run(&frames).is_ok(), want, "{s:x?} cut {cut}");
        }
    }
}
