//! Unit tests of the lean record layer: both ends are `RecordLayer`s with made-up
//! secrets, plus the RFC 8448 key-derivation vector.

use super::*;

fn pair(suite: Suite) -> (RecordLayer, RecordLayer) {
    let n = suite.hash_len();
    let a = Secret::new(&[7u8; 48][..n]).unwrap();
    let b = Secret::new(&[9u8; 48][..n]).unwrap();
    let client = RecordLayer::new(suite, true, a, 0, b, 0).unwrap();
    let server = RecordLayer::new(suite, false, b, 0, a, 0).unwrap();
    (client, server)
}

fn roundtrip(from: &mut RecordLayer, to: &mut RecordLayer, parts: &[&[u8]]) -> Vec<u8> {
    let mut wire = Vec::new();
    from.seal(parts, &mut wire).unwrap();
    let (mut plain, mut out) = (Vec::new(), Vec::new());
    let o = to.open(&mut wire, &mut plain, &mut out).unwrap();
    assert_eq!(o.consumed, wire.len());
    plain
}

#[test]
fn records_roundtrip_for_every_suite_and_split_large_data() {
    for suite in [Suite::Aes128Gcm, Suite::Aes256Gcm, Suite::Chacha20Poly1305] {
        let (mut c, mut s) = pair(suite);
        assert_eq!(
            roundtrip(&mut c, &mut s, &[b"GET ", b"/ HTTP/1.1"]),
            b"GET / HTTP/1.1"
        );
        let big = vec![0x5a; 40_000];
        let mut wire = Vec::new();
        s.seal(&[&big], &mut wire).unwrap();
        assert_eq!(wire.len(), big.len() + 3 * OVERHEAD, "three records");
        let (mut plain, mut out) = (Vec::new(), Vec::new());
        c.open(&mut wire, &mut plain, &mut out).unwrap();
        assert_eq!(plain, big);
    }
}

#[test]
fn key_update_requested_by_the_peer_is_answered() {
    let (mut c, mut s) = pair(Suite::Aes128Gcm);
    // The client asks for an update (request_update = 1), then keeps talking.
    let mut wire = Vec::new();
    c.seal_typed(HANDSHAKE, &[&[KEY_UPDATE, 0, 0, 1, 1]], &mut wire)
        .unwrap();
    c.tx_secret = next_secret(c.suite, &c.tx_secret);
    c.tx = Keys::derive(c.suite, &c.secret(&c.tx_secret));
    c.seal(&[b"after"], &mut wire).unwrap();
    let (mut plain, mut out) = (Vec::new(), Vec::new());
    s.open(&mut wire, &mut plain, &mut out).unwrap();
    assert_eq!(plain, b"after");
    // The server answered with its own KeyUpdate, then seals under the new key.
    s.seal(&[b"reply"], &mut out).unwrap();
    let mut got = Vec::new();
    c.open(&mut out, &mut got, &mut Vec::new()).unwrap();
    assert_eq!(got, b"reply");
}

#[test]
fn bad_records_are_refused_with_the_right_alert() {
    let (mut c, mut s) = pair(Suite::Chacha20Poly1305);
    let refused = |s: &mut RecordLayer, mut wire: Vec<u8>| {
        let mut out = Vec::new();
        match s.open(&mut wire, &mut Vec::new(), &mut out) {
            Err(TlsError::Refused(a)) => {
                assert!(!out.is_empty(), "an alert record was sealed");
                a
            }
            other => panic!("{other:?}"),
        }
    };
    let mut wire = Vec::new();
    c.seal(&[b"x"], &mut wire).unwrap();
    let mut flipped = wire.clone();
    flipped[7] ^= 1;
    assert_eq!(refused(&mut s, flipped), Alert::BadRecordMac);
    let (_, mut s) = pair(Suite::Chacha20Poly1305);
    assert_eq!(
        refused(&mut s, vec![APPLICATION_DATA, 3, 3, 0x48, 0x01]),
        Alert::RecordOverflow
    );
    let (_, mut s) = pair(Suite::Chacha20Poly1305);
    assert_eq!(
        refused(&mut s, vec![HANDSHAKE, 3, 3, 0, 4, 1, 2, 3, 4]),
        Alert::UnexpectedMessage
    );
    // A ClientHello after the handshake (a renegotiation attempt, in TLS 1.3 terms).
    let (mut c, mut s) = pair(Suite::Chacha20Poly1305);
    let mut hs = Vec::new();
    c.seal_typed(HANDSHAKE, &[&[1, 0, 0, 2, 3, 3]], &mut hs)
        .unwrap();
    assert_eq!(refused(&mut s, hs), Alert::UnexpectedMessage);
}

#[test]
fn close_notify_ends_input_and_incomplete_records_wait() {
    let (mut c, mut s) = pair(Suite::Aes256Gcm);
    let mut wire = Vec::new();
    c.seal(&[b"last"], &mut wire).unwrap();
    c.seal_alert(Alert::CloseNotify, &mut wire);
    c.seal(&[b"ignored"], &mut wire).unwrap();
    let cut = wire.len() - 3;
    let (mut plain, mut out) = (Vec::new(), Vec::new());
    let o = s.open(&mut wire[..cut], &mut plain, &mut out).unwrap();
    assert!(o.peer_closed);
    assert_eq!(
        o.consumed, cut,
        "what follows close_notify is dropped, not carried"
    );
    assert_eq!(plain, b"last");
    let (mut c, mut s) = pair(Suite::Aes256Gcm);
    let mut wire = Vec::new();
    c.seal(&[b"abc"], &mut wire).unwrap();
    let o = s.open(&mut wire[..10], &mut plain, &mut out).unwrap();
    assert_eq!(o.consumed, 0, "an incomplete record is left for later");
}

#[test]
fn expand_label_matches_rfc8448() {
    // RFC 8448 §3 (simple 1-RTT): server application traffic secret → key and iv.
    let secret = hex("a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643");
    let s = Secret::new(&secret).unwrap();
    let k = Keys::derive(Suite::Aes128Gcm, &s);
    assert_eq!(&k.key[..16], &hex("9f02283b6c9c07efc26bb9f2ac92e356")[..]);
    assert_eq!(&k.iv[..], &hex("cf782b88dd83549aadf1e984")[..]);
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
