//! Unit tests for `route`: channels, presence and HTTP/2 sessions.

use super::*;

#[test]
fn presence_adds_each_channel_s_companion_after_the_channels() {
    let at = |e, s| {
        Some(Since {
            epoch: Some(e),
            seq: s,
        })
    };
    let companion = |c: &str| crate::channel::presence_channel(c);
    let channels = |route: Result<Route, RouteError>| match route {
        Ok(Route::Subscribe { channels, .. }) => channels,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        channels(r("GET", "/sse?channel=a&channel=b&presence=1")),
        [
            ("a".to_string(), None),
            ("b".to_string(), None),
            (companion("a"), None),
            (companion("b"), None)
        ]
    );
    // A since with the channels' parts only starts the companions from now; the
    // ids the server wrote carry the companions' parts too.
    assert_eq!(
        channels(r("GET", "/sse?channel=a&presence=1&since=1-2")),
        [("a".to_string(), at(1, 2)), (companion("a"), None)]
    );
    let h = req(
        "GET",
        "/sse?channel=a&presence=1",
        "Last-Event-ID: 1-2_3-4\r\n",
    );
    assert_eq!(
        channels(route(&h)),
        [("a".to_string(), at(1, 2)), (companion("a"), at(3, 4))]
    );
    assert_eq!(
        channels(r("GET", "/sse?channel=a&presence=0")),
        [("a".to_string(), None)]
    );
    for bad in ["/sse?channel=a&presence=yes", "/poll?channel=a&presence=1"] {
        assert!(
            matches!(r("GET", bad), Err(RouteError::BadQuery(_))),
            "{bad}"
        );
    }
}

#[test]
fn friends_1_adds_the_path_user_s_friends_companion_last() {
    let friends = crate::channel::friends_channel;
    let companion = |c: &str| crate::channel::presence_channel(c);
    let channels = |route: Result<Route, RouteError>| match route {
        Ok(Route::Subscribe { channels, .. }) => channels,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        channels(r("GET", "/sse/7?channel=a&presence=1&friends=1")),
        [
            ("a".to_string(), None),
            (companion("a"), None),
            (friends(7), None)
        ]
    );
    assert_eq!(
        channels(r("GET", "/sub/7?friends=true")),
        [(friends(7), None)]
    );
    for bad in [
        "/sse?channel=a&friends=1",
        "/sse/7?friends=2",
        "/poll/7?friends=1",
    ] {
        assert!(
            matches!(r("GET", bad), Err(RouteError::BadQuery(_))),
            "{bad}"
        );
    }
}

#[test]
fn channels_on_every_subscription_path_with_their_part_of_since() {
    let at = |e, s| {
        Some(Since {
            epoch: Some(e),
            seq: s,
        })
    };
    assert_eq!(
        r("GET", "/sse/4?channel=a&channel=room%3A1&since=1-2__3-4"),
        Ok(Route::Subscribe {
            user: Some(4),
            transport: Transport::Sse,
            since: at(1, 2),
            token: None,
            channels: vec![("a".into(), None), ("room:1".into(), at(3, 4))],
            framed: true,
            session: None,
        })
    );
    // No id: only channels, and the composite has one part per channel.
    let h = req(
        "GET",
        "/sse?channel=a&channel=b",
        "Last-Event-ID: 5-6_7-8\r\n",
    );
    assert!(
        matches!(route(&h), Ok(Route::Subscribe { user: None, ref channels, .. })
        if channels == &[("a".to_string(), at(5, 6)), ("b".to_string(), at(7, 8))])
    );
    assert!(matches!(
        route(&req("GET", "/ws?framed=1&channel=x", WS)),
        Ok(Route::Subscribe {
            user: None,
            framed: true,
            session: None,
            ..
        })
    ));
    assert!(matches!(
        r("GET", "/poll?channel=x&since=1-1"),
        Ok(Route::Poll {
            user: None,
            since: None,
            ..
        })
    ));
    for bad in [
        "/sub",
        "/sse?framed=1",
        "/sse/1?channel=a&since=1-1",
        "/poll?channel=a&since=1_2",
    ] {
        assert!(
            matches!(r("GET", bad), Err(RouteError::BadQuery(_))),
            "{bad}"
        );
    }
}

#[test]
fn channel_publish_and_history() {
    assert_eq!(
        r("POST", "/pub/room:1"),
        Ok(Route::PublishChannel {
            channel: "room:1".into(),
            token: None
        })
    );
    assert_eq!(r("POST", "/pub/007"), Err(RouteError::BadId));
    assert!(matches!(
        r("POST", "/pub/a%20b"),
        Err(RouteError::BadQuery(_))
    ));
    assert_eq!(
        r("GET", "/history/news?since=3-9&limit=5"),
        Ok(Route::ChannelHistory {
            channel: "news".into(),
            since: Some(Since {
                epoch: Some(3),
                seq: 9
            }),
            limit: 5
        })
    );
    assert_eq!(
        r("GET", "/history/news"),
        Ok(Route::ChannelHistory {
            channel: "news".into(),
            since: None,
            limit: 100
        })
    );
    for bad in [
        "/history/news?limit=0",
        "/history/news?limit=1001",
        "/history/12",
    ] {
        assert!(r("GET", bad).is_err(), "{bad}");
    }
}

