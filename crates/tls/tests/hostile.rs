//! Hostile peers over memory: a client that stops mid-handshake, garbage instead of a
//! ClientHello, oversized and forged records before and after the handshake. Every
//! refusal must leave an alert in the output (where TLS has one) and a closed session.

mod common;

use common::{client, client_config, opts, pki, server_config, Pair};
use tls::{Alert, Alpn, Phase, ServerSession, TlsError};

/// A plaintext TLS alert record: type 21, version, length 2, level, description.
fn is_plain_alert(out: &[u8], desc: u8) -> bool {
    out.len() >= 7 && out[0] == 21 && out[3..5] == [0, 2] && out[6] == desc
}

#[test]
fn a_client_that_stops_mid_handshake_leaves_a_waiting_session() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    let mut c = client(client_config(&pki, &[], false, None));
    let mut hello = Vec::new();
    c.write_tls(&mut hello).unwrap();
    // Half a ClientHello: nothing to answer yet, the bytes are carried.
    let mut s = ServerSession::new(sc.clone()).unwrap();
    let (mut out, mut plain) = (Vec::new(), Vec::new());
    let half = hello.len() / 2;
    let st = s
        .handle_input(&mut hello[..half].to_vec(), &mut out, &mut plain)
        .unwrap();
    assert!(!st.established && out.is_empty());
    assert_eq!(s.phase(), Phase::Handshaking);
    assert_eq!(s.carried_bytes(), half);
    // A whole ClientHello, then silence: the server flight goes out, the session waits
    // for the client's Finished (the caller's head timeout ends it).
    let mut p = Pair::new(
        client(client_config(&pki, &[], false, None)),
        ServerSession::new(sc).unwrap(),
    );
    let flight = p.send_to_server(&mut |n| n).unwrap();
    assert!(flight.len() > 200, "ServerHello … Finished");
    assert_eq!(p.server.phase(), Phase::Handshaking);
    let mut out = Vec::new();
    assert!(matches!(
        p.server.encrypt(&[b"too early"], &mut out),
        Err(TlsError::NotEstablished)
    ));
}

#[test]
fn garbage_instead_of_a_client_hello_is_refused() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    for garbage in [
        &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..],
        &[0x16, 3, 1, 0, 5, 1, 0, 0, 1, 0xff][..], // a handshake record holding a broken ClientHello
        &[0x17, 3, 3, 0, 3, 1, 2, 3][..],          // application data before any handshake
    ] {
        let mut s = ServerSession::new(sc.clone()).unwrap();
        let (mut out, mut plain) = (Vec::new(), Vec::new());
        let r = s.handle_input(&mut garbage.to_vec(), &mut out, &mut plain);
        assert!(
            matches!(r, Err(TlsError::Protocol(_))),
            "{garbage:?}: {r:?}"
        );
        assert_eq!(s.phase(), Phase::Closed);
        assert!(plain.is_empty());
        if garbage[0] != b'G' {
            assert!(
                out.first() == Some(&21),
                "an alert record for {garbage:?}: {out:?}"
            );
        }
        // A closed session swallows anything further without output.
        let r = s.handle_input(&mut b"more".to_vec(), &mut out, &mut plain);
        assert!(r.is_ok() && plain.is_empty());
    }
}

/// rustls's deframer answers a record over its limit with decode_error (its choice; the
/// lean layer after the handshake sends record_overflow).
#[test]
fn an_oversized_record_in_the_handshake_is_refused_with_an_alert() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    let mut s = ServerSession::new(sc).unwrap();
    let mut rec = vec![0x16, 3, 3, 0x48, 0x01]; // 18,433 bytes claimed
    rec.resize(5 + 0x4801, 0);
    let (mut out, mut plain) = (Vec::new(), Vec::new());
    let r = s.handle_input(&mut rec, &mut out, &mut plain);
    assert!(r.is_err(), "{r:?}");
    assert!(is_plain_alert(&out, Alert::DecodeError as u8), "{out:?}");
    assert_eq!(s.phase(), Phase::Closed);
}

/// After the handshake: the lean layer's refusals reach rustls's client as alerts.
#[test]
fn oversized_and_forged_records_after_the_handshake_get_alerts() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    let cases: [(&str, Alert); 3] = [
        ("oversized", Alert::RecordOverflow),
        ("forged", Alert::BadRecordMac),
        ("plaintext handshake", Alert::UnexpectedMessage),
    ];
    for (what, alert) in cases {
        let mut p = Pair::new(
            client(client_config(&pki, &[], false, None)),
            ServerSession::new(sc.clone()).unwrap(),
        );
        p.handshake();
        assert!(matches!(p.server.phase(), Phase::Lean(_)));
        let mut rec = match what {
            "oversized" => {
                let mut r = vec![0x17, 3, 3, 0x41, 0x01]; // 16,641 > 2^14 + 256
                r.resize(5 + 0x4101, 0);
                r
            }
            "forged" => {
                p.client_writes(b"hello");
                let mut wire = Vec::new();
                p.client.write_tls(&mut wire).unwrap();
                let last = wire.len() - 1;
                wire[last] ^= 0x80; // flip a tag bit
                wire
            }
            _ => vec![0x16, 3, 3, 0, 4, 1, 0, 0, 0],
        };
        let (mut out, mut plain) = (Vec::new(), Vec::new());
        let r = p.server.handle_input(&mut rec, &mut out, &mut plain);
        assert!(
            matches!(r, Err(TlsError::Refused(a)) if a == alert),
            "{what}: {r:?}"
        );
        assert!(plain.is_empty());
        assert_eq!(p.server.phase(), Phase::Closed);
        // The alert is encrypted under the session keys; rustls decrypts and reports it.
        let verdict = p.send_to_client(&out);
        let want = match alert {
            Alert::RecordOverflow => rustls::AlertDescription::RecordOverflow,
            Alert::BadRecordMac => rustls::AlertDescription::BadRecordMac,
            _ => rustls::AlertDescription::UnexpectedMessage,
        };
        assert_eq!(verdict, Err(rustls::Error::AlertReceived(want)), "{what}");
    }
}

#[test]
fn a_tls12_session_refuses_an_oversized_record_through_rustls() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    let mut p = Pair::new(
        client(client_config(&pki, &[], true, None)),
        ServerSession::new(sc).unwrap(),
    );
    p.handshake();
    assert_eq!(p.server.phase(), Phase::Rustls);
    let mut rec = vec![0x17, 3, 3, 0x48, 0x01];
    rec.resize(5 + 0x4801, 0);
    let (mut out, mut plain) = (Vec::new(), Vec::new());
    assert!(p
        .server
        .handle_input(&mut rec, &mut out, &mut plain)
        .is_err());
    assert_eq!(p.server.phase(), Phase::Closed);
    assert_eq!(
        p.send_to_client(&out),
        Err(rustls::Error::AlertReceived(
            rustls::AlertDescription::DecodeError
        ))
    );
}
