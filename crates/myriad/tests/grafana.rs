//! `deploy/grafana/myriad.json` parses as a Grafana dashboard and every metric its
//! queries name is one a real server's `/metrics` exports (a renamed metric would
//! leave a panel silently empty): a single-process server's, and a router's and a
//! gateway's linked by a real nats-server (the cluster's counters exist only there).

mod common;

use common::cluster::{admin_of, gateway_with, get, Nats, Router};
use common::Server;
use std::collections::BTreeSet;

const DASHBOARD: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/grafana/myriad.json"
);

/// Metric names of the exposition text: every `# TYPE` family, with `_sum` and
/// `_count` for summaries.
fn exported(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("# TYPE ") else {
            continue;
        };
        let mut parts = rest.split_whitespace();
        let (Some(name), Some(kind)) = (parts.next(), parts.next()) else {
            continue;
        };
        if kind == "summary" || kind == "histogram" {
            names.insert(format!("{name}_sum"));
            names.insert(format!("{name}_count"));
        }
        names.insert(name.to_string());
    }
    names
}

/// Metric names a PromQL expression mentions: identifiers of ours outside label
/// matchers and strings.
fn named(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0; // inside {…}
    let mut word = String::new();
    let mut in_string = false;
    for c in expr.chars().chain([' ']) {
        if in_string {
            in_string = c != '"';
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        if depth == 0 && (word.starts_with("myriad_") || word.starts_with("process_")) {
            out.push(std::mem::take(&mut word));
        }
        word.clear();
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            '"' => in_string = true,
            _ => {}
        }
    }
    out
}

fn exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => exprs(v, out),
                }
            }
        }
        serde_json::Value::Array(list) => list.iter().for_each(|v| exprs(v, out)),
        _ => {}
    }
}

#[test]
fn the_grafana_dashboard_names_only_exported_metrics() {
    let text = std::fs::read_to_string(DASHBOARD).expect("deploy/grafana/myriad.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("the dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("a panels array");
    assert!(panels.len() >= 6, "a dashboard with panels");
    for panel in panels {
        assert!(
            panel["title"].is_string() && panel["gridPos"].is_object(),
            "panel {panel}"
        );
        assert!(
            !panel["targets"].as_array().is_none_or(|t| t.is_empty()),
            "panel without queries: {panel}"
        );
    }

    let server = Server::start(&["--admin", "127.0.0.1:0"]);
    let nats = Nats::start();
    let (_router, line) = Router::start_with(&nats, "memory", &["--admin", "127.0.0.1:0"]);
    let gateway = gateway_with(&nats, &["--admin", "127.0.0.1:0"]);
    let admins = [
        server
            .admin
            .expect("the admin address in the start line")
            .to_string(),
        admin_of(&line),
        gateway
            .admin
            .expect("the gateway's admin address")
            .to_string(),
    ];
    let exported: BTreeSet<String> = admins
        .iter()
        .flat_map(|admin| exported(&get(admin, "/metrics")))
        .collect();

    let mut all = Vec::new();
    exprs(&dashboard, &mut all);
    let mut unknown = BTreeSet::new();
    let mut used = 0;
    for expr in &all {
        for name in named(expr) {
            used += 1;
            if !exported.contains(&name) {
                unknown.insert(name);
            }
        }
    }
    assert!(used >= 10, "the queries name metrics: {all:?}");
    assert!(
        unknown.is_empty(),
        "the dashboard names metrics /metrics does not export: {unknown:?}"
    );
}

#[test]
fn metric_names_are_read_outside_label_matchers() {
    assert_eq!(
        named(r#"sum(rate(myriad_x_total{pid="myriad_y"}[1m])) / max(process_z)"#),
        ["myriad_x_total", "process_z"]
    );
}
