//! Unit tests for `route`.

use super::*;
use crate::head::{parse_head, Limits};

fn req(method: &str, target: &str, extra: &str) -> RequestHead {
    let buf = format!("{method} {target} HTTP/1.1\r\n{extra}\r\n");
    parse_head(buf.as_bytes(), &Limits::default())
        .unwrap()
        .unwrap()
        .0
}

fn r(method: &str, target: &str) -> Result<Route, RouteError> {
    route(&req(method, target, ""))
}

fn seq(seq: u64) -> Since {
    Since { epoch: None, seq }
}

const WS: &str = "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";

#[test]
fn subscribe_transports() {
    let sub = |user, transport| {
        Ok(Route::Subscribe {
            user: Some(user),
            transport,
            since: None,
            token: None,
            channels: vec![],
            framed: false,
            session: None,
        })
    };
    assert_eq!(r("GET", "/sub/42"), sub(42, Transport::Stream));
    assert_eq!(r("GET", "/test/7"), sub(7, Transport::Stream));
    assert_eq!(
        route(&req("GET", "/sub/1", "Accept: text/event-stream\r\n")),
        sub(1, Transport::Sse)
    );
    assert_eq!(
        route(&req("GET", "/test/1", WS)),
        sub(1, Transport::WebSocket)
    );
    assert_eq!(r("GET", "/sse/0"), sub(0, Transport::Sse));
    assert_eq!(
        route(&req("GET", "/ws/9", WS)),
        sub(9, Transport::WebSocket)
    );
    assert_eq!(r("GET", "/ws/9"), Err(RouteError::UpgradeRequired));
    assert_eq!(
        r("GET", "/sub/18446744073709551615"),
        sub(u64::MAX, Transport::Stream)
    );
}

#[test]
fn api_routes() {
    assert_eq!(
        r("GET", "/poll/3"),
        Ok(Route::Poll {
            user: Some(3),
            since: None,
            token: None,
            channels: vec![],
        })
    );
    assert_eq!(
        r("GET", "/poll/3?since=10"),
        Ok(Route::Poll {
            user: Some(3),
            since: Some(seq(10)),
            token: None,
            channels: vec![],
        })
    );
    assert_eq!(
        r("GET", "/poll/3?x=1&since=0&y"),
        Ok(Route::Poll {
            user: Some(3),
            since: Some(seq(0)),
            token: None,
            channels: vec![],
        })
    );
    assert_eq!(
        r("POST", "/pub/5"),
        Ok(Route::Publish {
            subject: 5,
            token: None
        })
    );
    assert_eq!(
        r("POST", "/pub"),
        Ok(Route::PublishBatch {
            parallel: false,
            token: None
        })
    );
    assert_eq!(
        r("POST", "/pub?parallel=1"),
        Ok(Route::PublishBatch {
            parallel: true,
            token: None
        })
    );
    assert_eq!(
        r("POST", "/pub?x=2&parallel=false&token=a.b%2Ec"),
        Ok(Route::PublishBatch {
            parallel: false,
            token: Some("a.b.c".into())
        })
    );
    // A client's own token (client publish over HTTP), once.
    assert_eq!(
        r("POST", "/pub/5?token=t"),
        Ok(Route::Publish {
            subject: 5,
            token: Some("t".into())
        })
    );
    assert!(matches!(
        r("POST", "/pub/5?token=a&token=b"),
        Err(RouteError::BadQuery(_))
    ));
    assert!(matches!(
        r("POST", "/pub/room?token=%ff"),
        Err(RouteError::BadQuery(_))
    ));
    for bad in [
        "/pub?parallel=yes",
        "/pub?parallel",
        "/pub?parallel=1&parallel=1",
    ] {
        assert!(
            matches!(r("POST", bad), Err(RouteError::BadQuery(_))),
            "{bad}"
        );
    }
    assert_eq!(
        r("PUT", "/subscriptions/1/2"),
        Ok(Route::SubscriptionPut {
            subscriber: 1,
            subject: 2
        })
    );
    assert_eq!(
        r("DELETE", "/subscriptions/1/2"),
        Ok(Route::SubscriptionDelete {
            subscriber: 1,
            subject: 2
        })
    );
    assert_eq!(r("POST", "/subscriptions"), Ok(Route::SubscriptionsBulk));
    assert_eq!(
        r("GET", "/subscribers/8"),
        Ok(Route::Subscribers { subject: 8 })
    );
    assert_eq!(
        r("GET", "/subscriptions/8"),
        Ok(Route::Subscriptions { subscriber: 8 })
    );
    assert_eq!(r("GET", "/stats"), Ok(Route::Stats));
    assert_eq!(r("GET", "/healthz"), Ok(Route::Health));
    assert_eq!(r("GET", "/healthz?verbose"), Ok(Route::Health));
}

