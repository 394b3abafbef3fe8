//! Telling an unsupported HTTP version (505) from a garbled request line (400)
//! once httparse has refused the version token, in a way that never changes as
//! more bytes of the same line arrive (the fuzz tests rely on that).

/// What a version httparse refused is: a real but unsupported one (505), garbage
/// (400), or not known yet because the request line is still arriving.
#[derive(PartialEq, Eq)]
pub(super) enum VersionClass {
    Other,
    Garbage,
    Undecided,
}

/// Classifies the version token `HTTP/<digits>.<digits>` of the request line,
/// so that the answer never changes as more bytes of the same line arrive.
pub(super) fn classify_version(window: &[u8]) -> VersionClass {
    // httparse skips empty lines before the request line (RFC 9112 2.2).
    let start = window
        .iter()
        .position(|&b| b != b'\r' && b != b'\n')
        .unwrap_or(window.len());
    let window = &window[start..];
    let line_end = window.iter().position(|&b| b == b'\n');
    let line = &window[..line_end.unwrap_or(window.len())];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // httparse refused the version, so method SP target SP parsed: the version
    // token is everything after the second space.
    let mut spaces = line.iter().enumerate().filter(|&(_, &b)| b == b' ');
    let token = match (spaces.next(), spaces.next()) {
        (Some(_), Some((j, _))) => &line[j + 1..],
        _ => return VersionClass::Garbage,
    };
    let complete = line_end.is_some();
    // Walk the token through the pattern H T T P / digit+ . digit+ (≤ 3 digits each).
    let (prefix, rest) = token.split_at(token.len().min(5));
    if !b"HTTP/".starts_with(prefix) {
        return VersionClass::Garbage;
    }
    let mut parts = rest.splitn(2, |&b| b == b'.');
    let major = parts.next().unwrap_or_default();
    let minor = parts.next();
    let digits = |p: &[u8]| p.len() <= 3 && p.iter().all(u8::is_ascii_digit);
    let well_formed_so_far = digits(major) && minor.is_none_or(digits);
    if !well_formed_so_far {
        return VersionClass::Garbage;
    }
    let whole = prefix.len() == 5 && !major.is_empty() && minor.is_some_and(|m| !m.is_empty());
    match (complete, whole) {
        (true, true) => VersionClass::Other,
        (true, false) => VersionClass::Garbage,
        (false, _) => VersionClass::Undecided,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes() {
        let c = |s: &[u8]| classify_version(s);
        assert!(c(b"GET / HTTP/2.0\r\n") == VersionClass::Other);
        assert!(c(b"\r\nGET / HTTP/10.25\n") == VersionClass::Other);
        assert!(c(b"GET / HTTP/2\r\n") == VersionClass::Garbage);
        assert!(c(b"GET / HTTP/2.0 x\r\n") == VersionClass::Garbage);
        assert!(c(b"GET / HTTP/1234.0\r\n") == VersionClass::Garbage);
        assert!(c(b"GET / XTTP/2.0\r\n") == VersionClass::Garbage);
        assert!(c(b"GET /\r\n") == VersionClass::Garbage);
        assert!(c(b"GET / HTTP/2") == VersionClass::Undecided);
        assert!(c(b"GET / HT") == VersionClass::Undecided);
        assert!(c(b"GET / HX") == VersionClass::Garbage);
    }
}
