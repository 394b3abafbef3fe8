//! Requests: a parsed head becomes a subscription (after a login), a long-poll, or
//! an API call with a body; heads and bodies are parsed by `wire`.

use super::http_publish::{self, ClientGrant};
use super::{access, channels, client_publish, pusher, stream_control};
use super::{
    BodyRead, Connection, Consumed, Cx, State, FRAMED, HTTP10, KEEP_ALIVE, MULTIPLEXED, RESUME,
};
use bus::Request;
use wire::{BodyKind, RequestHead, Route, Transport};

/// Parses a request head from `buf` (state Head or Idle).
pub(super) fn handle_head_bytes(conn: &mut Connection, cx: &mut Cx, buf: &[u8]) -> Consumed {
    match wire::parse_head(buf, &cx.config.limits) {
        Ok(None) => {
            if conn.state == State::Idle {
                // The first bytes of the next request: the head clock starts.
                conn.state = State::Head;
                conn.arm(cx, cx.config.head_timeout);
            }
            Consumed::Wait
        }
        Ok(Some((head, n))) => {
            handle_head(conn, cx, head);
            Consumed::Bytes(n)
        }
        Err(e) => {
            conn.fail(cx, e.status(), &e.to_string());
            Consumed::All
        }
    }
}

fn handle_head(conn: &mut Connection, cx: &mut Cx, head: RequestHead) {
    conn.set(KEEP_ALIVE, head.keep_alive);
    let route = match wire::route(&head) {
        Ok(route) => route,
        Err(e) => {
            // Without a body the framing is intact and keep-alive may go on.
            let keep = head.keep_alive && head.body == BodyKind::None;
            // `headers()` carries Allow for 405 and Upgrade for 426 (RFC 9110).
            conn.respond(cx, keep, |out| {
                wire::write_error_response(out, e.status(), &e.to_string(), keep, e.headers())
            });
            return;
        }
    };
    if route != Route::Health {
        if let Err(why) = access::check_host(cx, &head) {
            return access::refuse(conn, cx, &head, why);
        }
    }
    match route {
        Route::Subscribe {
            user,
            transport,
            ref token,
            since,
            channels,
            framed,
            ref session,
        } => {
            if head.body != BodyKind::None {
                return conn.fail(cx, 400, "a subscription request has no body");
            }
            if user.is_none() && channels.is_empty() && !framed && !conn.has(MULTIPLEXED) {
                // Only a POST on its own HTTP/2 connection could ever subscribe it.
                return conn.fail(
                    cx,
                    400,
                    "a stream without an id and without channel= subscribes later by \
                     session= on HTTP/2 only",
                );
            }
            // A channel's presence companion rides with it, the friends one too.
            let named = channels
                .iter()
                .filter(|(c, _)| !wire::channel::is_companion(c))
                .count();
            if named > cx.config.max_channels {
                let why = format!(
                    "more than {} channels (--max-channels-per-connection)",
                    cx.config.max_channels
                );
                return conn.fail(cx, 400, &why);
            }
            let grant = match access::check_subscribe(cx, user, token.as_deref(), &head) {
                Ok(grant) => grant,
                Err(e) => return access::refuse(conn, cx, &head, e),
            };
            // Only a token with `exp` takes an entry in the side table (`expiry`).
            if let Some(until) = grant.as_ref().and_then(|g| g.valid_until) {
                cx.credentials.set_expiry(cx.key, Some(until));
            }
            let allow = grant.as_ref().map(channels::Access::of);
            let info = grant.as_ref().and_then(|g| g.info.clone());
            if let (Transport::WebSocket, Some(grant)) = (transport, grant) {
                let publish = (grant.publish, grant.publish_channels);
                if let Some(p) = client_publish::Publisher::new(publish, cx.now) {
                    conn.pending().publisher = Some(p);
                }
            }
            let framed = framed && transport == Transport::WebSocket;
            conn.set(FRAMED, framed);
            if channels.is_empty() && !framed && session.is_none() {
                let user = user.expect("the route gives a user or a channel");
                return subscribe(conn, cx, user, transport, since, &head);
            }
            // A stream with a session is framed as one with channels from the start
            // (its messages name their channel), so a later subscribe changes nothing
            // but what arrives.
            if let Some(session) = session.as_deref().filter(|_| conn.has(MULTIPLEXED)) {
                cx.out.name_session(session);
            }
            prepare(
                conn,
                transport,
                since.is_some() || channels.iter().any(|c| c.1.is_some()),
                &head,
            );
            // SSE writes every stream's position back (its composite id).
            let placed = transport == Transport::Sse;
            channels::join_at_start(conn, cx, user, since, channels, (allow, info), placed);
            conn.call_wait(cx, State::subscribing_to(transport));
        }
        Route::Poll {
            user,
            since,
            ref token,
            ref channels,
        } => {
            if channels.len() > cx.config.max_channels {
                let why = format!(
                    "more than {} channels (--max-channels-per-connection)",
                    cx.config.max_channels
                );
                return conn.fail(cx, 400, &why);
            }
            let grant = match access::check_subscribe(cx, user, token.as_deref(), &head) {
                Ok(grant) => grant,
                Err(e) => return access::refuse(conn, cx, &head, e),
            };
            if head.body != BodyKind::None {
                return conn.fail(cx, 400, "a poll request has no body");
            }
            // A waiting poll is answered 401 when its token expires (`expiry`).
            if let Some(until) = grant.as_ref().and_then(|g| g.valid_until) {
                cx.credentials.set_expiry(cx.key, Some(until));
            }
            if !channels.is_empty() {
                let token = grant.map(|g| (Some(channels::Access::of(&g)), g.info));
                let (allow, info) = token.unwrap_or_default();
                let (channels, token) = (channels.clone(), (allow, info));
                // A long-poll's answer gives every stream's position back.
                channels::join_at_start(conn, cx, user, since, channels, token, true);
                return conn.call_wait(cx, State::Polling);
            }
            let user = user.expect("the route gives a user or a channel");
            if let Some(since) = since {
                let p = conn.pending();
                p.poll_since = Some(since.seq);
                p.poll_epoch = since.epoch;
            }
            conn.login(cx, user, since);
            conn.call_wait(cx, State::Polling);
        }
        Route::Control(control) => stream_control::ask(conn, cx, control, &head),
        // Signed in its query, checked with the body (`pusher_api`): no API key.
        Route::PusherApi { .. } => start_api(conn, cx, route, &head, None),
        Route::Pusher { ref key, protocol } => {
            if head.body != BodyKind::None {
                return conn.fail(cx, 400, "a subscription request has no body");
            }
            if let Err(why) = access::check_origin(cx, &head) {
                return access::refuse(conn, cx, &head, why);
            }
            pusher::open(conn, cx, key, protocol, &head);
        }
        Route::Health => start_api(conn, cx, route, &head, None),
        // A back-end's publish, or a client's with its own token (`http_publish`).
        Route::Publish { ref token, .. }
        | Route::PublishChannel { ref token, .. }
        | Route::PublishBatch { ref token, .. } => {
            match http_publish::check(conn, cx, &head, token.as_deref()) {
                Ok(client) => start_api(conn, cx, route, &head, client),
                Err(why) => access::refuse(conn, cx, &head, why),
            }
        }
        Route::Presence {
            of: wire::Present::Channel(ref channel),
            ..
        } => match access::check_presence(conn, cx, &head, channel) {
            Ok(()) => start_api(conn, cx, route, &head, None),
            Err(why) => access::refuse(conn, cx, &head, why),
        },
        route => match access::check_api(conn, cx, &head) {
            Ok(()) => start_api(conn, cx, route, &head, None),
            Err(why) => access::refuse(conn, cx, &head, why),
        },
    }
}

