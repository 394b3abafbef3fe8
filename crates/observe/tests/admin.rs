//! The admin listener over a real TCP connection, fed by real `LoopMetrics` increments.

mod common;

use std::sync::atomic::Ordering::Relaxed;

#[test]
fn metrics_healthz_stats_history_and_dashboard() {
    let mut fed = common::fed_monitor(60);
    let addr = fed.monitor.admin_addr().expect("admin bound");
    assert_ne!(addr.port(), 0);
    common::wait_for_traffic(&fed.monitor);

    let (status, _, body) = common::get(addr, "/healthz");
    assert_eq!((status, body.as_str()), (200, "ok\n"));

    let (status, head, body) = common::get(addr, "/metrics");
    assert_eq!(status, 200);
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let conns = fed
        .metrics
        .loops
        .iter()
        .map(|l| l.connections.load(Relaxed))
        .sum::<u64>();
    assert!(conns > 0);
    for needle in [
        "# HELP process_resident_memory_bytes ",
        "# TYPE process_resident_memory_bytes gauge",
        "# TYPE myriad_connections gauge",
        "# TYPE myriad_deliveries_total counter",
        "# TYPE myriad_loop_lag_seconds summary",
        "myriad_loop_lag_seconds{quantile=\"0.9\"} ",
        "myriad_loop_lag_seconds_count ",
        "myriad_router_subjects 12",
    ] {
        assert!(
            body.contains(needle),
            "{needle} missing in /metrics:\n{body}"
        );
    }
    let line = body
        .lines()
        .find(|l| l.starts_with("myriad_connections "))
        .unwrap();
    let v: u64 = line.split(' ').nth(1).unwrap().parse().unwrap();
    // The feeder keeps adding connections while we read, and /metrics may report the
    // last one-second sample: it is non-zero and never ahead of the live counters.
    let live = fed
        .metrics
        .loops
        .iter()
        .map(|l| l.connections.load(Relaxed))
        .sum::<u64>();
    assert!(
        v > 0 && v <= live,
        "myriad_connections {v}, live {live}, seen before {conns}"
    );

    let (status, head, body) = common::get(addr, "/stats");
    assert_eq!(status, 200);
    assert!(head.to_ascii_lowercase().contains("application/json"));
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["extra"]["router"]["subscriptions"], 34);
    assert_eq!(v["sample"]["pid"], std::process::id());
    assert_eq!(v["sample"]["loops"], 2);
    assert!(v["sample"]["connections"].as_u64().unwrap() > 0);
    assert!(v["sample"]["messages_out_per_s"].as_f64().unwrap() > 0.0);
    assert!(v["sample"]["lag_p90_us"].as_u64().unwrap() >= 200);
    assert!(v["sample"]["rss_bytes"].as_u64().unwrap() > 0);
    assert!(v["sample"]["machine"]["mem_total_bytes"].as_u64().unwrap() > 0);
    assert_eq!(v["processes"].as_array().unwrap().len(), 1);

    // Other processes of the same server are listed after this one.
    fed.monitor.set_children(std::sync::Arc::new(|| {
        vec![observe::Sample {
            pid: 1,
            connections: 5,
            ..Default::default()
        }]
    }));
    let v: serde_json::Value = serde_json::from_str(&common::get(addr, "/stats").2).unwrap();
    let procs = v["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 2);
    assert_eq!(
        (procs[0]["pid"].as_u64(), procs[1]["pid"].as_u64()),
        (Some(std::process::id() as u64), Some(1))
    );

    // A supervisor's /stats with many processes is larger than tiny_http's chunking
    // threshold (32 KiB); HTTP/1.1 readers that split head and body (the supervisor's
    // probe, `bench c1m`'s watcher) need it whole, with a Content-Length.
    fed.monitor.set_children(std::sync::Arc::new(|| {
        (1..=60)
            .map(|pid| observe::Sample {
                pid,
                connections: 5,
                ..Default::default()
            })
            .collect()
    }));
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    std::io::Write::write_all(
        &mut s,
        b"GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut raw = String::new();
    std::io::Read::read_to_string(&mut s, &mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap();
    assert!(body.len() > 32 << 10, "{} bytes", body.len());
    assert!(
        head.to_ascii_lowercase().contains("content-length:")
            && !head.to_ascii_lowercase().contains("chunked"),
        "{head}"
    );
    let v: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(v["processes"].as_array().unwrap().len(), 61);

    let (status, _, body) = common::get(addr, "/history");
    assert_eq!(status, 200);
    let h: Vec<observe::Sample> = serde_json::from_str(&body).unwrap();
    assert!(h.len() >= 2 && h.windows(2).all(|w| w[0].time < w[1].time));

    // `/sample`: the last sample with the live connection count (the feeder adds 10
    // every 10 ms, so the one-second sample's count is behind what was live before
    // the request).
    let live = || -> u64 {
        fed.metrics
            .loops
            .iter()
            .map(|l| l.connections.load(Relaxed))
            .sum()
    };
    let before = live();
    let (status, _, body) = common::get(addr, "/sample");
    let after = live();
    assert_eq!(status, 200);
    let s: observe::Sample = serde_json::from_str(&body).unwrap();
    assert!(s.time > 0.0 && s.pid == std::process::id(), "{body}");
    assert!(
        (before..=after).contains(&s.connections),
        "live count {before}..={after}: {body}"
    );
    assert!(!body.contains("\"extra\""), "no extra: {body}");

    let (status, head, body) = common::get(addr, "/");
    assert_eq!(status, 200);
    assert!(head.contains("text/html"));
    assert!(body.contains("<canvas") && body.contains("/stats"));
    assert!(
        !body.contains("http://") && !body.contains("https://"),
        "dashboard must not load anything external"
    );

    assert_eq!(common::get(addr, "/nope").0, 404);

    fed.stop();
    drop(fed);
    // tiny_http's accept thread closes the listener shortly after the drop: wait (bounded).
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(
            std::time::Instant::now() < end,
            "admin port still open 10 s after drop"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