#[test]
fn a_session_names_a_stream_that_may_start_empty() {
    assert_eq!(
        r("GET", "/sse?session=tab1"),
        Ok(Route::Subscribe {
            user: None,
            transport: Transport::Sse,
            since: None,
            token: None,
            channels: vec![],
            framed: false,
            session: Some("tab1".into()),
        })
    );
    assert!(matches!(
        r("GET", "/sub/7?session=a-b_c&channel=x"),
        Ok(Route::Subscribe { user: Some(7), transport: Transport::Stream, ref session, .. })
            if session.as_deref() == Some("a-b_c")
    ));
    for bad in [
        "/sse?session=",
        "/sse?session=a.b",
        "/sse?session=a&session=a",
    ] {
        assert!(
            matches!(r("GET", bad), Err(RouteError::BadQuery(_))),
            "{bad}"
        );
    }
}

#[test]
fn a_sessions_last_event_id_may_carry_the_parts_of_channels_joined_later() {
    let at = |e, s| {
        Some(Since {
            epoch: Some(e),
            seq: s,
        })
    };
    // The user's and the URL's channel are resumed; the two joined later dropped.
    let h = req(
        "GET",
        "/sse/4?session=s&channel=a",
        "Last-Event-ID: 1-2_3-4_5-6_\r\n",
    );
    assert!(matches!(
        route(&h),
        Ok(Route::Subscribe { since, ref channels, .. })
            if since == at(1, 2) && channels == &[("a".to_string(), at(3, 4))]
    ));
    // With nothing in the URL, every part is of a later channel.
    let h = req("GET", "/sse?session=s", "Last-Event-ID: 5-6\r\n");
    assert!(matches!(
        route(&h),
        Ok(Route::Subscribe { since: None, ref channels, .. }) if channels.is_empty()
    ));
    // Fewer parts than the URL's streams, more without a session, or more in
    // `?since=`: still refused.
    for (target, id) in [
        ("/sse/4?session=s&channel=a", Some("1-2")),
        ("/sse/4?channel=a", Some("1-2_3-4_5-6")),
        ("/sse/4?session=s&channel=a&since=1-2_3-4_5-6", None),
    ] {
        let extra = id.map_or(String::new(), |id| format!("Last-Event-ID: {id}\r\n"));
        assert!(
            matches!(
                route(&req("GET", target, &extra)),
                Err(RouteError::BadQuery(_))
            ),
            "{target} {id:?}"
        );
    }
}

#[test]
fn subscribe_and_unsubscribe_name_a_session_and_a_channel() {
    assert_eq!(
        r("POST", "/subscribe?session=s&channel=room%3A1&since=3-4"),
        Ok(Route::Control(StreamControl {
            session: "s".into(),
            channel: "room:1".into(),
            since: Some("3-4".into()),
            subscribe: true,
            presence: false,
        }))
    );
    assert_eq!(
        r("POST", "/unsubscribe?channel=news&session=s"),
        Ok(Route::Control(StreamControl {
            session: "s".into(),
            channel: "news".into(),
            since: None,
            subscribe: false,
            presence: false,
        }))
    );
    assert_eq!(
        r("POST", "/subscribe?session=s&channel=room&presence=1"),
        Ok(Route::Control(StreamControl {
            session: "s".into(),
            channel: "room".into(),
            since: None,
            subscribe: true,
            presence: true,
        }))
    );
    let allow = Err(RouteError::MethodNotAllowed { allow: "POST" });
    assert_eq!(r("GET", "/subscribe?session=s&channel=a"), allow);
    assert_eq!(r("DELETE", "/unsubscribe?session=s&channel=a"), allow);
    for bad in [
        "/subscribe?session=s&channel=a&presence=2",
        "/subscribe?session=s&channel=a&presence=1&presence=1",
        "/unsubscribe?session=s&channel=a&presence=1",
        "/subscribe?channel=a",
        "/subscribe?session=s",
        "/unsubscribe?session=s&channel=a&since=1",
        "/subscribe?session=s&channel=a&channel=b",
    ] {
        assert!(
            matches!(r("POST", bad), Err(RouteError::BadQuery(_))),
            "{bad}"
        );
    }
    assert_eq!(
        r("POST", "/subscribe?session=s&channel=a&since=1&since=2"),
        Err(RouteError::BadId)
    );
    assert_eq!(r("POST", "/subscribe/x").map_err(|e| e.status()), Err(404));
}

#[test]
fn presence_and_online() {
    let channel = |name: &str, stats| Route::Presence {
        of: Present::Channel(name.into()),
        stats,
    };
    assert_eq!(r("GET", "/presence/room:1"), Ok(channel("room:1", false)));
    assert_eq!(
        r("GET", "/presence/room:1/stats"),
        Ok(channel("room:1", true))
    );
    assert_eq!(
        r("GET", "/presence/42"),
        Ok(Route::Presence {
            of: Present::Subject(42),
            stats: false
        })
    );
    assert_eq!(r("GET", "/online/7"), Ok(Route::Online { user: 7 }));
    assert_eq!(r("GET", "/presence/042"), Err(RouteError::BadId));
    assert_eq!(r("GET", "/online/x"), Err(RouteError::BadId));
    assert!(matches!(
        r("GET", "/presence/a%20b"),
        Err(RouteError::BadQuery(_))
    ));
    for missing in ["/presence", "/presence/a/list", "/online", "/online/7/x"] {
        assert_eq!(r("GET", missing), Err(RouteError::NotFound), "{missing}");
    }
    assert!(matches!(
        r("POST", "/presence/a"),
        Err(RouteError::MethodNotAllowed { .. })
    ));
}
