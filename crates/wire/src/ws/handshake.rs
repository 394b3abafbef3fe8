//! The server side of the opening handshake (RFC 6455 4.2.2). The request side
//! (validating the client's headers) is in `head`.

use base64::Engine as _;

/// The fixed GUID appended to the client's key (RFC 6455 1.3).
const WS_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key`.
pub fn ws_accept_key(key: &str) -> String {
    let mut sha = sha1_smol::Sha1::new();
    sha.update(key.as_bytes());
    sha.update(WS_GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(sha.digest().bytes())
}

/// Appends the `101 Switching Protocols` answer to a valid upgrade request.
pub fn write_ws_handshake(out: &mut Vec<u8>, key: &str) {
    out.extend_from_slice(
        b"HTTP/1.1 101 Switching Protocols\r\n\
          Upgrade: websocket\r\n\
          Connection: Upgrade\r\n\
          Sec-WebSocket-Accept: ",
    );
    out.extend_from_slice(ws_accept_key(key).as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc6455_example_key() {
        // RFC 6455 1.3 (a base64 SHA-1 is 28 characters).
        assert_eq!(
            ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn handshake_response_bytes() {
        assert_eq!(
            {
                let mut out = Vec::new();
                write_ws_handshake(&mut out, "dGhlIHNhbXBsZSBub25jZQ==");
                out
            },
            b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
        );
    }
}
