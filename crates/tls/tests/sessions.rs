//! Server sessions against rustls's own client over in-memory buffers: handshakes with
//! each ALPN, protocol version and TLS 1.3 suite, application data both ways cut at
//! arbitrary points, KeyUpdate, close_notify.

mod common;

use common::{client, client_config, opts, pki, server_config, Pair};
use rand::{Rng, SeedableRng};
use rustls::CipherSuite;
use tls::{Alpn, Phase, ServerOptions, ServerSession, Suite};

#[test]
fn handshakes_agree_on_each_alpn_and_data_flows_both_ways() {
    let pki = pki();
    // (server offers, client offers, agreed)
    type Case<'a> = (&'a [Alpn], &'a [&'a [u8]], Alpn);
    let cases: [Case; 4] = [
        (&[Alpn::H2, Alpn::Http11], &[b"h2", b"http/1.1"], Alpn::H2),
        (&[Alpn::H2, Alpn::Http11], &[b"http/1.1"], Alpn::Http11),
        (&[Alpn::Http11], &[b"h2", b"http/1.1"], Alpn::Http11),
        (&[Alpn::Http11], &[], Alpn::None),
    ];
    for (server_alpn, client_alpn, want) in cases {
        let sc = server_config(&pki, &opts(server_alpn));
        let mut p = Pair::new(
            client(client_config(&pki, client_alpn, false, None)),
            ServerSession::new(sc).unwrap(),
        );
        p.handshake();
        assert!(p.status.established);
        assert_eq!(p.server.alpn(), want);
        assert!(
            matches!(p.server.phase(), Phase::Lean(_)),
            "{:?}",
            p.server.phase()
        );
        p.client_writes(b"GET /sub/7 HTTP/1.1\r\n\r\n");
        let out = p.send_to_server(&mut |n| n).unwrap();
        assert!(out.is_empty(), "nothing to answer at the TLS level");
        assert_eq!(p.got, b"GET /sub/7 HTTP/1.1\r\n\r\n");
        let mut out = Vec::new();
        p.server
            .encrypt(&[b"HTTP/1.1 200 OK\r\n", b"\r\n", b"welcome"], &mut out)
            .unwrap();
        p.send_to_client(&out).unwrap();
        assert_eq!(p.client_reads(), b"HTTP/1.1 200 OK\r\n\r\nwelcome");
    }
}

#[test]
fn every_tls13_suite_goes_lean_and_tls12_stays_in_rustls() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    for (suite, want) in [
        (CipherSuite::TLS13_AES_128_GCM_SHA256, Suite::Aes128Gcm),
        (CipherSuite::TLS13_AES_256_GCM_SHA384, Suite::Aes256Gcm),
        (
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
            Suite::Chacha20Poly1305,
        ),
    ] {
        let mut p = Pair::new(
            client(client_config(&pki, &[], false, Some(suite))),
            ServerSession::new(sc.clone()).unwrap(),
        );
        p.handshake();
        assert_eq!(p.server.phase(), Phase::Lean(want));
        p.client_writes(b"ping");
        p.send_to_server(&mut |n| n).unwrap();
        assert_eq!(p.got, b"ping");
    }
    let mut p = Pair::new(
        client(client_config(&pki, &[b"http/1.1"], true, None)),
        ServerSession::new(sc.clone()).unwrap(),
    );
    p.handshake();
    assert_eq!(p.server.phase(), Phase::Rustls);
    assert_eq!(
        p.client.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    p.client_writes(b"over tls 1.2");
    p.send_to_server(&mut |n| n).unwrap();
    assert_eq!(p.got, b"over tls 1.2");
    let mut out = Vec::new();
    p.server.encrypt(&[b"back", b" again"], &mut out).unwrap();
    p.send_to_client(&out).unwrap();
    assert_eq!(p.client_reads(), b"back again");
    // A server configured for TLS 1.3 only refuses a TLS 1.2-only client.
    let sc13 = server_config(
        &pki,
        &ServerOptions {
            tls12: false,
            ..ServerOptions::default()
        },
    );
    let mut p = Pair::new(
        client(client_config(&pki, &[], true, None)),
        ServerSession::new(sc13).unwrap(),
    );
    let out = p.send_to_server(&mut |n| n);
    assert!(out.is_err());
    assert_eq!(p.server.phase(), Phase::Closed);
}

