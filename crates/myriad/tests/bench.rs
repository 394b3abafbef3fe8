//! `myriad bench` scenarios end to end at a tiny scale, through the real binary: each
//! starts its servers, drives load, and writes a report whose table is filled with
//! plausible numbers. No timing assertion: only counts, presence and consistency.

mod common;

use common::bench::{
    bench, common_parts, every_hostile_case_ran, first_number, rooms_delivered, row, TINY_CONNECT,
    TINY_ROOMS, TINY_UNICAST,
};
use common::netns::Netns;
use std::process::Command;

#[test]
fn idle_holds_every_connection_and_measures_memory() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "idle",
        &["--connections", "300", "--transport", "stream"],
    );
    common_parts(&r);
    let held = row(&r, "connections held (stream)");
    assert!(held[0].starts_with("300 of 300"), "{held:?}");
    assert_eq!(held[2], "yes");
    let user = row(&r, "user-space memory per idle connection (stream)");
    assert!(user[0].contains(" B") || user[0].contains("KB"), "{user:?}");
    assert!(first_number(row(&r, "connection accept rate (stream)")[0]) > 0.0);
    let after = row(&r, "memory 1 s after everyone left (stream)");
    assert!(after[0].contains("idle"), "{after:?}");
    let csv = std::fs::read_to_string(out.path().join("idle/server-stream.csv")).unwrap();
    assert!(csv.lines().count() > 2, "the server CSV has rows");
    assert!(r.contains("## Live view"));
}

#[test]
fn idle_measures_connections_in_channels() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "idle",
        &[
            "--connections",
            "200",
            "--channels",
            "40",
            "--channels-per-conn",
            "1,5",
        ],
    );
    common_parts(&r);
    for (phase, budget) in [("ws, 1 channel", "124 B"), ("ws, 5 channels", "220 B")] {
        let held = row(&r, &format!("connections held ({phase})"));
        assert!(held[0].starts_with("200 of 200"), "{held:?}");
        let user = row(
            &r,
            &format!("user-space memory per idle connection ({phase})"),
        );
        assert!(
            (user[0].contains(" B (anonymous") || user[0].contains("KB (anonymous"))
                && user[0].contains("whole RSS"),
            "{user:?}"
        );
        assert!(user[1].starts_with(&format!("≤ {budget}")), "{user:?}");
    }
    assert!(out.path().join("idle/server-ws-5-channels.csv").exists());
}

#[test]
fn rooms_run_the_ladder_over_channels() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(out.path(), "rooms", TINY_ROOMS);
    assert!(r.contains("myriad serve"), "{r}");
    rooms_delivered(out.path(), &r);
}

#[test]
fn broadcast_runs_the_ladder_for_both_shapes() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "broadcast",
        &[
            "--connections",
            "200",
            "--latency-secs",
            "1",
            "--rates",
            "5,10",
            "--step-secs",
            "1",
        ],
    );
    common_parts(&r);
    for shape in ["one-user", "followers"] {
        assert_eq!(
            row(&r, &format!("subscribers connected ({shape})"))[0],
            "200 of 200"
        );
        let lat = row(&r, "broadcast latency p99").join(" ");
        assert!(lat.contains(" ms"), "{lat}");
        let got = row(
            &r,
            &format!("latency phase: deliveries received / expected ({shape})"),
        );
        assert_eq!(
            got[2], "yes",
            "every delivery of the latency phase: {got:?}"
        );
        assert!(r.contains(&format!("## Ladder ({shape})")), "{r}");
        // Steps shorter than 10 s never make a figure.
        let dps = row(
            &r,
            &format!("broadcast: deliveries/s, every message to all within 1 s ({shape})"),
        );
        assert_eq!(dps[2], "no", "{dps:?}");
        let csv = std::fs::read_to_string(out.path().join(format!("broadcast/ladder-{shape}.csv")))
            .unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert!(lines[0].starts_with("time_s,rate_msg_s,"), "{csv}");
        // Two rates, both passing at this scale (or one miss and the step after it).
        assert_eq!(lines.len(), 3, "{csv}");
        // Every step's deliveries are exactly counted: received ≥ sent × subscribers.
        for l in &lines[1..] {
            let cells: Vec<u64> = l
                .split(',')
                .map(|c| c.parse::<f64>().unwrap() as u64)
                .collect();
            assert_eq!(cells[4], cells[3] * 200, "expected = sent × 200: {l}");
            assert!(cells[5] >= cells[4], "received ≥ expected: {l}");
        }
    }
    assert!(out.path().join("broadcast/ladder.png").is_file());
}

#[test]
fn connect_storms_and_a_server_binary_given_by_path() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "connect",
        &[
            TINY_CONNECT,
            &["--server-bin", env!("CARGO_BIN_EXE_myriad")],
        ]
        .concat(),
    );
    common_parts(&r);
    assert!(r.contains("server executable: "), "{r}");
    assert!(first_number(row(&r, "server accepts per second")[0]) > 0.0);
    assert_eq!(row(&r, "failed connection attempts")[0], "0");
}

