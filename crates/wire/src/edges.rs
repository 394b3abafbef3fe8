//! Bulk subscription bodies (B4): one edge `A B` per line ("A follows B"), the
//! igraph `write_edgelist` format. Blank lines and lines starting with `#` are
//! skipped; ids are decimal u64 separated by spaces or tabs.
//!
//! Hand-rolled (no UTF-8 or `str::parse` per token) because a bulk load carries
//! millions of lines. Not here: storing the edges.

/// Default most edges in one request ([`parse_edges_with`]): 16 MB of parsed pairs,
/// and a bound on how long one request can keep the router busy.
pub const DEFAULT_MAX_EDGES: usize = 1_000_000;

/// A line of an edge list that is not `A B`, or a list over its limit.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct EdgeError {
    /// 1-based line number in the body.
    pub line: usize,
    pub reason: &'static str,
}

impl EdgeError {
    /// 400 for a malformed line, 413 for a list over the edge limit.
    pub fn status(&self) -> u16 {
        if self.reason == TOO_MANY {
            413
        } else {
            400
        }
    }
}

const TOO_MANY: &str = "too many edges in one request";

/// Parses an edge list into `(subscriber, subject)` pairs, in order, with at most
/// [`DEFAULT_MAX_EDGES`] edges.
pub fn parse_edges(body: &[u8]) -> Result<Vec<(u64, u64)>, EdgeError> {
    parse_edges_with(body, DEFAULT_MAX_EDGES)
}

/// Parses an edge list of at most `max_edges` edges (the line of the first edge
/// past it is named in a 413).
pub fn parse_edges_with(body: &[u8], max_edges: usize) -> Result<Vec<(u64, u64)>, EdgeError> {
    // Roughly 12 bytes per line for typical ids: reserve once, not per doubling.
    let mut edges = Vec::with_capacity((body.len() / 12).min(max_edges));
    for (idx, raw) in body.split(|&b| b == b'\n').enumerate() {
        let text = raw.strip_suffix(b"\r").unwrap_or(raw);
        match parse_line(text) {
            Ok(Some(_)) if edges.len() == max_edges => {
                return Err(EdgeError {
                    line: idx + 1,
                    reason: TOO_MANY,
                })
            }
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

    #[test]
    fn edge_limit_is_413_naming_the_line() {
        let body = b"1 2\n# c\n\n3 4\n5 6\n";
        assert_eq!(parse_edges_with(body, 3).unwrap().len(), 3);
        let e = parse_edges_with(body, 2).unwrap_err();
        assert_eq!((e.line, e.status()), (5, 413));
        assert_eq!(e.to_string(), "line 5: too many edges in one request");
        assert_eq!(parse_edges_with(b"# only comments\n", 0).unwrap(), vec![]);
        assert_eq!(parse_edges_with(b"1 2", 0).unwrap_err().status(), 413);
        // A malformed line before the limit is still a 400.
        assert_eq!(
            parse_edges_with(b"x\n1 2\n3 4", 1).unwrap_err().status(),
            400
        );
    }
}
