//! A webhook receiver's answer (`hub::webhook::answer_status`, httparse underneath)
//! on arbitrary bytes: never a panic, and a status only from a complete HTTP/1.x
//! status line with a three-digit code (any: httparse reads `006` too, which is not a 2xx).
#![no_main]

use hub::webhook::{answer_status, Answer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Answer::Status(code) = answer_status(data) {
        // httparse skips empty lines before a message (RFC 9112 2.2).
        let start = data.iter().position(|b| !matches!(b, b'\r' | b'\n')).unwrap_or(0);
        assert!(data[start..].starts_with(b"HTTP/1."), "a status from {data:?}");
        assert!(data.windows(2).any(|w| w == b"\r\n"), "a status before the line ended");
        assert!(code <= 999, "code {code}");
    }
});
