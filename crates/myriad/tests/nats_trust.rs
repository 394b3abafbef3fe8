//! The NATS trust boundary (docs/security.md): a nats-server started with
//! `deploy/nats-authorization.conf` itself (plus an `intruder` user allowed nothing of
//! myriad), JetStream on. A router (`--history-store jetstream`, its password in
//! `MYRIAD_NATS_PASSWORD`) and a gateway (`--nats-password-file`) serve a subscriber
//! through it; a back-end user (and `msggen --nats` as that user) publishes through
//! NATS but reads no delivery; the monitor user reads the router's counters; the
//! intruder and an anonymous client can neither inject a publish, forge a gateway's
//! batch or presence or a router's message, nor read deliveries — each refusal is the
//! NATS server's own permission error, and the subscriber receives only the honest
//! messages. Started without the authorization block, every part of it fails. Two
//! router shards serve within the router user's permissions too (forwarding
//! followers, and the publish port's NATS requests to the subject's shard), and a
//! supervised server within the user `myriad`'s.

mod common;

use common::cluster::{publish_at, publish_port_of, sse, wait_router_connections};
use common::read_until;
use common::secured::{serve, spawn_logged, start_nats, NatsClient, AUTHORIZATION};
use futures_util::{FutureExt, StreamExt};
use std::process::Command;

const ROUTER_PASSWORD: &str = "router-Pw-7f3a";
const GATEWAY_PASSWORD: &str = "gateway-Pw-91c2";
const PUBLISHER_PASSWORD: &str = "publisher-Pw-4d8e";
const INTRUDER_PASSWORD: &str = "intruder-Pw-00aa";
const SUPERVISED_PASSWORD: &str = "supervised-Pw-6b17";
const MONITOR_PASSWORD: &str = "monitor-Pw-2c5a";
/// The subscriber's user, and the subject published to.
const USER: u64 = 7;

