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
