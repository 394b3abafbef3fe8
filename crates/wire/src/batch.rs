//! Batch publish bodies (C2): NDJSON, one `{"subject": <u64>, "data": <string>}`
//! or `{"channel": <name>, "data": <string>}` object per line, all of a batch's
//! lines of one kind (a subject's order and a channel's are kept by different
//! routers). Blank lines are skipped; anything else that is not such an
//! object is an error naming its 1-based line number (the whole batch is refused,
//! so a client never has to guess which half went out).
//!
//! Each line is parsed straight into a typed struct (serde, no `serde_json::Value`
//! tree), so an abusive line such as `"data":[1,1,1,…]` is refused at its first
//! wrong token instead of being built in memory; a line longer than any valid item
//! could be is refused before parsing. Unknown fields are skipped without being
//! kept; a repeated field is an error.
//!
//! Not here: the size of the whole body (the body decoder bounds it) and publishing.

use std::borrow::Cow;

use serde::Deserialize;

/// Default most messages in one batch ([`BatchLimits::max_items`]).
pub const DEFAULT_MAX_BATCH_ITEMS: usize = 10_000;
/// Default largest payload of one item ([`BatchLimits::max_item`]): the default
/// `--max-message`, the same bound as `POST /pub/<id>`.
pub const DEFAULT_MAX_ITEM: usize = 64 * 1024;
/// JSON text allowed on a line beyond the payload's escaped form (field names,
/// the subject, whitespace, unknown fields).
const LINE_OVERHEAD: usize = 1024;

/// Bounds on a batch (each over-limit is a 413 naming the line).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Largest payload (`data` as UTF-8 bytes) of one item: `--max-message`.
    pub max_item: usize,
    /// Most items in one batch.
    pub max_items: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_item: DEFAULT_MAX_ITEM,
            max_items: DEFAULT_MAX_BATCH_ITEMS,
        }
    }
}

/// One message of a batch publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchItem {
    /// The subject (0 for a channel's item).
    pub subject: u64,
    /// The channel, for a `{"channel":…}` line (a valid name).
    pub channel: Option<String>,
    /// The payload: the UTF-8 bytes of the JSON string `data`.
    pub data: Vec<u8>,
}

/// A batch line that is not a valid item, or a batch over its limits.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[error("line {line}: {reason}")]
pub struct BatchError {
    /// 1-based line number in the body.
    pub line: usize,
    pub reason: String,
    /// True when a limit was exceeded (413) rather than the line being wrong (400).
    pub too_large: bool,
}

impl BatchError {
    /// 400 for a malformed line, 413 for an item or a batch over its limit.
    pub fn status(&self) -> u16 {
        if self.too_large {
            413
        } else {
            400
        }
    }
}

/// The JSON shape of one line. `data` borrows from the body when it has no escapes.
#[derive(Deserialize)]
struct Line<'a> {
    subject: Option<u64>,
    #[serde(borrow)]
    channel: Option<Cow<'a, str>>,
    #[serde(borrow)]
    data: Cow<'a, str>,
}

/// Parses an NDJSON batch publish body with the default [`BatchLimits`].
pub fn parse_batch(body: &[u8]) -> Result<Vec<BatchItem>, BatchError> {
    parse_batch_with(body, &BatchLimits::default())
}

