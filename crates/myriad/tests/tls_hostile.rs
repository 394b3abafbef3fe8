//! The hostile suite over TLS (issue 13): bad handshakes (garbage, plain HTTP, SSLv2,
//! data before a handshake, no common cipher suite, an oversized handshake record),
//! clients that stop mid-handshake (silent, half a ClientHello, a whole ClientHello
//! then nothing — one and fifty at once), renegotiation (TLS 1.2 through OpenSSL, a
//! ClientHello inside an established TLS 1.3 session), oversized records, and
//! malformed HTTP inside TLS each get the right alert, answer or close; afterwards the
//! server still serves and holds no leaked connection.

mod common;
mod tls_common;

use common::{read_all, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;
use tls_common::*;

/// TLS record content type of an alert.
const ALERT: u8 = 0x15;

/// Reads until the server closes; panics if it does not within the read timeout.
fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("the server did not close ({e}); got {} bytes", out.len()),
        }
    }
}

/// The content types of the TLS records in `bytes`, in order.
fn record_types(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 5 {
        let len = u16::from_be_bytes([bytes[3], bytes[4]]) as usize;
        types.push(bytes[0]);
        bytes = &bytes[(5 + len).min(bytes.len())..];
    }
    types
}

/// A real ClientHello (rustls's, trusting the PKI) as the first flight of a client.
fn client_hello(pki: &Pki) -> Vec<u8> {
    let name = tls::server_name("localhost").unwrap();
    let mut conn = tls::rustls::ClientConnection::new(pki.client(), name).unwrap();
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).unwrap();
    hello
}

fn raw(server: &Server) -> TcpStream {
    let s = TcpStream::connect(server.addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s
}

/// After the cases: every hostile connection is gone and a subscriber still gets a
/// message.
fn still_serves(pki: &Pki, server: &Server) {
    let client = pki.client();
    wait_stats(server, &client, "hostile connections gone", |s| {
        s["connections"] == 1 && s["connections_logged_in"] == 0
    });
    let mut sub = connect(server, &client).unwrap();
    sub.write_all(b"GET /sub/3 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut buf = Vec::new();
    read_until(&mut sub, &mut buf, "welcome 3");
    assert_eq!(publish(server, &client, 3, "still here"), 1);
    read_until(&mut sub, &mut buf, "still here");
}

#[test]
fn bad_handshakes_get_an_alert_and_a_close() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    // A ClientHello (TLS 1.2 layout, no extensions) offering only
    // TLS_RSA_WITH_3DES_EDE_CBC_SHA, which no TLS 1.3 or modern 1.2 server has.
    let mut no_common_suite = vec![0x16, 0x03, 0x01, 0x00, 0x2d];
    no_common_suite.extend([0x01, 0x00, 0x00, 0x29, 0x03, 0x03]);
    no_common_suite.extend([0x42; 32]);
    no_common_suite.extend([0x00, 0x00, 0x02, 0x00, 0x0a, 0x01, 0x00]);
    // A handshake record announcing more than any TLS record may hold (65,535 bytes;
    // the limit is 2^14 + 2,048): refused on its header, before the body is waited
    // for, so the server never buffers it (only a little of it is sent: a close with
    // unread bytes would be a reset, losing the alert). A length between 2^14 and that
    // limit is read whole (at most 18 KB, bounded by the head timeout) and refused then.
    let mut oversized = vec![0x16, 0x03, 0x01, 0xff, 0xff];
    oversized.resize(5 + 16, 0);
    let cases: [(&str, &[u8]); 6] = [
        (
            "a ClientHello with no cipher suite in common",
            &no_common_suite,
        ),
        ("an oversized handshake record", &oversized),
        (
            "plain HTTP on the TLS port",
            b"GET /sub/1 HTTP/1.1\r\nHost: t\r\n\r\n",
        ),
        (
            "a handshake record holding garbage",
            b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\xff",
        ),
        (
            "an SSLv2-style hello",
            b"\x80\x2e\x01\x03\x01\x00\x15\x00\x00\x00\x10",
        ),
        (
            "application data before any handshake",
            b"\x17\x03\x03\x00\x03abc",
        ),
    ];
    for (name, input) in cases {
        let mut s = raw(&server);
        s.write_all(input).unwrap();
        let out = read_all(&mut s);
        assert!(
            out.first() == Some(&ALERT),
            "{name}: expected an alert record, got {out:?}"
        );
        assert_eq!(
            out.len(),
            7,
            "{name}: one plaintext alert, then the close: {out:?}"
        );
    }
    still_serves(&pki, &server);
}

#[test]
fn a_handshake_that_stalls_is_closed_like_a_slow_head() {
    let pki = Pki::new();
    let server = pki.serve(&["--head-timeout", "1"]);
    // Nothing at all after connecting.
    let mut silent = raw(&server);
    // The first bytes of a ClientHello, then nothing.
    let mut partial = raw(&server);
    partial
        .write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        .unwrap();
    // A finished handshake, then half a request head: the 408 comes sealed.
    let mut slow = connect(&server, &pki.client()).unwrap();
    slow.write_all(b"GET /sub/1 HTTP/1.1\r\nHo").unwrap();
    assert_eq!(read_all(&mut silent), b"", "closed without a word");
    assert_eq!(read_all(&mut partial), b"", "closed without a word");
    let mut out = Vec::new();
    let _ = slow.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 408"), "{text:?}");
    still_serves(&pki, &server);
}

#[test]
fn an_oversized_record_gets_record_overflow() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let mut s = connect(&server, &pki.client()).unwrap();
    // Past rustls, straight to the socket: a record longer than 2^14 + 256 bytes.
    let len = (1 << 14) + 256 + 1;
    let mut record = vec![0x17, 0x03, 0x03, (len >> 8) as u8, len as u8];
    record.resize(5 + len, 0);
    let _ = s.sock.write_all(&record);
    let mut out = Vec::new();
    let err = s
        .read_to_end(&mut out)
        .expect_err("an alert, not a clean end");
    assert!(err.to_string().contains("RecordOverflow"), "{err}");
    still_serves(&pki, &server);
}

