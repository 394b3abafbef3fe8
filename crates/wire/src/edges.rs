//! Bulk subscription bodies (B4): one edge `A B` per line ("A follows B"), the
//! igraph `write_edgelist` format. Blank lines and lines starting with `#` are
//! skipped; ids are decimal u64 separated by spaces or tabs.
//!
//! Hand-rolled (no UTF-8 or `str::parse` per token) because a bulk load carries
//! millions of lines. Not here: storing the edges.

/// A line of an edge list that is not `A B`.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct EdgeError {
    /// 1-based line number in the body.
    pub line: usize,
    pub reason: &'static str,
}

impl EdgeError {
    /// Always 400: the body is the client's mistake.
    pub fn status(&self) -> u16 {
        400
    }
}

/// Parses an edge list into `(subscriber, subject)` pairs, in order.
pub fn parse_edges(body: &[u8]) -> Result<Vec<(u64, u64)>, EdgeError> {
    // Roughly 12 bytes per line for typical ids: reserve once, not per doubling.
    let mut edges = Vec::with_capacity(body.len() / 12);
    for (idx, raw) in body.split(|&b| b == b'\n').enumerate() {
        let text = raw.strip_suffix(b"\r").unwrap_or(raw);
        match parse_line(text) {
            Ok(Some(edge)) => edges.push(edge),
            Ok(None) => {}
            Err(reason) => {
                return Err(EdgeError {
                    line: idx + 1,
                    reason,
                })
            }
        }
    }
    Ok(edges)
}

/// One line without its line end: `Ok(None)` for blank and comment lines.
fn parse_line(t: &[u8]) -> Result<Option<(u64, u64)>, &'static str> {
    let mut p = skip_blanks(t, 0);
    if p == t.len() || t[p] == b'#' {
        return Ok(None);
    }
    let a = parse_id(t, &mut p).ok_or("subscriber is not a decimal u64")?;
    p = skip_blanks(t, p);
    if p == t.len() {
        return Err("expected two ids");
    }
    let b = parse_id(t, &mut p).ok_or("subject is not a decimal u64")?;
    if skip_blanks(t, p) != t.len() {
        return Err("expected two ids");
    }
    Ok(Some((a, b)))
}

fn skip_blanks(t: &[u8], mut p: usize) -> usize {
    while p < t.len() && (t[p] == b' ' || t[p] == b'\t') {
        p += 1;
    }
    p
}

/// Decimal digits from `*p` up to a blank or the end of the line.
fn parse_id(t: &[u8], p: &mut usize) -> Option<u64> {
    let start = *p;
    let mut n: u64 = 0;
    while *p < t.len() && t[*p].is_ascii_digit() {
        n = n.checked_mul(10)?.checked_add(u64::from(t[*p] - b'0'))?;
        *p += 1;
    }
    let ends_token = *p == t.len() || t[*p] == b' ' || t[*p] == b'\t';
    (*p > start && ends_token).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_edges_comments_and_blank_lines() {
        let body = b"# igraph\n1 2\n\n  3\t4  \r\n#x\n18446744073709551615 0";
        assert_eq!(
            parse_edges(body).unwrap(),
            vec![(1, 2), (3, 4), (u64::MAX, 0)]
        );
        assert_eq!(parse_edges(b"").unwrap(), vec![]);
        assert_eq!(parse_edges(b"\n \n\t\n").unwrap(), vec![]);
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"1 2\n3", 2, "expected two ids"),
            (b"1 2 3", 1, "expected two ids"),
            (b"\n\n-1 2", 3, "subscriber"),
            (b"1 x", 1, "subject"),
            (b"1 18446744073709551616", 1, "subject"),
            (b"1,2", 1, "subscriber"),
            (b"1 2 # trailing comment", 1, "expected two ids"),
            (b"1\x002", 1, "subscriber"),
        ];
        for (body, line, reason) in cases {
            let e = parse_edges(body).unwrap_err();
            assert_eq!(e.line, *line, "{:?}", String::from_utf8_lossy(body));
            assert!(e.reason.contains(reason), "{e}");
            assert_eq!(e.status(), 400);
        }
    }
}
