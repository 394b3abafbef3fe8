//! [`Since`]: where a client resumes a subscription (SPEC B6), as sent in
//! `Last-Event-ID` or `?since=`: `<seq>` or `<epoch>-<seq>`.
//!
//! The epoch names one incarnation of the user's history (a restarted server or
//! an expired history starts a new one), so a resume position from another
//! incarnation is detected instead of being read against the wrong numbers. A bare
//! `<seq>` (clients from before epochs, hand-typed URLs) carries no epoch: the
//! router then trusts it as belonging to the current incarnation.
//!
//! Both numbers are canonical decimals (no sign, no leading zero), like ids in paths.

/// A resume position: the last sequence number the client saw, and the epoch it
/// belongs to when the client knows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Since {
    pub epoch: Option<u32>,
    pub seq: u64,
}

impl Since {
    /// Parses `<seq>` or `<epoch>-<seq>`; `None` for anything else.
    pub fn parse(v: &[u8]) -> Option<Since> {
        let text = std::str::from_utf8(v).ok()?;
        match text.split_once('-') {
            None => Some(Since {
                epoch: None,
                seq: canonical_u64(text)?,
            }),
            Some((e, s)) => Some(Since {
                epoch: Some(u32::try_from(canonical_u64(e)?).ok()?),
                seq: canonical_u64(s)?,
            }),
        }
    }
}

/// Parses a composite position (docs/protocol.md "Channels"): one position per
/// stream of a connection, `_` between them, an empty part for a stream without
/// one. A plain position is a composite of one. At most 256 parts.
pub fn parse_positions(v: &[u8]) -> Option<Vec<Option<Since>>> {
    let mut out = Vec::new();
    for part in v.split(|&b| b == b'_') {
        if out.len() > crate::channel::MAX_PER_REQUEST {
            return None;
        }
        out.push(match part {
            b"" => None,
            part => Some(Since::parse(part)?),
        });
    }
    Some(out)
}

/// Writes the composite of `positions` in the form [`parse_positions`] reads.
pub fn write_positions(out: &mut Vec<u8>, positions: impl IntoIterator<Item = Option<Since>>) {
    use std::io::Write;
    for (i, p) in positions.into_iter().enumerate() {
        if i > 0 {
            out.push(b'_');
        }
        if let Some(p) = p {
            let _ = write!(out, "{p}");
        }
    }
}

impl std::fmt::Display for Since {
    /// The form [`Since::parse`] reads back (and the form an SSE `id:` line should use).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.epoch {
            Some(e) => write!(f, "{e}-{}", self.seq),
            None => write!(f, "{}", self.seq),
        }
    }
}

/// Canonical decimal u64: digits only, no leading zero unless the number is `0`.
pub(crate) fn canonical_u64(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.is_empty() || (b.len() > 1 && b[0] == b'0') || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn composite_positions_read_back_what_was_written() {
        let at = |e, s| {
            Some(Since {
                epoch: Some(e),
                seq: s,
            })
        };
        let list = vec![at(7, 12), None, at(9, 0)];
        let mut out = Vec::new();
        write_positions(&mut out, list.clone());
        assert_eq!(out, b"7-12__9-0");
        assert_eq!(parse_positions(&out), Some(list));
        assert_eq!(
            parse_positions(b"5"),
            Some(vec![Some(Since {
                epoch: None,
                seq: 5
            })])
        );
        assert_eq!(parse_positions(b""), Some(vec![None]));
        assert_eq!(parse_positions(b"1-x_2"), None);
        assert_eq!(parse_positions(&b"_".repeat(300)), None);
    }

    #[test]
    fn forms_round_trip() {
        let p = |s: &str| Since::parse(s.as_bytes());
        assert_eq!(
            p("0"),
            Some(Since {
                epoch: None,
                seq: 0
            })
        );
        assert_eq!(
            p("42"),
            Some(Since {
                epoch: None,
                seq: 42
            })
        );
        assert_eq!(
            p("4294967295-18446744073709551615"),
            Some(Since {
                epoch: Some(u32::MAX),
                seq: u64::MAX
            })
        );
        assert_eq!(
            p("0-0"),
            Some(Since {
                epoch: Some(0),
                seq: 0
            })
        );
        for s in ["42", "7-9", "0-0", "4294967295-1"] {
            assert_eq!(p(s).unwrap().to_string(), s);
        }
        for bad in [
            "",
            "-",
            "-1",
            "1-",
            "01",
            "1-01",
            "4294967296-1",
            "1-2-3",
            " 1",
            "1 ",
            "a",
            "1.5",
            "18446744073709551616",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
        assert_eq!(Since::parse(b"\xff"), None);
    }
}