#[test]
fn bad_ids() {
    for id in [
        "01",
        "00",
        "",
        "-1",
        "+1",
        "18446744073709551616",
        "1a",
        "%31",
        "1.0",
    ] {
        let target = format!("/sub/{id}");
        assert_eq!(r("GET", &target), Err(RouteError::BadId), "{target}");
    }
    assert_eq!(r("PUT", "/subscriptions/1/01"), Err(RouteError::BadId));
    assert_eq!(r("GET", "/poll/1?since=x"), Err(RouteError::BadId));
    assert_eq!(r("GET", "/poll/1?since="), Err(RouteError::BadId));
    assert_eq!(r("GET", "/poll/1?since=1&since=2"), Err(RouteError::BadId));
    assert_eq!(r("GET", "/sub/1?since=1-"), Err(RouteError::BadId));
    assert_eq!(r("GET", "/sub/1?since=-1"), Err(RouteError::BadId));
    assert_eq!(
        r("GET", "/sse/1?token=%zz").map_err(|e| e.status()),
        Err(400)
    );
    assert_eq!(
        r("GET", "/poll/1?token=a&token=a"),
        Err(RouteError::BadQuery("token given twice"))
    );
}

#[test]
fn resume_and_token_on_every_subscription_path() {
    let since = Some(Since {
        epoch: Some(7),
        seq: 12,
    });
    let token = Some("h.p.s".to_owned());
    let want = |transport| {
        Ok(Route::Subscribe {
            user: Some(5),
            transport,
            since,
            token: token.clone(),
            channels: vec![],
            framed: false,
            session: None,
        })
    };
    let q = "?since=7-12&token=h.p.s&cb=1";
    assert_eq!(r("GET", &format!("/sub/5{q}")), want(Transport::Stream));
    assert_eq!(r("GET", &format!("/test/5{q}")), want(Transport::Stream));
    assert_eq!(r("GET", &format!("/sse/5{q}")), want(Transport::Sse));
    assert_eq!(
        route(&req("GET", &format!("/ws/5{q}"), WS)),
        want(Transport::WebSocket)
    );
    assert_eq!(
        r("GET", &format!("/poll/5{q}")),
        Ok(Route::Poll {
            user: Some(5),
            since,
            token: token.clone(),
            channels: vec![],
        })
    );
    // SSE: Last-Event-ID (the browser's newest id) wins over the URL's `since`.
    let h = req("GET", "/sse/5?since=7-12", "Last-Event-ID: 7-40\r\n");
    assert!(matches!(
        route(&h),
        Ok(Route::Subscribe {
            since: Some(Since {
                epoch: Some(7),
                seq: 40
            }),
            ..
        })
    ));
    let h = req("GET", "/sse/5", "Last-Event-ID: 3\r\n");
    assert!(matches!(
        route(&h),
        Ok(Route::Subscribe {
            since: Some(Since {
                epoch: None,
                seq: 3
            }),
            ..
        })
    ));
    // Other transports and long-poll ignore Last-Event-ID.
    let h = req("GET", "/sub/5", "Last-Event-ID: 3\r\n");
    assert!(matches!(
        route(&h),
        Ok(Route::Subscribe { since: None, .. })
    ));
    let h = req("GET", "/poll/5?since=1", "Last-Event-ID: 3\r\n");
    assert!(matches!(
        route(&h),
        Ok(Route::Poll {
            since: Some(Since { seq: 1, .. }),
            ..
        })
    ));
}

#[test]
fn absolute_form_targets_route_by_path() {
    let h = req(
        "GET",
        "http://example.com:8080/sub/1?since=2",
        "Host: other\r\n",
    );
    assert_eq!(h.host.as_deref(), Some("example.com:8080"));
    assert!(matches!(
        route(&h),
        Ok(Route::Subscribe {
            user: Some(1),
            since: Some(Since { seq: 2, .. }),
            ..
        })
    ));
    assert_eq!(
        r("POST", "HTTPS://h/pub/3"),
        Ok(Route::Publish {
            subject: 3,
            token: None
        })
    );
    assert_eq!(r("GET", "http://h").map_err(|e| e.status()), Err(404));
    assert_eq!(r("GET", "http://h?x").map_err(|e| e.status()), Err(404));
}

