//! One publish of msggen: a request on a publisher's keep-alive HTTP/1.1 connection
//! (`POST`, reconnecting when needed), or a NATS request to `myriad.pub.<subject>`
//! (SPEC C4). Either way the answer is (status, "connections", "users").

use super::{IO_TIMEOUT, MAX_RESPONSE};
use crate::dial::{Conn, Dialer};
use anyhow::{bail, Context};
use std::io::{Read, Write};
use std::sync::Arc;

/// Where a publisher sends: a server's HTTP API, or NATS.
#[derive(Clone)]
pub(super) enum Target {
    Http(Dialer),
    Nats(Arc<nats_link::Link>),
}

/// The subject a NATS publish goes to: the path template's last segment with `%d`
/// replaced (`/pub/%d` → the picked subject itself).
pub(super) fn nats_subject(path: &str, picked: u64) -> anyhow::Result<u64> {
    let segment = path.rsplit('/').next().unwrap_or(path);
    let text = segment.replace("%d", &picked.to_string());
    text.parse()
        .with_context(|| format!("--path {path:?}: its last segment {text:?} is not a subject id"))
}

/// One publish as a NATS request to `myriad.pub.<subject>`: (200 or 503 when the
/// router answered an error, "connections", "users").
pub(super) fn publish_nats(
    link: &nats_link::Link,
    subject: u64,
    body: &[u8],
) -> anyhow::Result<(u16, u64, u64)> {
    let client = link.client.clone();
    let to = nats_link::publish_subject(subject);
    let body = bytes::Bytes::copy_from_slice(body);
    let answer = link
        .block_on(async move { tokio::time::timeout(IO_TIMEOUT, client.request(to, body)).await })
        .context("no answer from the router")?
        .context("NATS request")?;
    let body: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap_or_default();
    if let Some(e) = body.get("error") {
        bail!("router: {e}");
    }
    let num = |k: &str| body.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
    Ok((200, num("connections"), num("users")))
}

/// One request on the keep-alive connection (reconnecting if needed):
/// (status, "connections", "users").
pub(super) fn publish_once(
    conn: &mut Option<Conn>,
    dialer: &Dialer,
    req: &[u8],
    buf: &mut [u8],
) -> anyhow::Result<(u16, u64, u64)> {
    if conn.is_none() {
        *conn = Some(dialer.connect(IO_TIMEOUT)?);
    }
    // Set just above.
    let s = conn.as_mut().expect("connected");
    s.write_all(req).context("send")?;
    let mut len = 0;
    loop {
        if len == buf.len() {
            bail!("response larger than {MAX_RESPONSE} bytes");
        }
        let n = s.read(&mut buf[len..]).context("receive")?;
        if n == 0 {
            bail!("server closed the connection");
        }
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut r = httparse::Response::new(&mut headers);
        let head_len = match r.parse(&buf[..len]).context("bad response")? {
            httparse::Status::Complete(h) => h,
            httparse::Status::Partial => continue,
        };
        let status = r.code.unwrap_or(0);
        let header = |name: &str| {
            r.headers
                .iter()
                .find(|h| h.name.eq_ignore_ascii_case(name))
                .map(|h| String::from_utf8_lossy(h.value).to_string())
        };
        let close = header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let body_len: usize = match header("content-length") {
            Some(v) => v.trim().parse().context("bad Content-Length")?,
            None => bail!("response without Content-Length"),
        };
        if head_len + body_len > buf.len() {
            bail!("response larger than {MAX_RESPONSE} bytes");
        }
        while len < head_len + body_len {
            let n = s.read(&mut buf[len..]).context("receive body")?;
            if n == 0 {
                bail!("server closed the connection mid-body");
            }
            len += n;
        }
        let body: serde_json::Value =
            serde_json::from_slice(&buf[head_len..head_len + body_len]).unwrap_or_default();
        let num = |k: &str| body.get(k).and_then(|v| v.as_u64()).unwrap_or(0);
        let out = (status, num("connections"), num("users"));
        if close {
            *conn = None;
        }
        return Ok(out);
    }
}
