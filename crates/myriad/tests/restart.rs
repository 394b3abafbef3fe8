//! Durable subscriptions (SPEC B3): with the SQLite store a restart brings back exactly
//! the same graph, and the config file and MYRIAD_* variables configure `serve`.

mod common;

use common::postgres::{psql, PgSchema};
use common::*;

#[test]
fn subscriptions_survive_a_restart_with_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("graph.db").display());
    {
        let server = Server::start(&["--store", &store]);
        let (status, _) = server.request("POST", "/subscriptions", b"1 100\n2 100\n3 100\n4 200\n");
        assert_eq!(status, 200);
        assert_eq!(server.request("PUT", "/subscriptions/5/100", b"").0, 200);
        assert_eq!(server.request("DELETE", "/subscriptions/2/100", b"").0, 200);
    } // killed: no clean shutdown, like a crash
    let server = Server::start(&["--store", &store]);
    assert_eq!(
        server.request("GET", "/subscribers/100", b"").1.trim(),
        "[1,3,5]"
    );
    assert_eq!(
        server.request("GET", "/subscribers/200", b"").1.trim(),
        "[4]"
    );
    assert_eq!(
        server.request("GET", "/subscriptions/5", b"").1.trim(),
        "[100]"
    );
    let (_s1, _) = subscribe_stream(&server, 1);
    let (_s5, _) = subscribe_stream(&server, 5);
    server.wait_stats("logins", |s| s["connections_logged_in"] == 2);
    assert_eq!(server.publish(100, "x")["connections"], 2);
}

#[test]
fn config_file_and_environment_configure_serve() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("myriad.toml");
    std::fs::write(&file, "store = \"memory\"\nmax-connections = 2\n").unwrap();
    let server = Server::start_args(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--config",
        file.to_str().unwrap(),
    ]);
    let held: Vec<_> = (0..2).map(|i| subscribe_stream(&server, i + 1)).collect();
    let mut s = server.connect();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut s, &mut out).unwrap();
    assert!(
        out.starts_with("HTTP/1.1 503"),
        "max-connections from the file: {out}"
    );
    drop(held);
}

/// The same with PostgreSQL as the shared store (SPEC E3), in a schema of its own.
#[test]
fn subscriptions_survive_a_restart_with_postgres() {
    let schema = PgSchema::new("restart");
    let url = schema.url();
    {
        let server = Server::start(&["--store", &url]);
        assert_eq!(
            server
                .request("POST", "/subscriptions", b"1 100\n2 100\n")
                .0,
            200
        );
        assert_eq!(server.request("DELETE", "/subscriptions/1/100", b"").0, 200);
    }
    let server = Server::start(&["--store", &url]);
    assert_eq!(
        server.request("GET", "/subscribers/100", b"").1.trim(),
        "[2]"
    );
}

/// A PostgreSQL restart under a running server, as the server sees one (its
/// backends terminated): subscription changes, reads and durable history go on,
/// each on a new connection, and nothing stored before is lost.
#[test]
fn a_server_on_postgres_rides_out_a_lost_connection() {
    let schema = PgSchema::new("pg_lost");
    let name = &schema.0;
    let url = format!("{}&application_name={name}", schema.url());
    let terminate = || {
        let killed = psql(&format!(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = '{name}'"
        ));
        assert_ne!(
            killed, "0",
            "the server's backends were found and terminated"
        );
    };
    let server = Server::start(&["--store", &url, "--history-store", "store"]);
    assert_eq!(server.request("PUT", "/subscriptions/6/5", b"").0, 200);
    // User 6 online: its history is kept.
    let (_online, _) = subscribe_stream(&server, 6);
    assert_eq!(server.publish(5, "before")["users"], 1);

    // Both connections (the store's, durable history's) gone at once.
    terminate();
    assert_eq!(server.request("PUT", "/subscriptions/6/7", b"").0, 200);
    let (status, body) = server.request("POST", "/pub/7", b"after");
    assert_eq!(status, 200, "the durable write after the loss: {body}");
    assert_eq!(server.request("GET", "/subscribers/7", b"").1.trim(), "[6]");
    // A read from the store after another loss.
    terminate();
    assert_eq!(
        server.request("GET", "/subscriptions/6", b"").1.trim(),
        "[5,7]"
    );
    let (status, body) = server.request("GET", "/poll/6?since=0", b"");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("before") && body.contains("after") && body.contains(r#""gap":false"#),
        "{body}"
    );
}