/// Parses an NDJSON batch publish body; every item is at most `limits.max_item`
/// bytes, and there are at most `limits.max_items` of them.
pub fn parse_batch_with(body: &[u8], limits: &BatchLimits) -> Result<Vec<BatchItem>, BatchError> {
    // The longest a valid line can be: every payload byte escaped as \uXXXX.
    let max_line = limits
        .max_item
        .saturating_mul(6)
        .saturating_add(LINE_OVERHEAD);
    let mut items = Vec::new();
    for (idx, raw) in body.split(|&b| b == b'\n').enumerate() {
        let line = idx + 1;
        let text = raw.strip_suffix(b"\r").unwrap_or(raw);
        if text.iter().all(|b| b.is_ascii_whitespace()) {
            continue;
        }
        let err = |reason: String| BatchError {
            line,
            reason,
            too_large: false,
        };
        let big = |reason: String| BatchError {
            line,
            reason,
            too_large: true,
        };
        if items.len() == limits.max_items {
            return Err(big(format!(
                "more than {} items in one batch",
                limits.max_items
            )));
        }
        if text.len() > max_line {
            return Err(big(format!(
                "line longer than an item of {} bytes can be",
                limits.max_item
            )));
        }
        // JSON is UTF-8 (RFC 8259 8.1). serde_json checks the strings it keeps but
        // skips over unknown fields without looking inside their strings (found by
        // the fuzzer), so the whole line is checked first.
        let Ok(text) = std::str::from_utf8(text) else {
            return Err(err("line is not valid UTF-8".to_owned()));
        };
        // serde reads a struct from a JSON array too (`[1,"x"]`): only objects are items.
        if text.trim_start().as_bytes().first() != Some(&b'{') {
            return Err(err("expected a JSON object".to_owned()));
        }
        let parsed: Line<'_> = serde_json::from_str(text).map_err(|e| err(describe(&e)))?;
        if parsed.data.len() > limits.max_item {
            return Err(big(format!(
                "\"data\" is {} bytes, over the limit of {}",
                parsed.data.len(),
                limits.max_item
            )));
        }
        let (subject, channel) = match (parsed.subject, parsed.channel) {
            (Some(subject), None) => (subject, None),
            (None, Some(name)) => {
                crate::channel::check_name(&name).map_err(|why| err(why.to_owned()))?;
                (0, Some(name.into_owned()))
            }
            (None, None) => return Err(err("missing \"subject\" or \"channel\"".to_owned())),
            (Some(_), Some(_)) => {
                return Err(err(
                    "a line names a \"subject\" or a \"channel\", not both".to_owned()
                ))
            }
        };
        if items
            .first()
            .is_some_and(|first: &BatchItem| first.channel.is_some() != channel.is_some())
        {
            return Err(err(
                "a batch's lines all name subjects or all name channels".to_owned(),
            ));
        }
        items.push(BatchItem {
            subject,
            channel,
            data: parsed.data.into_owned().into_bytes(),
        });
    }
    Ok(items)
}