/// Starts a subscription (SPEC A1, A2, A4): logs in first, and answers with the
/// transport's head when the login reply comes (`reply`), so a publish the client
/// triggers after reading the head always finds the connection.
/// `since` (SPEC B6: `Last-Event-ID` or `?since=`) resumes: the login reply carries
/// what history holds after it.
fn subscribe(
    conn: &mut Connection,
    cx: &mut Cx,
    user: u64,
    transport: Transport,
    since: Option<wire::Since>,
    head: &RequestHead,
) {
    prepare(conn, transport, since.is_some(), head);
    conn.login(cx, user, since);
    conn.call_wait(cx, State::subscribing_to(transport));
}

/// What a subscription keeps until its head goes out: the WebSocket key, whether
/// it resumes, whether it is an HTTP/1.0 stream.
fn prepare(conn: &mut Connection, transport: Transport, resume: bool, head: &RequestHead) {
    if transport == Transport::WebSocket {
        // `wire::route` picks WebSocket only for a complete, valid handshake.
        let key = head.websocket.as_ref().map(|ws| ws.key.clone());
        conn.pending().ws_key = key;
    }
    conn.set(RESUME, resume && transport != Transport::Sse);
    // HTTP/1.0 cannot read chunked bodies: its stream is close-delimited lines.
    conn.set(HTTP10, transport == Transport::Stream && head.is_http10());
}

