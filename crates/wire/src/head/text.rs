//! Byte-level helpers for header values and request targets.

/// Plain decimal digits (no sign, no spaces), at least one, fitting in u64.
pub(super) fn parse_decimal(v: &[u8]) -> Option<u64> {
    if v.is_empty() {
        return None;
    }
    let mut n: u64 = 0;
    for &b in v {
        if !b.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(n)
}

/// Strips optional whitespace (SP / HTAB) at both ends.
pub(super) fn trim_ows(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|&b| b != b' ' && b != b'\t')
        .map_or(start, |i| i + 1);
    &v[start..end]
}

pub(super) fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// Splits a request target into (authority, path, query). Origin-form (`/p?q`) has
/// no authority; absolute-form (`http://host/p?q`, RFC 9112 3.2.2) yields its
/// authority (without userinfo) and is reduced to its path (`/` when empty).
pub(super) fn split_target(target: &str) -> (Option<&str>, &str, Option<&str>) {
    let mut authority = None;
    let mut t = target;
    for scheme in ["http://", "https://"] {
        // `get` (not indexing): the target may hold multi-byte characters.
        if t.get(..scheme.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(scheme))
        {
            let rest = &t[scheme.len()..];
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let auth = &rest[..end];
            authority = Some(auth.rsplit_once('@').map_or(auth, |(_, host)| host));
            t = if end == rest.len() { "/" } else { &rest[end..] };
            break;
        }
    }
    match t.split_once('?') {
        Some((p, q)) => (authority, if p.is_empty() { "/" } else { p }, Some(q)),
        None => (authority, t, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"007"), Some(7));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"18446744073709551616",
            b"-1",
            b"+1",
            b" 1",
            b"1a",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ows() {
        assert_eq!(trim_ows(b" \t a b \t"), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b""), b"");
    }

    #[test]
    fn contains() {
        assert!(contains_ignore_case(
            b"text/html, TEXT/Event-Stream",
            b"text/event-stream"
        ));
        assert!(!contains_ignore_case(b"text/event", b"text/event-stream"));
    }

    #[test]
    fn targets() {
        assert_eq!(split_target("/a?b=1"), (None, "/a", Some("b=1")));
        assert_eq!(split_target("/a"), (None, "/a", None));
        assert_eq!(split_target("/a?"), (None, "/a", Some("")));
        assert_eq!(
            split_target("https://h:1/x?y"),
            (Some("h:1"), "/x", Some("y"))
        );
        assert_eq!(split_target("HTTP://h?q"), (Some("h"), "/", Some("q")));
        assert_eq!(split_target("http://h"), (Some("h"), "/", None));
        assert_eq!(split_target("http://u:p@h/s"), (Some("h"), "/s", None));
        assert_eq!(split_target("http:///x"), (Some(""), "/x", None));
        assert_eq!(split_target("*"), (None, "*", None));
        assert_eq!(split_target("ftp://h/x"), (None, "ftp://h/x", None));
    }
}