#[test]
fn unicast_reports_latency_and_server_cpu() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(out.path(), "unicast", TINY_UNICAST);
    common_parts(&r);
    assert_eq!(row(&r, "connections held")[0], "200 of 200");
    assert!(first_number(row(&r, "published")[0]) > 0.0);
    assert!(first_number(row(&r, "deliveries received")[0]) > 0.0);
    assert!(row(&r, "server CPU while publishing")[0].contains("% of a core"));
    assert!(row(&r, "unicast latency p50 / p99.9 / max")[0].contains(" ms"));
}

#[test]
fn mass_disconnect_and_keepalive_see_every_connection_go() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(out.path(), "mass-disconnect", &["--connections", "300"]);
    common_parts(&r);
    assert!(row(&r, "connections held before the close")[0].starts_with("300 of 300"));
    let gone = row(&r, "time until the server counted no connection");
    assert!(gone[0].ends_with("; 0 left"), "{gone:?}");

    let r = bench(
        out.path(),
        "keepalive",
        &["--connections", "300", "--keepalive-timeout", "1"],
    );
    common_parts(&r);
    assert!(row(&r, "clients answered")[0].starts_with("300 of 300"));
    let closed = row(
        &r,
        "time from the last response until the server closed all",
    );
    assert!(
        closed[0].ends_with(" s") && !closed[0].contains("still open"),
        "{closed:?}"
    );
}

#[test]
fn churn_and_c100k_at_a_tiny_scale() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "churn",
        &["--connections", "200", "--duration", "2"],
    );
    common_parts(&r);
    assert!(first_number(row(&r, "connects / s (server)")[0]) > 0.0);
    assert_eq!(row(&r, "client errors")[2], "yes");
    // --server-flag reaches the server: one it does not know stops the bench.
    let run = Command::new(env!("CARGO_BIN_EXE_myriad"))
        .args(["bench", "churn", "--connections", "10", "--duration", "1"])
        .args(["--no-tune", "--server-flag=--no-such-flag", "--out"])
        .arg(out.path())
        .output()
        .expect("run myriad bench");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success() && stderr.contains("the server exited before listening"),
        "{stderr}"
    );

    let r = bench(
        out.path(),
        "c100k",
        &["--connections", "1000", "--servers", "2", "--hold", "1"],
    );
    common_parts(&r);
    let held = row(&r, "concurrent connections held");
    assert!(held[0].starts_with("1,000 of 1,000"), "{held:?}");
    assert!(r.contains("2 servers"), "{r}");
}

#[test]
fn abuse_runs_every_hostile_case_beside_honest_subscribers() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "abuse",
        &[
            "--connections",
            "200",
            "--latency-secs",
            "3",
            "--abuse-each",
        ],
    );
    common_parts(&r);
    let connected = row(&r, "honest subscribers connected");
    assert!(connected[0].starts_with("200 of 200"), "{connected:?}");
    for phase in ["clean", "under abuse", "clean again"] {
        let got = row(
            &r,
            &format!("honest deliveries received / expected ({phase})"),
        );
        assert_eq!(got[2], "yes", "{phase}: {got:?}");
        assert!(first_number(got[0]) > 0.0, "{phase}: {got:?}");
        let rss = row(&r, &format!("server RSS peak ({phase})"));
        assert!(rss[0].contains("MB") || rss[0].contains("KB"), "{rss:?}");
    }
    every_hostile_case_ran(&r);
    let end = row(&r, "honest subscribers still connected at the end");
    assert_eq!(end[2], "yes", "{end:?}");
    // The abusers ran in their own process: its CPU is its own rusage, reported.
    let phase = r
        .lines()
        .find(|l| l.starts_with("| under abuse |"))
        .expect("the phase table");
    let abusers_cpu = phase.split(" | ").nth(3).expect("abusers' CPU cell");
    assert!(first_number(abusers_cpu) > 0.0, "{phase}");
    // --abuse-each: one phase per case alone, every honest delivery received.
    for case in ["SlowReaders", "AbruptDisconnects"] {
        let got = row(
            &r,
            &format!("honest deliveries received / expected (only {case})"),
        );
        assert_eq!(got[2], "yes", "{case}: {got:?}");
        assert!(
            r.lines()
                .any(|l| l.starts_with(&format!("| only {case} |")) && l.contains(case)),
            "{case}: rounds missing"
        );
    }
}

/// `bench churn --churn-rooms 8` of 400 connects with `held` members in the listed
/// channel and `extra` flags, checked as every such run must be: no connect error,
/// each join and leave pushed once and in order per (room, user), a join per
/// connect, and the list timed on each of `via`'s ports. Returns the report.
fn churn_rooms(held: &str, extra: &[&str], via: &[&str]) -> String {
    let out = tempfile::tempdir().unwrap();
    let mut args = vec![
        "--connections",
        "400",
        "--churn-rate",
        "400",
        "--churn-rooms",
        "8",
        "--churn-held",
        held,
        "--duration",
        "4",
        "--churn-publish-rate",
        "0",
        "--server-flag=--presence-grace=0",
    ];
    args.extend_from_slice(extra);
    let r = bench(out.path(), "churn", &args);
    common_parts(&r);
    assert_eq!(row(&r, "client errors")[2], "yes", "no connect errors");
    let once = row(
        &r,
        "join/leave pushes to watchers: each once, in order, per (room, user)",
    );
    assert_eq!(once[2], "yes", "{once:?}");
    assert!(once[0].contains(" 0 out of turn"), "{once:?}");
    assert!(
        first_number(once[0]) >= 400.0,
        "a join per connect: {once:?}"
    );
    for via in via {
        let list = row(
            &r,
            &format!(
                "GET /presence/<channel> of {held} members during the churn on the {via}, p99"
            ),
        );
        assert!(list[0].ends_with(" ms"), "{list:?}");
    }
    r
}