/// The deploy file with an `intruder` user added to its list, and JetStream on.
fn conf(dir: &std::path::Path) -> String {
    let intruder = "    { user: intruder, password: $NATS_INTRUDER_PASSWORD, permissions: { \
                    publish: [\"intruder.>\"], subscribe: [\"intruder.>\", \"_INBOX.>\"] } }\n";
    let at = AUTHORIZATION
        .find("users = [\n")
        .expect("deploy/nats-authorization.conf has `users = [`")
        + "users = [\n".len();
    let mut authorization = AUTHORIZATION.to_string();
    authorization.insert_str(at, intruder);
    format!(
        "jetstream {{ store_dir: \"{}\" }}\n{authorization}",
        dir.join("js").display()
    )
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn user(name: &str, password: &str) -> async_nats::ConnectOptions {
    async_nats::ConnectOptions::with_user_and_password(name.into(), password.into())
}

/// A batch as a gateway sends it: one publish of `payload` to [`USER`].
fn forged_batch(payload: &'static str) -> bytes::Bytes {
    use cluster::codec::{encode_to_router, CallRequest, Request, ToRouter, WireCall};
    encode_to_router(&ToRouter::Bundle {
        gateway: 0x0bad,
        calls: vec![WireCall {
            loop_id: 0,
            token: 1,
            part: None,
            request: CallRequest::Bus(Request::Publish {
                subject: USER,
                payload: bytes::Bytes::from_static(payload.as_bytes()),
            }),
        }],
    })
}

#[test]
fn only_myriad_s_users_reach_myriad_s_subjects() {
    let dir = tempfile::tempdir().unwrap();
    let nats = start_nats(dir.path(), &conf(dir.path()), &PASSWORDS);
    let mut router = Command::new(env!("CARGO_BIN_EXE_myriad"));
    router
        .args(["serve", "--role", "router", "--store", "memory"])
        .args(["--history-store", "jetstream", "--nats", &nats.url])
        .args(["--nats-user", "myriad-router"])
        .env("MYRIAD_NATS_PASSWORD", ROUTER_PASSWORD);
    let (mut router, started, _) = spawn_logged(&mut router, "myriad router serving");
    assert!(
        started.contains("nats_auth=user myriad-router"),
        "{started}"
    );
    let password_file = dir.path().join("gateway.password");
    std::fs::write(&password_file, format!("{GATEWAY_PASSWORD}\n")).unwrap();
    let (gw, _) = serve(
        &[
            "--role",
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--loops",
            "2",
            "--nats",
            &nats.url,
            "--nats-user",
            "myriad-gateway",
            "--nats-password-file",
            password_file.to_str().unwrap(),
        ],
        &[],
        "listen=",
    );
    let gateway_id = gw.stats()["gateway_id"].as_str().unwrap().to_string();
    let (mut stream, mut got) = sse(&gw, USER, None);
    wait_router_connections(&gw, 1);
    assert_eq!(gw.publish(USER, "honest-1")["connections"], 1);
    read_until(&mut stream, &mut got, "honest-1");

    let rt = runtime();
    // Anonymous: refused at CONNECT.
    let anonymous = rt.block_on(async_nats::ConnectOptions::new().connect(&nats.url));
    let e = anonymous.expect_err("an anonymous client is refused");
    assert_eq!(
        e.kind(),
        async_nats::ConnectErrorKind::AuthorizationViolation,
        "{e}"
    );
    // A wrong password for a real user: refused too.
    let wrong = rt.block_on(user("myriad-gateway", "guess").connect(&nats.url));
    assert!(wrong.is_err(), "a wrong password is refused");

    // The back-end user publishes (SPEC C4) and is answered, but reads no delivery.
    let publisher = rt
        .block_on(NatsClient::connect(
            &nats.url,
            user("myriad-publisher", PUBLISHER_PASSWORD),
        ))
        .unwrap();
    let mut publisher_reads = rt
        .block_on(publisher.client.subscribe("myriad.gw.>"))
        .unwrap();
    rt.block_on(publisher.wait_refused("subscription", "myriad.gw.>"));
    let answer = rt
        .block_on(
            publisher
                .client
                .request(cluster::subjects::publish(USER), "via-nats".into()),
        )
        .unwrap();
    let answer: serde_json::Value = serde_json::from_slice(&answer.payload).unwrap();
    assert_eq!(answer["connections"], 1, "{answer}");
    read_until(&mut stream, &mut got, "via-nats");
    rt.block_on(async {
        publisher
            .client
            .publish("myriad.router", forged_batch("publisher-forged"))
            .await
            .unwrap();
        publisher.wait_refused("publish", "myriad.router").await;
    });

    // `myriad msggen --nats` publishes as that back-end user, within its permissions
    // (subject 1: nobody's, so the subscriber's history stays as it is).
    let msggen = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args([
            "msggen",
            "--nats",
            &nats.url,
            "--nats-user",
            "myriad-publisher",
        ])
        .args([
            "--max",
            "1",
            "--rate",
            "20",
            "--duration",
            "0.5",
            "--publishers",
            "1",
        ])
        .args(["--quiet", "--json"])
        .env("MYRIAD_NATS_PASSWORD", PUBLISHER_PASSWORD)
        .output()
        .unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&msggen.stdout)
        .unwrap_or_else(|_| panic!("msggen: {}", String::from_utf8_lossy(&msggen.stderr)));
    assert!(
        summary["sent"].as_u64() > Some(0) && summary["errors"] == 0,
        "{summary}"
    );

    // The monitor user reads the router's counters, and publishes nothing.
    let monitor = rt
        .block_on(NatsClient::connect(
            &nats.url,
            user("myriad-monitor", MONITOR_PASSWORD),
        ))
        .unwrap();
    let stats = rt
        .block_on(monitor.client.request(cluster::subjects::STATS, "".into()))
        .unwrap();
    let stats: serde_json::Value = serde_json::from_slice(&stats.payload).unwrap();
    assert_eq!(stats["gateways"], 1, "{stats}");
    rt.block_on(async {
        let publish = cluster::subjects::publish(USER);
        monitor
            .client
            .publish(publish.clone(), "monitor".into())
            .await
            .unwrap();
        monitor.wait_refused("publish", &publish).await;
    });

    // The intruder: every myriad subject refused, in both directions.
    let intruder = rt
        .block_on(NatsClient::connect(
            &nats.url,
            user("intruder", INTRUDER_PASSWORD),
        ))
        .unwrap();
    let own = format!("myriad.gw.{gateway_id}");
    let mut reads = Vec::new();
    for subject in [
        "myriad.gw.>",
        own.as_str(),
        "myriad.gateways",
        "myriad.router",
    ] {
        reads.push(
            rt.block_on(intruder.client.subscribe(subject.to_string()))
                .unwrap(),
        );
        rt.block_on(intruder.wait_refused("subscription", subject));
    }
    let resync =
        cluster::codec::encode_to_gateway(&cluster::codec::ToGateway::Resync { router: 1 });
    let presence = cluster::codec::encode_to_router(&cluster::codec::ToRouter::Presence {
        gateway: 0x0bad,
        replace: true,
        conns: vec![(0, 1, USER)],
    });
    let forged: Vec<(String, bytes::Bytes)> = vec![
        (cluster::subjects::publish(USER), "injected".into()),
        ("myriad.router".into(), forged_batch("intruder-forged")),
        ("myriad.router".into(), presence),
        (own.clone(), resync.clone()),
        ("myriad.gateways".into(), resync),
    ];
    for (subject, payload) in forged {
        rt.block_on(async {
            intruder
                .client
                .publish(subject.clone(), payload)
                .await
                .unwrap();
            intruder.wait_refused("publish", &subject).await;
        });
    }

    // Everything above was refused before this publish left: the subscriber gets it
    // and nothing else, and neither the intruder nor the back-end read it.
    assert_eq!(gw.publish(USER, "honest-2")["connections"], 1);
    read_until(&mut stream, &mut got, "honest-2");
    let text = String::from_utf8_lossy(&got);
    for foreign in ["injected", "forged"] {
        assert!(
            !text.contains(foreign),
            "{foreign:?} reached the subscriber: {text}"
        );
    }
    rt.block_on(async {
        intruder.client.flush().await.unwrap();
        publisher.client.flush().await.unwrap();
    });
    for sub in reads.iter_mut().chain([&mut publisher_reads]) {
        let read = sub.next().now_or_never().flatten();
        assert!(read.is_none(), "a delivery was read: {read:?}");
    }

    // The router's JetStream permissions cover reading history back at its start.
    let _ = router.kill();
    let _ = router.wait();
    let mut again = Command::new(env!("CARGO_BIN_EXE_myriad"));
    again
        .args(["serve", "--role", "router", "--store", "memory"])
        .args(["--history-store", "jetstream", "--nats", &nats.url])
        .args(["--nats-user", "myriad-router"])
        .env("MYRIAD_NATS_PASSWORD", ROUTER_PASSWORD);
    let (mut again, read_back, _) = spawn_logged(&mut again, "JetStream history read");
    assert!(read_back.contains("messages=3"), "{read_back}");
    let _ = again.kill();
    let _ = again.wait();
}

