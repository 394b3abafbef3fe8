//! Batch publish bodies (C2): NDJSON, one `{"subject": <u64>, "data": <string>}`
//! object per line. Blank lines are skipped; anything else that is not such an
//! object is an error naming its 1-based line number (the whole batch is refused,
//! so a client never has to guess which half went out).
//!
//! Not here: size limits (the body decoder bounds the body) and publishing itself.

/// One message of a batch publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchItem {
    pub subject: u64,
    /// The payload: the UTF-8 bytes of the JSON string `data`.
    pub data: Vec<u8>,
}

/// A batch line that is not a valid item.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct BatchError {
    /// 1-based line number in the body.
    pub line: usize,
    pub reason: String,
}

impl BatchError {
    /// Always 400: the body is the client's mistake.
    pub fn status(&self) -> u16 {
        400
    }
}

/// Parses an NDJSON batch publish body.
pub fn parse_batch(body: &[u8]) -> Result<Vec<BatchItem>, BatchError> {
    let mut items = Vec::new();
    for (idx, raw) in body.split(|&b| b == b'\n').enumerate() {
        let line = idx + 1;
        let text = raw.strip_suffix(b"\r").unwrap_or(raw);
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let err = |reason: String| BatchError { line, reason };
        let value: serde_json::Value =
            serde_json::from_slice(text).map_err(|e| err(format!("invalid JSON: {e}")))?;
        let obj = value
            .as_object()
            .ok_or_else(|| err("expected a JSON object".into()))?;
        let subject = obj
            .get("subject")
            .ok_or_else(|| err("missing \"subject\"".into()))?
            .as_u64()
            .ok_or_else(|| err("\"subject\" must be an unsigned integer".into()))?;
        let data = obj
            .get("data")
            .ok_or_else(|| err("missing \"data\"".into()))?
            .as_str()
            .ok_or_else(|| err("\"data\" must be a string".into()))?;
        items.push(BatchItem {
            subject,
            data: data.as_bytes().to_vec(),
        });
    }
    Ok(items)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_skips_blank_ones() {
        let body = b"{\"subject\":1,\"data\":\"hi\"}\n\r\n  \n{\"data\":\"a\\nb\",\"subject\":18446744073709551615}\r\n";
        let items = parse_batch(body).unwrap();
        assert_eq!(
            items,
            vec![
                BatchItem {
                    subject: 1,
                    data: b"hi".to_vec()
                },
                BatchItem {
                    subject: u64::MAX,
                    data: b"a\nb".to_vec()
                },
            ]
        );
    }

    #[test]
    fn empty_body_is_an_empty_batch() {
        assert_eq!(parse_batch(b"").unwrap(), vec![]);
        assert_eq!(parse_batch(b"\n\n").unwrap(), vec![]);
    }

    #[test]
    fn unknown_fields_are_ignored() {
        let items = parse_batch(br#"{"subject":7,"data":"x","ts":1}"#).unwrap();
        assert_eq!(
            items,
            vec![BatchItem {
                subject: 7,
                data: b"x".to_vec()
            }]
        );
    }

    #[test]
    fn errors_name_the_line() {
        let cases: &[(&[u8], usize, &str)] = &[
            (
                b"{\"subject\":1,\"data\":\"a\"}\nnot json",
                2,
                "invalid JSON",
            ),
            (b"\n\n[1,2]", 3, "expected a JSON object"),
            (b"{\"data\":\"a\"}", 1, "missing \"subject\""),
            (b"{\"subject\":-1,\"data\":\"a\"}", 1, "unsigned integer"),
            (b"{\"subject\":1.5,\"data\":\"a\"}", 1, "unsigned integer"),
            (b"{\"subject\":\"1\",\"data\":\"a\"}", 1, "unsigned integer"),
            (b"{\"subject\":1}", 1, "missing \"data\""),
            (b"{\"subject\":1,\"data\":5}", 1, "must be a string"),
            (b"{\"subject\":1,\"data\":\"\xff\"}", 1, "invalid JSON"),
            (b"{\"subject\":1,\"data\":\"a\"} x", 1, "invalid JSON"),
        ];
        for (body, line, reason) in cases {
            let e = parse_batch(body).unwrap_err();
            assert_eq!(e.line, *line, "{:?}", String::from_utf8_lossy(body));
            assert!(e.reason.contains(reason), "{e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")));
            assert_eq!(e.status(), 400);
        }
    }
}