/// `--churn-rooms`: join/leave pushes watched and checked once and in order per
/// (room, user) against the connects, and the held channel's list timed.
#[test]
fn churn_rooms_checks_every_join_and_leave_once_in_order() {
    let r = churn_rooms("400", &[], &["API port (event loop)", "admin listener"]);
    assert!(
        r.contains("answers from the channel's mirror (no router lock): avg / max"),
        "{r}"
    );
}

/// `--churn-rooms --servers 2`: the same checks over one supervisor of a router and
/// two gateways linked through NATS (the shape that holds 10,000 members here): the
/// joins and leaves cross processes and still arrive once and in order, the API
/// port's list comes from the router, and the supervisor's admin listener answers it
/// too (from the router's).
#[test]
fn churn_rooms_over_a_supervised_server_checks_every_join_and_leave_once() {
    let r = churn_rooms(
        "300",
        &["--servers", "2"],
        &[
            "API port (event loop)",
            "admin listener",
            "router's admin listener",
        ],
    );
    // The supervisor's /stats sums its gateways' connects.
    assert!(
        first_number(row(&r, "connects / s (server)")[0]) > 0.0,
        "{r}"
    );
    assert!(!r.contains("lists on the"), "no lister stopped early: {r}");
}

/// The soak of issue 10 in two minutes: churn with publishing, RSS and open fds
/// per 20-s interval. Bounds are in bytes and descriptors, not in time.
#[test]
fn churn_soak_two_minutes_keeps_memory_and_descriptors_bounded() {
    let out = tempfile::tempdir().unwrap();
    let r = bench(
        out.path(),
        "churn",
        &[
            "--connections",
            "1000",
            "--duration",
            "120",
            "--churn-rate",
            "1000",
            "--churn-publish-rate",
            "200",
            "--sample-every",
            "20",
            "--server-flag=--history=4",
            "--soak-warmup",
            "40",
        ],
    );
    common_parts(&r);
    assert!(r.contains("server flags added: --history=4"), "{r}");
    assert!(r.contains("| 40 s (warm-up) |"), "{r}");
    let flat = row(&r, "soak: RSS per 20 s interval vs their median");
    assert!(flat[0].contains("after 40 s of warm-up"), "{flat:?}");
    let spare = row(&r, "soak: fds − connections per 20 s interval (leak check)");
    assert_eq!(
        spare[2], "yes",
        "descriptors no connection explains grew: {spare:?}"
    );
    assert_eq!(row(&r, "client errors")[2], "yes", "no connect errors");
    let published = row(&r, "publishes during churn: answered / errors");
    assert_eq!(published[2], "yes", "{published:?}");
    assert!(r.contains("Soak: every 20 s"), "{r}");
    let csv = std::fs::read_to_string(out.path().join("churn/soak.csv")).unwrap();
    let rows: Vec<Vec<u64>> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert!(rows.len() >= 5, "an interval per 20 s: {csv}");
    // After the warm-up interval: growth bounded in bytes and descriptors.
    let (second, last) = (&rows[1], rows.last().unwrap());
    assert!(
        last[1] < second[1] + 16_000_000,
        "RSS grew by more than 16 MB: {csv}"
    );
    assert!(
        last[2] < second[2] + 1_000,
        "open fds grew by more than the churning connections: {csv}"
    );
}

/// A fresh network namespace (the one `bench c1m` makes at 1 M) has no rule that
/// tracks connections, whatever the conntrack module's maximum: `doctor` probes
/// with a loopback connection there instead of blocking 1 M on `nf_conntrack_max`.
#[test]
fn doctor_in_a_fresh_namespace_does_not_block_on_untracked_conntrack() {
    let ns = Netns::create(format!("myriad-doctor-{}", std::process::id()))
        .expect("ip netns add: root and iproute2 are needed");
    ns.ip(&["netns", "exec", &ns.name, "ip", "link", "set", "lo", "up"]);
    let out = Command::new("ip")
        .args(["netns", "exec", &ns.name, env!("CARGO_BIN_EXE_myriad")])
        .args(["doctor", "--connections", "1000000"])
        .output()
        .expect("run myriad doctor in the namespace");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("nf_conntrack"))
        .unwrap_or_else(|| panic!("doctor names conntrack:\n{text}"));
    assert!(!line.starts_with("BLOCK"), "{line}");
    if line.contains("nf_conntrack_max") {
        assert!(line.contains("not tracked"), "{line}");
    }
}