#[test]
fn http_errors_inside_tls_get_their_status() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let client = pki.client();
    let cases: [(&[u8], &str); 4] = [
        (b"GARBAGE\r\n\r\n", "HTTP/1.1 400"),
        (
            b"GET /nowhere HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            "HTTP/1.1 404",
        ),
        (
            b"DELETE /pub/1 HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
            "HTTP/1.1 405",
        ),
        (b"GET /sub/1 HTTP/2.0\r\nHost: t\r\n\r\n", "HTTP/1.1 505"),
    ];
    for (input, want) in cases {
        let mut s = connect(&server, &client).unwrap();
        s.write_all(input).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with(want), "{want}: {text:?}");
    }
    let mut big = b"GET /sub/1 HTTP/1.1\r\nX: ".to_vec();
    big.resize(20_000, b'a');
    let mut s = connect(&server, &client).unwrap();
    let _ = s.write_all(&big);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(String::from_utf8_lossy(&out).starts_with("HTTP/1.1 431"));
    still_serves(&pki, &server);
}

/// OpenSSL's `s_client` asks for a TLS 1.2 renegotiation (`R`); rustls answers the
/// `no_renegotiation` alert (OpenSSL then gives up on the connection itself) and the
/// server goes on serving.
#[test]
fn a_renegotiation_attempt_is_refused() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let mut child = Command::new("openssl")
        .args(["s_client", "-tls1_2", "-connect"])
        .arg(server.addr.to_string())
        .args(["-servername", "localhost", "-CAfile"])
        .arg(&pki.ca_file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("openssl must be installed (apt-get install -y openssl)");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"R\n").unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let _ = stdin.write_all(b"GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("RENEGOTIATING"),
        "openssl did not try: {text}"
    );
    assert!(text.contains("Verify return code: 0 (ok)"), "{text}");
    assert!(text.contains("no renegotiation"), "{text}");
    still_serves(&pki, &server);
}

/// Clients that send a whole, valid ClientHello, get the server's flight and then
/// stop: each holds a handshaking session (~4 KB of rustls state) only until the head
/// timeout, then is closed without a further word. Fifty at once, then one alone.
#[test]
fn clients_that_stop_after_their_client_hello_are_closed_at_the_head_timeout() {
    let pki = Pki::new();
    let server = pki.serve(&["--head-timeout", "1"]);
    let hello = client_hello(&pki);
    let mut stalled: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut s = raw(&server);
            s.write_all(&hello).unwrap();
            s
        })
        .collect();
    for s in &mut stalled {
        let out = until_closed(s);
        let types = record_types(&out);
        // ServerHello (handshake), then the encrypted rest of the flight (TLS 1.3
        // wraps it as application data, after an optional change_cipher_spec).
        assert_eq!(types.first(), Some(&0x16), "{types:?}");
        assert!(
            !types.contains(&ALERT),
            "closed without an alert: {types:?}"
        );
    }
    still_serves(&pki, &server);
}

/// A ClientHello inside an established TLS 1.3 session (a renegotiation attempt,
/// which TLS 1.3 does not have), as a plaintext handshake record: refused with a fatal
/// alert and a close, and the server goes on serving. Two timings, each made certain:
/// after the server's session tickets arrived (the server's lean record layer holds
/// the session: `unexpected_message`), and in the same write as the client's Finished
/// (rustls, still holding the handshake, tries to open it with the new keys:
/// `bad_record_mac`).
#[test]
fn a_client_hello_after_a_tls13_handshake_is_refused() {
    let pki = Pki::new();
    let server = pki.serve(&[]);
    let name = || tls::server_name("localhost").unwrap();

    let mut s = connect(&server, &pki.client()).unwrap();
    assert_eq!(
        s.conn.protocol_version(),
        Some(tls::rustls::ProtocolVersion::TLSv1_3)
    );
    // The tickets come once the server has the client's Finished.
    s.conn.read_tls(&mut s.sock).unwrap();
    s.conn.process_new_packets().unwrap();
    s.sock.write_all(&client_hello(&pki)).unwrap();
    let mut out = Vec::new();
    let err = s
        .read_to_end(&mut out)
        .expect_err("an alert, not a clean end");
    assert!(err.to_string().contains("UnexpectedMessage"), "{err}");

    let mut tcp = raw(&server);
    let mut conn = tls::rustls::ClientConnection::new(pki.client(), name()).unwrap();
    let mut flight = Vec::new();
    conn.write_tls(&mut flight).unwrap();
    tcp.write_all(&flight).unwrap();
    while conn.is_handshaking() {
        conn.read_tls(&mut tcp).unwrap();
        conn.process_new_packets().unwrap();
    }
    let mut finished = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut finished).unwrap();
    }
    finished.extend(client_hello(&pki));
    tcp.write_all(&finished).unwrap();
    let mut s = tls::rustls::StreamOwned::new(conn, tcp);
    let err = s
        .read_to_end(&mut out)
        .expect_err("an alert, not a clean end");
    assert!(err.to_string().contains("BadRecordMac"), "{err}");
    still_serves(&pki, &server);
}
