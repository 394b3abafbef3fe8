//! The hostile suite over TLS (issue 13): bad handshakes, a client that stops
//! mid-handshake, renegotiation, oversized records, and malformed HTTP inside TLS each
//! get the right alert, answer or close; afterwards the server still serves and holds
//! no leaked connection.

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
    let cases: [(&str, &[u8]); 4] = [
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