/// An API route: read its body if it has one, then call the bus. `client`: a
/// client publish's grant, checked against the body (`http_publish::admit`).
fn start_api(
    conn: &mut Connection,
    cx: &mut Cx,
    route: Route,
    head: &RequestHead,
    client: Option<Box<ClientGrant>>,
) {
    let limit = match route {
        Route::Publish { .. } | Route::PublishChannel { .. } => Some(cx.config.max_message),
        Route::PublishBatch { .. } | Route::SubscriptionsBulk => Some(cx.config.max_batch),
        Route::PusherApi {
            call:
                wire::PusherCall::Events
                | wire::PusherCall::BatchEvents
                | wire::PusherCall::TerminateUser(_),
            ..
        } => Some(cx.config.max_batch),
        _ => None,
    };
    let Some(limit) = limit else {
        if head.body != BodyKind::None {
            return conn.fail(cx, 400, "this request takes no body");
        }
        return dispatch(conn, cx, route, Vec::new(), client);
    };
    match head.body {
        BodyKind::None | BodyKind::Length(0) => dispatch(conn, cx, route, Vec::new(), client),
        BodyKind::Length(n) if n > limit as u64 => {
            conn.fail(cx, 413, &format!("body larger than {limit} bytes"));
        }
        kind => {
            if head.expect_continue {
                cx.out.send_static(wire::CONTINUE_100);
            }
            conn.pending().body = Some(Box::new(BodyRead {
                route,
                client,
                decoder: wire::BodyDecoder::new(kind, limit),
                body: Vec::new(),
            }));
            conn.state = State::Body;
            conn.arm(cx, cx.config.head_timeout);
        }
    }
}

/// Reads body bytes (state Body); a complete body dispatches its request.
pub(super) fn handle_body_bytes(conn: &mut Connection, cx: &mut Cx, buf: &[u8]) -> Consumed {
    // Invariant: State::Body is entered only with a body in the pending box.
    let read = conn
        .pending
        .as_mut()
        .and_then(|p| p.body.as_mut())
        .expect("the body state has a body being read");
    match read.decoder.handle_bytes(buf, &mut read.body) {
        Ok((n, true)) => {
            let read = conn
                .pending
                .as_mut()
                .and_then(|p| p.body.take())
                .expect("checked above");
            let BodyRead {
                route,
                body,
                client,
                ..
            } = *read;
            dispatch(conn, cx, route, body, client);
            Consumed::Bytes(n)
        }
        Ok((n, false)) if n > 0 => Consumed::Bytes(n),
        Ok(_) => Consumed::Wait,
        Err(e) => {
            conn.fail(cx, e.status(), &e.to_string());
            Consumed::All
        }
    }
}