/// A short reason for a serde error: what was wrong, without serde's position
/// suffix (the line number is already in [`BatchError`]) or echoed input.
fn describe(e: &serde_json::Error) -> String {
    use serde_json::error::Category;
    let msg = e.to_string();
    // serde_json appends " at line L column C"; the column is still useful.
    let column = e.column();
    let what = msg.split(" at line ").next().unwrap_or(&msg);
    let what = match e.classify() {
        Category::Syntax | Category::Eof => format!("invalid JSON: {what}"),
        Category::Data => match what {
            w if w.starts_with("missing field") => w
                .replace("missing field `", "missing \"")
                .replace('`', "\""),
            w if w.contains("invalid type") && w.contains("expected u64") => {
                "\"subject\" must be an unsigned integer".to_owned()
            }
            w if w.contains("invalid value") && w.contains("expected u64") => {
                "\"subject\" must be an unsigned integer".to_owned()
            }
            w if w.contains("expected a string") || w.contains("expected a borrowed string") => {
                "\"data\" must be a string".to_owned()
            }
            w => w.to_owned(),
        },
        Category::Io => format!("invalid JSON: {what}"),
    };
    // Never let a reason grow with the input (serde may quote a field name).
    let mut what = what;
    if what.len() > 120 {
        let mut cut = 120;
        while !what.is_char_boundary(cut) {
            cut -= 1;
        }
        what.truncate(cut);
    }
    format!("{what} (column {column})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channel_lines_name_valid_channels_and_do_not_mix_with_subject_lines() {
        let items = parse_batch(
            b"{\"channel\":\"room:1\",\"data\":\"a\"}\n{\"channel\":\"news\",\"data\":\"b\"}",
        )
        .unwrap();
        assert_eq!(items[0].channel.as_deref(), Some("room:1"));
        assert_eq!(items[1].channel.as_deref(), Some("news"));
        for (body, line) in [
            (
                &b"{\"subject\":1,\"data\":\"a\"}\n{\"channel\":\"x\",\"data\":\"b\"}"[..],
                2,
            ),
            (b"{\"channel\":\"4\",\"data\":\"a\"}", 1),
            (b"{\"channel\":\"x\",\"subject\":1,\"data\":\"a\"}", 1),
            (b"{\"data\":\"a\"}", 1),
        ] {
            let e = parse_batch(body).unwrap_err();
            assert_eq!((e.line, e.status()), (line, 400), "{e}");
        }
    }

    #[test]
    fn parses_lines_and_skips_blank_ones() {
        let body = b"{\"subject\":1,\"data\":\"hi\"}\n\r\n  \n{\"data\":\"a\\nb\",\"subject\":18446744073709551615}\r\n";
        let items = parse_batch(body).unwrap();
        assert_eq!(
            items,
            vec![
                BatchItem {
                    subject: 1,
                    channel: None,
                    data: b"hi".to_vec()
                },
                BatchItem {
                    subject: u64::MAX,
                    channel: None,
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
                channel: None,
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
                "expected a JSON object",
            ),
            (b"\n\n[1,2]", 3, "expected a JSON object"),
            (b"{\"data\":\"a\"}", 1, "missing \"subject\""),
            (b"{\"subject\":-1,\"data\":\"a\"}", 1, "unsigned integer"),
            (b"{\"subject\":1.5,\"data\":\"a\"}", 1, "unsigned integer"),
            (b"{\"subject\":\"1\",\"data\":\"a\"}", 1, "unsigned integer"),
            (b"{\"subject\":1}", 1, "missing \"data\""),
            (b"{\"subject\":1,\"data\":5}", 1, "must be a string"),
            (b"{\"subject\":1,\"data\":\"\xff\"}", 1, "not valid UTF-8"),
            (b"{\"subject\":1,\"data\":\"a\"} x", 1, "invalid JSON"),
        ];
        for (body, line, reason) in cases {
            let e = parse_batch(body).unwrap_err();
            assert_eq!(e.line, *line, "{:?}", String::from_utf8_lossy(body));
            assert!(e.reason.contains(reason), "{e}");
            assert!(e.to_string().starts_with(&format!("line {line}: ")));
            assert_eq!(e.status(), 400);
            assert!(e.to_string().len() < 200);
        }
    }

    #[test]
    fn more_malformed_lines() {
        let cases: &[(&[u8], &str)] = &[
            (b"[1,\"x\"]", "expected a JSON object"),
            (
                b"{\"subject\":1,\"subject\":2,\"data\":\"a\"}",
                "duplicate field",
            ),
            (b"{\"subject\":1,\"data\":[1,1,1,1]}", "must be a string"),
            (
                b"{\"subject\":18446744073709551616,\"data\":\"a\"}",
                "unsigned integer",
            ),
            (b"{\"subject\":1,\"data\":\"a\",\"x\":[[[[", "invalid JSON"),
            (b"{\"subject\":1,\"data\":\"\\ud800\"}", "invalid JSON"),
            (
                b"{\"subject\":1,\"data\":\"a\",\"x\":[{\"k\xf1\":1}]}",
                "not valid UTF-8",
            ),
            (b"{\"subject\":1,\"data\":\"\xc3\"}", "not valid UTF-8"),
        ];
        for (body, reason) in cases {
            let e = parse_batch(body).unwrap_err();
            assert!(e.reason.contains(reason), "{e}");
            assert_eq!(e.status(), 400, "{e}");
        }
        // Deep nesting in an unknown field is refused by serde_json's depth limit,
        // not by the stack.
        let deep = format!(
            "{{\"subject\":1,\"data\":\"a\",\"x\":{}}}",
            "[".repeat(100_000)
        );
        assert_eq!(parse_batch(deep.as_bytes()).unwrap_err().status(), 400);
    }

    #[test]
    fn limits_are_413_naming_the_line() {
        let limits = BatchLimits {
            max_item: 8,
            max_items: 2,
        };
        let ok = b"{\"subject\":1,\"data\":\"12345678\"}\n\n{\"subject\":2,\"data\":\"\"}";
        assert_eq!(parse_batch_with(ok, &limits).unwrap().len(), 2);
        // Escapes count as the bytes they decode to: 8 × "\u00e9" is 16 bytes of UTF-8.
        let e = parse_batch_with(
            b"{\"subject\":1,\"data\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"}",
            &limits,
        )
        .unwrap_err();
        assert_eq!((e.line, e.status()), (1, 413));
        assert!(e.reason.contains("10 bytes, over the limit of 8"), "{e}");
        let e = parse_batch_with(b"{\"subject\":1,\"data\":\"123456789\"}", &limits).unwrap_err();
        assert_eq!((e.line, e.status()), (1, 413));
        let three = [&ok[..], b"\n{\"subject\":3,\"data\":\"x\"}"].concat();
        let e = parse_batch_with(&three, &limits).unwrap_err();
        assert_eq!((e.line, e.status()), (4, 413));
        assert!(e.reason.contains("more than 2 items"), "{e}");
        // A line longer than any valid item is refused before it is parsed.
        let huge = format!("{{\"subject\":1,\"data\":[{}1]}}", "1,".repeat(4096));
        let e = parse_batch_with(huge.as_bytes(), &limits).unwrap_err();
        assert_eq!(e.status(), 413);
        assert!(e.reason.contains("line longer"), "{e}");
        // Default limits: the default --max-message.
        let item = format!(
            "{{\"subject\":1,\"data\":\"{}\"}}",
            "a".repeat(DEFAULT_MAX_ITEM + 1)
        );
        assert_eq!(parse_batch(item.as_bytes()).unwrap_err().status(), 413);
    }
}