#[test]
fn not_found() {
    for t in [
        "/",
        "/sub/1/",
        "/stats/",
        "/sub/1/2",
        "/nope/1",
        "/pub/1/2",
        "/subscriptions/1/2/3",
        "//sub/1",
        "*",
    ] {
        let got = if t == "*" {
            r("OPTIONS", t)
        } else {
            r("GET", t)
        };
        assert_eq!(got.map_err(|e| e.status()), Err(404), "{t}");
    }
}

#[test]
fn methods_not_allowed() {
    let allow = |allow| Err(RouteError::MethodNotAllowed { allow });
    assert_eq!(r("POST", "/sub/1"), allow("GET"));
    assert_eq!(r("HEAD", "/stats"), allow("GET"));
    assert_eq!(r("HEAD", "/sub/1"), allow("GET"));
    assert_eq!(r("GET", "/pub/1"), allow("POST"));
    assert_eq!(r("GET", "/pub"), allow("POST"));
    assert_eq!(r("GET", "/subscriptions"), allow("POST"));
    assert_eq!(r("GET", "/subscriptions/1/2"), allow("PUT, DELETE"));
    assert_eq!(r("POST", "/subscriptions/1"), allow("GET"));
    assert_eq!(r("PATCH", "/healthz"), allow("GET"));
}

#[test]
fn statuses_and_headers() {
    assert_eq!(RouteError::NotFound.status(), 404);
    assert_eq!(RouteError::BadId.status(), 400);
    assert_eq!(RouteError::UpgradeRequired.status(), 426);
    assert_eq!(RouteError::BadQuery("x").status(), 400);
    assert!(RouteError::BadQuery("x").headers().is_empty());
    let e = RouteError::MethodNotAllowed {
        allow: "PUT, DELETE",
    };
    assert_eq!(e.status(), 405);
    assert_eq!(e.headers(), &[("Allow", "PUT, DELETE")]);
    assert_eq!(
        RouteError::MethodNotAllowed { allow: "GET" }.headers(),
        &[("Allow", "GET")]
    );
    assert!(RouteError::UpgradeRequired
        .headers()
        .contains(&("Upgrade", "websocket")));
    assert!(RouteError::NotFound.headers().is_empty());
}

#[path = "route_channel_tests.rs"]
mod channels;

#[test]
fn pusher_routes() {
    assert_eq!(
        r("POST", "/apps/a1/events?auth_key=k"),
        Ok(Route::PusherApi {
            app: "a1".into(),
            call: PusherCall::Events,
            path: "/apps/a1/events".into(),
            query: "auth_key=k".into(),
        })
    );
    match r("GET", "/apps/a1/channels/presence-x/users?auth_key=k") {
        Ok(Route::PusherApi { call, path, .. }) => {
            assert_eq!(call, PusherCall::Users("presence-x".into()));
            assert_eq!(path, "/apps/a1/channels/presence-x/users");
        }
        other => panic!("{other:?}"),
    }
    match r(
        "POST",
        "/apps/a1/users/u-1/terminate_connections?auth_key=k",
    ) {
        Ok(Route::PusherApi { call, path, .. }) => {
            assert_eq!(call, PusherCall::TerminateUser("u-1".into()));
            assert_eq!(path, "/apps/a1/users/u-1/terminate_connections");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r("POST", "/apps/a1/users/u-1/other"),
        Err(RouteError::NotFound)
    );
    match r("GET", "/apps/a1/channels?filter_by_prefix=presence-") {
        Ok(Route::PusherApi { call, .. }) => assert_eq!(call, PusherCall::Channels),
        other => panic!("{other:?}"),
    }
    match r("GET", "/apps/a1/channels/news") {
        Ok(Route::PusherApi { call, .. }) => assert_eq!(call, PusherCall::Channel("news".into())),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        r("GET", "/apps/a1/channels/news/other"),
        Err(RouteError::NotFound)
    );
    assert_eq!(
        r("GET", "/apps/a1/channels/news/users/x"),
        Err(RouteError::NotFound)
    );
    assert!(matches!(
        r("POST", "/apps/a1/channels/news"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    assert!(matches!(
        r("GET", "/apps/a1/events"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
    // The WebSocket endpoint needs an upgrade.
    assert_eq!(
        r("GET", "/app/k?protocol=7"),
        Err(RouteError::UpgradeRequired)
    );
}
