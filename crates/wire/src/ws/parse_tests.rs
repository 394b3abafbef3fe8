//! Unit tests for `ws::parse`.

use super::*;
use crate::ws::ws_client_frame;

const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

#[test]
fn rfc6455_masked_hello() {
    // RFC 6455 5.7: a single-frame masked text message "Hello".
    let buf = [
        0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58,
    ];
    let (f, n) = parse_ws_frame(&buf, 1024).unwrap().unwrap();
    assert_eq!(n, buf.len());
    assert_eq!(
        f,
        WsFrame {
            fin: true,
            opcode: Opcode::Text,
            payload: b"Hello".to_vec()
        }
    );
    assert_eq!(ws_client_frame(Opcode::Text, true, MASK, b"Hello"), buf);
}

#[test]
fn prefixes_are_incomplete() {
    for len in [0, 5, 125, 126, 1000, 65535, 65536] {
        let payload = vec![b'a'; len];
        let buf = ws_client_frame(Opcode::Binary, true, MASK, &payload);
        for cut in 0..buf.len() {
            assert_eq!(
                parse_ws_frame(&buf[..cut], 1 << 20),
                Ok(None),
                "len {len} cut {cut}"
            );
        }
        let (f, n) = parse_ws_frame(&buf, 1 << 20).unwrap().unwrap();
        assert_eq!((f.payload.len(), n), (len, buf.len()));
    }
}

#[test]
fn consecutive_frames() {
    let mut buf = ws_client_frame(Opcode::Text, false, MASK, b"ab");
    buf.extend(ws_client_frame(Opcode::Ping, true, [0; 4], b"p"));
    buf.extend(ws_client_frame(Opcode::Continuation, true, MASK, b"c"));
    let (f1, n1) = parse_ws_frame(&buf, 10).unwrap().unwrap();
    let (f2, n2) = parse_ws_frame(&buf[n1..], 10).unwrap().unwrap();
    let (f3, n3) = parse_ws_frame(&buf[n1 + n2..], 10).unwrap().unwrap();
    assert_eq!(
        (f1.fin, f1.opcode, f1.payload),
        (false, Opcode::Text, b"ab".to_vec())
    );
    assert_eq!((f2.opcode, f2.payload), (Opcode::Ping, b"p".to_vec()));
    assert_eq!(
        (f3.fin, f3.opcode, f3.payload),
        (true, Opcode::Continuation, b"c".to_vec())
    );
    assert_eq!(n1 + n2 + n3, buf.len());
}

#[test]
fn close_payloads() {
    let close = |p: &[u8]| parse_ws_frame(&ws_client_frame(Opcode::Close, true, MASK, p), 125);
    assert!(close(b"").unwrap().is_some());
    assert!(close(b"\x03\xe8").unwrap().is_some());
    assert!(close(b"\x03\xe8bye \xc3\xa9").unwrap().is_some());
    assert!(close(&4999u16.to_be_bytes()).unwrap().is_some());
    assert_eq!(close(b"\x03"), Err(WsError::CloseTooShort));
    for code in [
        0u16,
        999,
        1004,
        1005,
        1006,
        1015,
        1016,
        2999,
        5000,
        u16::MAX,
    ] {
        assert_eq!(
            close(&code.to_be_bytes()),
            Err(WsError::BadCloseCode(code)),
            "{code}"
        );
    }
    assert_eq!(close(b"\x03\xe8\xff"), Err(WsError::InvalidUtf8));
    assert_eq!(WsError::InvalidUtf8.close_code(), 1007);
}

#[test]
fn too_big_is_refused_from_the_header_alone() {
    let buf = ws_client_frame(Opcode::Text, true, MASK, &[b'a'; 200]);
    assert_eq!(parse_ws_frame(&buf[..4], 199), Err(WsError::TooBig));
    assert_eq!(WsError::TooBig.close_code(), 1009);
    assert!(parse_ws_frame(&buf, 200).unwrap().is_some());
}

#[test]
fn header_errors() {
    let cases: &[(&[u8], WsError)] = &[
        (&[0x81, 0x05], WsError::Unmasked),
        (&[0xc1, 0x80], WsError::ReservedBits),
        (&[0xa1, 0x80], WsError::ReservedBits),
        (&[0x91, 0x80], WsError::ReservedBits),
        (&[0x83, 0x80], WsError::UnknownOpcode(3)),
        (&[0x8b, 0x80], WsError::UnknownOpcode(0xb)),
        (&[0x09, 0x80], WsError::FragmentedControl),
        (&[0x89, 0xfe], WsError::ControlTooLong),
        (&[0x81, 0xfe, 0x00, 0x7d], WsError::NonMinimalLength),
        (
            &[0x81, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff],
            WsError::NonMinimalLength,
        ),
        (
            &[0x81, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0],
            WsError::LengthTopBit,
        ),
    ];
    for (buf, want) in cases {
        assert_eq!(parse_ws_frame(buf, usize::MAX), Err(*want), "{buf:x?}");
        assert_eq!(want.close_code(), 1002);
    }
}
