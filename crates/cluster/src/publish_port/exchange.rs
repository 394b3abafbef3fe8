//! One publish-port connection's HTTP/1.1 exchanges, sans IO: bytes in, answer
//! bytes and publishes out, as the gateways' connection core reads its API calls.
//! Heads, routes and bodies are parsed by `wire`, a publish's body becomes its
//! request and its reply its answer through `bus::http` (the gateways' code), the
//! API key is checked by `auth`. The socket, the idle timer and the drain signal are
//! the pump's ([`super::connection`]).
//!
//! Where the port answers otherwise than a gateway, it says why: a 404 names what
//! the port serves, a browser page (`Origin`) is refused outright, and a peer
//! without `--api-key` is told it is the port that answers loopback peers only.

use super::PortConfig;
use bus::{PublishAnswer, Reply, Request};
use wire::{BodyKind, RequestHead, Route};

/// What the port serves, for a 404's text.
const SERVED: &str = "the router's publish port serves POST /pub/<subject>, POST /pub and \
     GET /healthz; subscriptions and the rest of the API are on the gateways' port";

/// Why a draining router refuses a request (with `Retry-After`: another router, or
/// this one restarted, takes it).
pub(super) const DRAINING: &str = "the router is draining (SIGTERM); retry";

/// What the pump does next, once it has written [`Exchange::take_output`].
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    /// Read more bytes.
    Read,
    /// Publish this and hand the reply to [`Exchange::handle_reply`].
    Publish(Request),
    /// Close the connection.
    Close,
}

/// Where the connection is in its current request.
enum Reading {
    /// Between requests, or in a head.
    Head,
    /// In a publish's body (its decoder holds the limit).
    Body {
        route: Route,
        keep: bool,
        decoder: wire::BodyDecoder,
        body: Vec<u8>,
    },
    /// A publish is out: nothing is read until its reply is answered.
    Reply { batch: bool, keep: bool },
}

/// One connection's requests, one at a time, in order.
pub(super) struct Exchange<'a> {
    config: &'a PortConfig,
    /// The peer's address is loopback (the only peers let in without `--api-key`).
    loopback: bool,
    reading: Reading,
    /// Answer bytes not handed to the pump yet.
    out: Vec<u8>,
}

