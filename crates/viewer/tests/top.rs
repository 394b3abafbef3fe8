//! `myriad top --once` against real admin listeners over TCP: two live monitors and one
//! address where nothing listens.

// The monitor fed with real counters is observe's own test helper, shared by path rather
// than copied.
#[path = "../../observe/tests/common/mod.rs"]
mod common;

use viewer::top::{snapshot_text, SortKey, TopArgs};

fn num(cell: &str) -> f64 {
    let (n, mul) = match cell.strip_suffix('k') {
        Some(n) => (n, 1e3),
        None => match cell.strip_suffix('M') {
            Some(n) => (n, 1e6),
            None => (cell, 1.0),
        },
    };
    n.parse::<f64>()
        .unwrap_or_else(|_| panic!("not a number: {cell}"))
        * mul
}

#[test]
fn once_lists_processes_sorted_with_totals_and_errors() {
    let mut a = common::fed_monitor(60);
    let mut b = common::fed_monitor(60);
    common::wait_for_traffic(&a.monitor);
    common::wait_for_traffic(&b.monitor);
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let addrs = vec![
        a.monitor.admin_addr().unwrap().to_string(),
        format!("http://{}/", b.monitor.admin_addr().unwrap()),
        dead.to_string(),
    ];
    let args = TopArgs {
        addrs,
        once: true,
        interval_ms: 1000,
        sort: SortKey::Conns,
        width: Some(120),
    };
    let text = snapshot_text(&args).unwrap();
    eprintln!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("myriad top: 2 process(es), sorted by connections"),
        "{text}"
    );
    assert!(lines[1].starts_with("machine: CPU "), "{text}");
    assert!(lines[2].starts_with("TCP sockets: "), "{text}");
    assert!(
        lines[3].starts_with("ADDR  ") && lines[3].contains("OUT/s"),
        "{text}"
    );
    // Errors name an OS message of any length; the rest fits 120 columns.
    for l in lines.iter().filter(|l| !l.starts_with("error: ")) {
        assert!(
            l.chars().count() <= 120,
            "{} columns: {l}",
            l.chars().count()
        );
    }
    let rows: Vec<Vec<&str>> = lines[4..6]
        .iter()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let total: Vec<&str> = lines[6].split_whitespace().collect();
    assert_eq!(total[0], "TOTAL", "{text}");
    assert_eq!(total[1], "2p");
    for r in &rows {
        assert_eq!(r[1], std::process::id().to_string(), "pid column in {text}");
    }
    let (c0, c1) = (num(rows[0][2]), num(rows[1][2]));
    assert!(
        c0 >= c1 && c1 > 0.0,
        "rows sorted by connections, largest first: {text}"
    );
    let sum = c0 + c1;
    assert!(
        (num(total[2]) - sum).abs() <= sum * 0.01 + 1.0,
        "totals add up: {text}"
    );
    assert!(
        lines[7].starts_with(&format!("error: {dead}: ")),
        "unreachable address reported: {text}"
    );

    // Nothing answering at all is an error, not an empty table.
    let none = TopArgs {
        addrs: vec![dead.to_string()],
        once: true,
        interval_ms: 1000,
        sort: SortKey::Cpu,
        width: None,
    };
    let err = snapshot_text(&none).unwrap_err().to_string();
    assert!(err.contains("no admin address answered"), "{err}");

    // Wide enough, every column is there.
    let wide = TopArgs {
        width: Some(400),
        ..args
    };
    let text = snapshot_text(&wide).unwrap();
    let header = text.lines().nth(3).unwrap();
    for title in [
        "USR%",
        "SYS%",
        "LAG avg/p90/max",
        "QUEUED",
        "DROPS",
        "LAT p50/p99",
    ] {
        assert!(
            header.contains(title),
            "{title} missing at width 400: {text}"
        );
    }
    a.stop();
    b.stop();
}