/// Property: whatever the split of the client's bytes into reads (the handshake flight,
/// the Finished with application data in the same flight, records cut anywhere) and
/// however the server's output is cut into parts, the plaintext arrives intact.
#[test]
fn data_survives_arbitrary_split_points() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    for seed in 0..64u64 {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
        let suite = [
            CipherSuite::TLS13_AES_128_GCM_SHA256,
            CipherSuite::TLS13_AES_256_GCM_SHA384,
            CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
        ][rng.gen_range(0..3)];
        let mut p = Pair::new(
            client(client_config(&pki, &[], false, Some(suite))),
            ServerSession::new(sc.clone()).unwrap(),
        );
        let max_piece = [1, 3, 7, 64, 700, 5000][rng.gen_range(0..6)];
        let mut split = move |left: usize| rng.gen_range(1..=max_piece.min(left));
        let mut sent = Vec::new();
        for round in 0..10 {
            if round == 1 {
                // Sent right behind the client's Finished: crosses the takeover.
                let early: Vec<u8> = (0..300).map(|i| (i * 7 + seed as usize) as u8).collect();
                p.client_writes(&early);
                sent.extend_from_slice(&early);
            }
            let out = p.send_to_server(&mut split).unwrap();
            p.send_to_client(&out).unwrap();
            if !p.client.is_handshaking() && !p.client.wants_write() && round > 1 {
                break;
            }
        }
        let big: Vec<u8> = (0..40_000).map(|i| (i % 251) as u8).collect();
        p.client_writes(&big);
        sent.extend_from_slice(&big);
        p.send_to_server(&mut split).unwrap();
        assert_eq!(p.got, sent, "seed {seed}");
        assert_eq!(
            p.server.carried_bytes(),
            0,
            "nothing carried once records are whole"
        );

        let mut expect = Vec::new();
        let mut out = Vec::new();
        for k in 0..20 {
            let a = vec![k as u8; k * 97];
            let b = format!("id: {k}\n");
            p.server.encrypt(&[b.as_bytes(), &a], &mut out).unwrap();
            expect.extend_from_slice(b.as_bytes());
            expect.extend_from_slice(&a);
        }
        p.send_to_client(&out).unwrap();
        assert_eq!(p.client_reads(), expect, "seed {seed}");
    }
}

#[test]
fn key_updates_from_the_client_are_followed() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    let mut p = Pair::new(
        client(client_config(&pki, &[], false, None)),
        ServerSession::new(sc).unwrap(),
    );
    p.handshake();
    for i in 0..3 {
        p.client.refresh_traffic_keys().unwrap();
        p.client_writes(format!("after update {i};").as_bytes());
        let out = p.send_to_server(&mut |n| n).unwrap();
        // rustls asks for our update too; our answer must let it read our next records.
        p.send_to_client(&out).unwrap();
        let mut reply = Vec::new();
        p.server
            .encrypt(&[format!("ack {i};").as_bytes()], &mut reply)
            .unwrap();
        p.send_to_client(&reply).unwrap();
        assert_eq!(p.client_reads(), format!("ack {i};").as_bytes());
    }
    assert_eq!(p.got, b"after update 0;after update 1;after update 2;");
}

#[test]
fn close_notify_both_ways() {
    let pki = pki();
    let sc = server_config(&pki, &opts(&[Alpn::Http11]));
    let mut p = Pair::new(
        client(client_config(&pki, &[], false, None)),
        ServerSession::new(sc.clone()).unwrap(),
    );
    p.handshake();
    p.client_writes(b"bye");
    p.client.send_close_notify();
    p.send_to_server(&mut |n| n).unwrap();
    assert!(p.status.peer_closed);
    assert_eq!(p.got, b"bye");
    let mut out = Vec::new();
    p.server.close(&mut out);
    assert_eq!(p.server.phase(), Phase::Closed);
    p.send_to_client(&out).unwrap();
    let mut buf = [0u8; 8];
    use std::io::Read;
    assert_eq!(p.client.reader().read(&mut buf).unwrap(), 0, "clean EOF");
}