impl<'a> Exchange<'a> {
    pub(super) fn new(config: &'a PortConfig, loopback: bool) -> Exchange<'a> {
        Exchange {
            config,
            loopback,
            reading: Reading::Head,
            out: Vec::new(),
        }
    }

    /// No request begun: a drain may close the connection at once.
    pub(super) fn between_requests(&self, buffered: &[u8]) -> bool {
        matches!(self.reading, Reading::Head) && buffered.is_empty()
    }

    /// The answer bytes to write now (empty when there are none).
    pub(super) fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Reads what `buf` holds of the current request (`draining`: the router
    /// drains, so a new request is refused). Returns the bytes it consumed and what
    /// to do next; bytes past a request stay for the next call.
    pub(super) fn handle_bytes(&mut self, buf: &[u8], draining: bool) -> (usize, Step) {
        let mut used = 0;
        loop {
            let step = match &mut self.reading {
                Reading::Reply { .. } => return (used, Step::Read),
                Reading::Head => match wire::parse_head(&buf[used..], &wire::Limits::default()) {
                    Ok(None) => return (used, Step::Read),
                    Ok(Some((head, n))) => {
                        used += n;
                        if draining {
                            let retry = &[("Retry-After", "1")];
                            wire::write_error_response(&mut self.out, 503, DRAINING, false, retry);
                            return (used, Step::Close);
                        }
                        self.handle_head(&head)
                    }
                    Err(e) => {
                        let why = e.to_string();
                        wire::write_error_response(&mut self.out, e.status(), &why, false, &[]);
                        return (used, Step::Close);
                    }
                },
                Reading::Body { decoder, body, .. } => {
                    match decoder.handle_bytes(&buf[used..], body) {
                        Ok((n, done)) => {
                            used += n;
                            if !done {
                                return (used, Step::Read);
                            }
                            let Reading::Body {
                                route, keep, body, ..
                            } = std::mem::replace(&mut self.reading, Reading::Head)
                            else {
                                unreachable!("matched above")
                            };
                            self.handle_body(route, keep, body)
                        }
                        Err(e) => {
                            let why = e.to_string();
                            wire::write_error_response(&mut self.out, e.status(), &why, false, &[]);
                            return (used, Step::Close);
                        }
                    }
                }
            };
            // A request answered at once with keep-alive: on to the next one.
            if step != Step::Read || matches!(self.reading, Reading::Reply { .. }) {
                return (used, step);
            }
        }
    }

    /// The reply to the publish of [`Step::Publish`], answered.
    pub(super) fn handle_reply(&mut self, reply: Reply) -> Step {
        let Reading::Reply { batch, keep } = std::mem::replace(&mut self.reading, Reading::Head)
        else {
            unreachable!("a reply comes only for the publish of Step::Publish")
        };
        let answer = PublishAnswer::of(batch, reply).unwrap_or_else(|| PublishAnswer {
            status: 500,
            json: false,
            body: "internal error: unexpected reply".into(),
            retry_after: false,
        });
        let (status, json, retry) = (answer.status, answer.json, answer.retry_after);
        wire::write_api_answer(&mut self.out, status, json, &answer.body, keep, retry);
        if keep {
            Step::Read
        } else {
            Step::Close
        }
    }

    /// A complete head: answered at once, or its body read, or its publish made.
    fn handle_head(&mut self, head: &RequestHead) -> Step {
        let route = match wire::route(head) {
            Ok(route) => route,
            Err(wire::RouteError::NotFound) => return self.refuse(head, 404, SERVED, &[]),
            Err(e) => return self.refuse(head, e.status(), &e.to_string(), e.headers()),
        };
        let limit = match route {
            Route::Health => {
                let keep = head.keep_alive && head.body == BodyKind::None;
                let ok = b"ok\n";
                wire::write_response(
                    &mut self.out,
                    200,
                    "text/plain; charset=utf-8",
                    ok,
                    keep,
                    &[],
                );
                return if keep { Step::Read } else { Step::Close };
            }
            Route::Publish { .. } | Route::PublishChannel { .. } => self.config.max_message,
            Route::PublishBatch { .. } => self.config.max_batch,
            _ => return self.refuse(head, 404, SERVED, &[]),
        };
        if let Err((status, why, challenge)) = self.check_access(head) {
            let headers: &[(&str, &str)] = match challenge {
                Some(c) => &[("WWW-Authenticate", c)],
                None => &[],
            };
            return self.refuse(head, status, &why, headers);
        }
        let keep = head.keep_alive;
        match head.body {
            BodyKind::None | BodyKind::Length(0) => self.handle_body(route, keep, Vec::new()),
            BodyKind::Length(n) if n > limit as u64 => {
                let why = format!("body larger than {limit} bytes");
                wire::write_error_response(&mut self.out, 413, &why, false, &[]);
                Step::Close
            }
            kind => {
                if head.expect_continue {
                    self.out.extend_from_slice(wire::CONTINUE_100);
                }
                self.reading = Reading::Body {
                    route,
                    keep,
                    decoder: wire::BodyDecoder::new(kind, limit),
                    body: Vec::new(),
                };
                Step::Read
            }
        }
    }

    /// Who may publish here: no browser page; with `--api-key`, a valid key (as a
    /// gateway's API checks it); without, loopback peers only. The refusal's status,
    /// text and challenge.
    fn check_access(&self, head: &RequestHead) -> Result<(), (u16, String, Option<&'static str>)> {
        if head.origin.is_some() {
            let why = "the publish port takes no browser requests (Origin)";
            return Err((403, why.into(), None));
        }
        let keys = &self.config.api_keys;
        if keys.is_empty() {
            if self.loopback {
                return Ok(());
            }
            let why = "the publish port answers loopback peers only (the server has no --api-key)";
            return Err((403, why.into(), None));
        }
        keys.check(head.authorization.as_deref())
            .map_err(|e| (e.status(), e.to_string(), e.challenge()))
    }

    /// A publish's complete body: its request, or a 400/413 when a batch does not
    /// parse (the framing is intact: keep-alive goes on).
    fn handle_body(&mut self, route: Route, keep: bool, body: Vec<u8>) -> Step {
        let batch = matches!(route, Route::PublishBatch { .. });
        match bus::http::publish_request(route, body) {
            Some(Ok(request)) => {
                self.reading = Reading::Reply { batch, keep };
                Step::Publish(request)
            }
            Some(Err(e)) => {
                wire::write_error_response(&mut self.out, e.status(), &e.to_string(), keep, &[]);
                if keep {
                    Step::Read
                } else {
                    Step::Close
                }
            }
            None => unreachable!("only publish routes read a body"),
        }
    }

    /// Answers a refused request. Its body is not read, so the connection closes
    /// after the answer unless there was none.
    fn refuse(
        &mut self,
        head: &RequestHead,
        status: u16,
        why: &str,
        headers: &[(&str, &str)],
    ) -> Step {
        let keep = head.keep_alive && head.body == BodyKind::None;
        wire::write_error_response(&mut self.out, status, why, keep, headers);
        if keep {
            Step::Read
        } else {
            Step::Close
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use auth::ApiKeys;

    fn config() -> PortConfig {
        PortConfig {
            api_keys: ApiKeys::default(),
            max_message: 8,
            max_batch: 64,
        }
    }

    fn text(out: Vec<u8>) -> String {
        String::from_utf8(out).unwrap()
    }

    /// Pipelined requests without a socket: each publish comes out in turn, and
    /// nothing after it is read before its reply is answered.
    #[test]
    fn requests_come_out_one_at_a_time_and_answers_in_their_order() {
        let config = config();
        let mut x = Exchange::new(&config, true);
        let raw = b"GET /healthz HTTP/1.1\r\n\r\n\
                    POST /pub/3 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi\
                    POST /pub HTTP/1.1\r\nContent-Length: 24\r\n\r\n{\"subject\":4,\"data\":\"\"}";
        let (used, step) = x.handle_bytes(raw, false);
        let publish = Request::Publish {
            subject: 3,
            payload: bytes::Bytes::from_static(b"hi"),
        };
        assert_eq!(step, Step::Publish(publish));
        assert!(text(x.take_output()).ends_with("ok\n"));
        assert_eq!(x.handle_bytes(&raw[used..], false), (0, Step::Read));
        let reply = Reply::Published {
            messages: 1,
            connections: 2,
            users: 1,
        };
        assert_eq!(x.handle_reply(reply), Step::Read);
        let answer = text(x.take_output());
        assert!(
            answer.ends_with("{\"connections\":2,\"users\":1}\n"),
            "{answer}"
        );
        let (n, step) = x.handle_bytes(&raw[used..], false);
        assert_eq!(used + n, raw.len(), "the batch's body is one byte short");
        assert_eq!(step, Step::Read);
        let (_, step) = x.handle_bytes(b"\n", false);
        assert!(matches!(step, Step::Publish(Request::PublishBatch { .. })));
    }

    #[test]
    fn a_draining_router_refuses_the_next_request_and_closes() {
        let config = config();
        let mut x = Exchange::new(&config, true);
        assert!(x.between_requests(b""));
        let raw = b"POST /pub/3 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi";
        let (_, step) = x.handle_bytes(raw, true);
        assert_eq!(step, Step::Close);
        let out = text(x.take_output());
        assert!(out.starts_with("HTTP/1.1 503"), "{out}");
        assert!(
            out.contains("Retry-After: 1") && out.contains(DRAINING),
            "{out}"
        );
    }

    #[test]
    fn only_loopback_peers_publish_without_a_key_and_never_a_browser_page() {
        let config = config();
        let raw = b"POST /pub/3 HTTP/1.1\r\n\r\n";
        let mut x = Exchange::new(&config, false);
        assert_eq!(x.handle_bytes(raw, false).1, Step::Read);
        let out = text(x.take_output());
        assert!(out.starts_with("HTTP/1.1 403") && out.contains("loopback peers only"));
        let mut x = Exchange::new(&config, true);
        let page = b"POST /pub/3 HTTP/1.1\r\nOrigin: https://a.example\r\n\r\n";
        assert_eq!(x.handle_bytes(page, false).1, Step::Read);
        assert!(text(x.take_output()).contains("no browser requests"));
    }
}