/// `deploy/`'s passwords for nats-server's environment.
const PASSWORDS: [(&str, &str); 6] = [
    ("NATS_MYRIAD_ROUTER_PASSWORD", ROUTER_PASSWORD),
    ("NATS_MYRIAD_MONITOR_PASSWORD", MONITOR_PASSWORD),
    ("NATS_MYRIAD_GATEWAY_PASSWORD", GATEWAY_PASSWORD),
    ("NATS_MYRIAD_PASSWORD", SUPERVISED_PASSWORD),
    ("NATS_MYRIAD_PUBLISHER_PASSWORD", PUBLISHER_PASSWORD),
    ("NATS_INTRUDER_PASSWORD", INTRUDER_PASSWORD),
];

#[test]
fn router_shards_serve_within_the_router_s_permissions() {
    let dir = tempfile::tempdir().unwrap();
    let nats = start_nats(dir.path(), &conf(dir.path()), &PASSWORDS);
    let shard = |index: &str| {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_myriad"));
        cmd.args([
            "serve", "--role", "router", "--store", "memory", "--nats", &nats.url,
        ])
        .args(["--router-shards", "2", "--router-shard", index])
        .args([
            "--publish-listen",
            "127.0.0.1:0",
            "--nats-user",
            "myriad-router",
        ])
        .env("MYRIAD_NATS_PASSWORD", ROUTER_PASSWORD);
        spawn_logged(&mut cmd, "myriad router serving")
    };
    let (mut first, line, _) = shard("0");
    let (mut second, _, _) = shard("1");
    let password_file = dir.path().join("gateway.password");
    std::fs::write(&password_file, GATEWAY_PASSWORD).unwrap();
    let (gw, _) = serve(
        &[
            "--role",
            "gateway",
            "--listen",
            "127.0.0.1:0",
            "--router-shards",
            "2",
            "--nats",
            &nats.url,
            "--nats-user",
            "myriad-gateway",
            "--nats-password-file",
            password_file.to_str().unwrap(),
        ],
        &[],
        "listen=",
    );
    // User 2 (shard 0) follows 7 (shard 1): shard 1 forwards to shard 0.
    let (status, body) = gw.request("POST", "/subscriptions", b"2 7\n");
    assert_eq!(status, 200, "{body}");
    let (mut stream, mut got) = sse(&gw, 2, None);
    wait_router_connections(&gw, 1);
    assert_eq!(gw.publish(7, "forwarded")["connections"], 1);
    read_until(&mut stream, &mut got, "forwarded");
    // Shard 0's publish port asks shard 1 over NATS (`myriad.pub.7`, answered on
    // myriad.inbox.>).
    let reply = publish_at(publish_port_of(&line), 7, "through-the-port");
    assert_eq!(reply["connections"], 1, "{reply}");
    read_until(&mut stream, &mut got, "through-the-port");
    for router in [&mut first, &mut second] {
        let _ = router.kill();
        let _ = router.wait();
    }
}

#[test]
fn a_supervised_server_serves_as_the_user_myriad() {
    let dir = tempfile::tempdir().unwrap();
    let nats = start_nats(dir.path(), &conf(dir.path()), &PASSWORDS);
    let (server, _) = serve(
        &[
            "--processes",
            "1",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "memory",
            "--history-store",
            "jetstream",
            "--nats",
            &nats.url,
            "--nats-user",
            "myriad",
        ],
        &[("MYRIAD_NATS_PASSWORD", SUPERVISED_PASSWORD)],
        "myriad supervisor serving",
    );
    let (mut stream, mut got) = sse(&server, USER, None);
    wait_router_connections(&server, 1);
    assert_eq!(server.publish(USER, "supervised")["connections"], 1);
    read_until(&mut stream, &mut got, "supervised");
}