/// A complete API request: answered here (health, bad bodies, a client publish
/// its token cannot make) or sent to the bus.
fn dispatch(
    conn: &mut Connection,
    cx: &mut Cx,
    route: Route,
    body: Vec<u8>,
    client: Option<Box<ClientGrant>>,
) {
    let request = match route {
        Route::Publish { .. } | Route::PublishBatch { .. } | Route::PublishChannel { .. } => {
            let request = match bus::http::publish_request(route, body) {
                Some(Ok(request)) => request,
                Some(Err(e)) => return bad_request(conn, cx, &e.to_string()),
                None => unreachable!("a publish route makes a publish request"),
            };
            if let Some(grant) = &client {
                if !http_publish::admit(conn, cx, grant, &request) {
                    return; // answered
                }
            }
            request
        }
        Route::PusherApi {
            app,
            call,
            path,
            query,
        } => match super::pusher_api::request(conn, cx, (&app, call), (&path, &query), &body) {
            Ok(request) => request,
            Err((status, why)) => {
                let keep = conn.has(KEEP_ALIVE);
                return conn.respond(cx, keep, |out| {
                    wire::write_error_response(out, status, &why, keep, &[])
                });
            }
        },
        Route::SubscriptionPut {
            subscriber,
            subject,
        } => Request::ChangeSubscriptions {
            edges: vec![(subscriber, subject)],
            add: true,
        },
        Route::SubscriptionDelete {
            subscriber,
            subject,
        } => Request::ChangeSubscriptions {
            edges: vec![(subscriber, subject)],
            add: false,
        },
        Route::SubscriptionsBulk => match wire::parse_edges(&body) {
            Ok(edges) => Request::ChangeSubscriptions { edges, add: true },
            Err(e) => return bad_request(conn, cx, &e.to_string()),
        },
        Route::ChannelHistory {
            channel,
            since,
            limit,
        } => Request::ChannelHistory {
            channel,
            since: since.map(|s| s.seq),
            epoch: since.and_then(|s| s.epoch),
            limit,
        },
        Route::Presence { of, stats } => Request::Presence {
            of: match of {
                wire::Present::Channel(name) => bus::PresenceOf::Channel(name),
                wire::Present::Subject(user) => bus::PresenceOf::Subject(user),
            },
            list: !stats,
        },
        Route::Online { user } => Request::Online { user },
        Route::Subscribers { subject } => Request::Subscribers { subject },
        Route::Subscriptions { subscriber } => Request::Subscriptions { subscriber },
        Route::Stats => Request::Stats,
        Route::Health => {
            let keep = conn.has(KEEP_ALIVE);
            return conn.respond(cx, keep, |out| {
                wire::write_response(out, 200, "text/plain; charset=utf-8", b"ok\n", keep, &[])
            });
        }
        // Transports are routed in `handle_head` and never reach here.
        Route::Subscribe { .. } | Route::Poll { .. } | Route::Control(_) | Route::Pusher { .. } => {
            unreachable!("subscriptions, polls and stream controls are not API calls")
        }
    };
    let call = request.call();
    conn.call(cx, request, State::Calling(call));
}

/// A body that does not parse: 400 naming the problem; the framing is intact, so
/// keep-alive goes on.
fn bad_request(conn: &mut Connection, cx: &mut Cx, message: &str) {
    let keep = conn.has(KEEP_ALIVE);
    conn.respond(cx, keep, |out| {
        wire::write_error_response(out, 400, message, keep, &[])
    });
}

impl Connection {
    /// Waits in `state` for the reply to the request `login` just queued.
    fn call_wait(&mut self, cx: &mut Cx, state: State) {
        self.state = state;
        self.arm(cx, cx.config.head_timeout);
    }
}
