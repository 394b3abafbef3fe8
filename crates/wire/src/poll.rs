//! Long-poll answers (A3): the JSON body
//! `{"messages":[{"seq":n,"data":"..."}],"last":n,"gap":bool,"epoch":e,"since":"e-n"}`.
//!
//! `data` is the payload as a JSON string (invalid UTF-8 replaced by U+FFFD);
//! `since` is what to pass as `?since=` next time (`last` within `epoch`, SPEC B6;
//! `last` alone, without `epoch`, while the user has no history yet: every answer has
//! one, so a client that always passes it back loses nothing); `gap` says messages
//! were lost before the first one listed (or the client's position was from
//! another epoch, or ahead of the server's). Not here: waiting (the gateway parks the poll).

use std::io::Write as _;

/// Appends a long-poll answer's body to `out`.
pub fn write_poll_body(
    out: &mut Vec<u8>,
    messages: &[(u64, &[u8])],
    last: u64,
    gap: bool,
    epoch: Option<u32>,
) {
    let payload_bytes: usize = messages.iter().map(|(_, p)| p.len() + 24).sum();
    out.reserve(48 + payload_bytes);
    out.extend_from_slice(b"{\"messages\":[");
    for (i, (seq, payload)) in messages.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // Writing into a Vec cannot fail, and a str always serialises.
        write!(out, "{{\"seq\":{seq},\"data\":").expect("Vec write");
        serde_json::to_writer(&mut *out, &String::from_utf8_lossy(payload)).expect("Vec write");
        out.push(b'}');
    }
    write!(out, "],\"last\":{last},\"gap\":{gap}").expect("Vec write");
    match epoch {
        Some(epoch) => {
            write!(out, ",\"epoch\":{epoch},\"since\":\"{epoch}-{last}\"").expect("Vec write")
        }
        None => write!(out, ",\"since\":\"{last}\"").expect("Vec write"),
    }
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll_body(messages: &[(u64, &[u8])], last: u64, gap: bool) -> Vec<u8> {
        let mut out = Vec::new();
        write_poll_body(&mut out, messages, last, gap, None);
        out
    }

    #[test]
    fn empty_answer() {
        assert_eq!(
            poll_body(&[], 5, false),
            br#"{"messages":[],"last":5,"gap":false,"since":"5"}"#
        );
    }

    #[test]
    fn messages_are_escaped_json_strings() {
        let body = poll_body(&[(1, b"a\"b\\\n"), (2, b"\xffok")], 2, true);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["messages"][0]["seq"], 1);
        assert_eq!(v["messages"][0]["data"], "a\"b\\\n");
        assert_eq!(v["messages"][1]["data"], "\u{fffd}ok");
        assert_eq!(v["last"], 2);
        assert_eq!(v["gap"], true);
        let expected = "{\"messages\":[{\"seq\":1,\"data\":\"a\\\"b\\\\\\n\"},{\"seq\":2,\"data\":\"\u{fffd}ok\"}],\"last\":2,\"gap\":true,\"since\":\"2\"}";
        assert_eq!(String::from_utf8(body).unwrap(), expected);
    }

    #[test]
    fn the_epoch_makes_the_next_since() {
        let mut out = Vec::new();
        write_poll_body(&mut out, &[], 5, true, Some(77));
        assert_eq!(
            out,
            br#"{"messages":[],"last":5,"gap":true,"epoch":77,"since":"77-5"}"#
        );
    }
}
