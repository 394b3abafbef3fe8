//! `myriad bench sprites` on its sharded path at a small scale (issue 46): 600
//! long-poll clients over 2 gateway processes of one supervised myriad and 2 client
//! processes, each client throwing with its own token. Exact counts: every connection
//! held, every sprite published received exactly once, no error.

mod common;

use common::bench::{bench, common_parts, first_number, row};

#[test]
fn sharded_sprites_receive_every_published_sprite_once() {
    let out = tempfile::tempdir().unwrap();
    let args = [
        "--connections",
        "600",
        "--servers",
        "2",
        "--flood-procs",
        "2",
        "--send-every",
        "1",
        "--hold",
        "1",
        "--duration",
        "3",
    ];
    let r = bench(out.path(), "sprites", &args);
    common_parts(&r);
    let held = row(&r, "clients held");
    assert!(
        held[0].starts_with("1,200 of 1,200 connections (server counts 1,200;"),
        "{r}"
    );
    assert_eq!(held[2], "yes", "{r}");
    let processes = row(&r, "processes")[0];
    assert!(processes.contains("2 gateways"), "{r}");
    assert!(processes.contains("clients: 2 processes"), "{r}");
    let cell = row(&r, "sprites received / published")[0];
    let (received, published) = cell.split_once(" / ").unwrap();
    assert!(first_number(published) > 0.0, "{r}");
    assert_eq!(received, published, "every sprite received once: {r}");
    assert_eq!(row(&r, "errors")[0], "0 / 0", "{r}");
    assert!(
        first_number(row(&r, "publishes/s sustained")[0]) > 0.0,
        "{r}"
    );
    assert!(row(&r, "latency p50 / max")[0].contains(" ms"), "{r}");
    assert!(
        row(&r, "holding cost per client, user space")[0].contains('B'),
        "{r}"
    );
    // Shorter than 10 s: marked as no valid figure.
    assert_eq!(row(&r, "step length")[2], "no", "{r}");
    let csv = std::fs::read_to_string(out.path().join("sprites/ladder-sprites.csv")).unwrap();
    assert_eq!(csv.lines().count(), 2, "one step: {csv}");
}
