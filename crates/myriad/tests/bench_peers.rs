//! `myriad bench --peer …` at a tiny scale: the same scenarios against the peer servers
//! (a Node.js cluster, nginx + nchan, the C floor, Socket.IO), through the real binary. Each peer
//! is started by the bench, measured by the same client, and gone afterwards. No timing
//! assertion: only counts, presence and that nothing is left running.

mod common;

use common::bench::{
    bench, common_parts, first_number, gone, rooms_delivered, row, TINY_CONNECT, TINY_ROOMS,
    TINY_UNICAST,
};
use std::path::Path;
use std::process::Command;

/// `bench SCENARIO --peer PEER FLAGS…`; the report.
fn against(dir: &Path, scenario: &str, peer: &str, flags: &[&str]) -> String {
    bench(dir, scenario, &[&["--peer", peer], flags].concat())
}

/// The one-user latency phase and one ladder step with 100 subscribers: every one
/// connected, every delivery of the latency phase received.
fn one_user_broadcast(dir: &Path, peer: &str) -> String {
    let r = against(
        dir,
        "broadcast",
        peer,
        &[
            "--shape",
            "one-user",
            "--connections",
            "100",
            "--latency-secs",
            "1",
            "--rates",
            "5",
            "--step-secs",
            "1",
        ],
    );
    assert_eq!(row(&r, "subscribers connected (one-user)")[0], "100 of 100");
    let got = row(
        &r,
        "latency phase: deliveries received / expected (one-user)",
    );
    assert_eq!(got[2], "yes", "{got:?}");
    r
}

/// Unicast against a peer whose replies carry no counts: one delivery per publish.
fn unicast_one_per_publish(dir: &Path, peer: &str) -> String {
    let r = against(dir, "unicast", peer, TINY_UNICAST);
    common_parts(&r);
    assert_eq!(row(&r, "connections held")[0], "200 of 200");
    let got = row(&r, "deliveries received / one per publish");
    assert!(first_number(got[0]) > 0.0, "{got:?}");
    assert_eq!(got[2], "yes", "{got:?}");
    r
}

/// Two connect storms, counted by the peer's own /stats.
fn storms(dir: &Path, peer: &str) -> String {
    let r = against(dir, "connect", peer, TINY_CONNECT);
    assert!(
        first_number(row(&r, "server accepts per second")[0]) > 0.0,
        "{r}"
    );
    assert_eq!(row(&r, "failed connection attempts")[0], "0");
    r
}

#[test]
fn broadcast_against_the_node_peer() {
    assert!(
        Command::new("node").arg("--version").output().is_ok(),
        "this test needs Node.js: apt-get install -y nodejs"
    );
    let out = tempfile::tempdir().unwrap();
    let r = one_user_broadcast(out.path(), "node");
    assert!(r.contains("the Node.js peer"), "{r}");
    // The cluster ended with the bench (a leftover would keep the bench lock held).
    assert!(
        gone(&out.path().join("broadcast/peer_node.js")),
        "node processes left behind"
    );
}

#[test]
fn unicast_and_connect_against_the_nchan_peer() {
    assert!(
        Path::new("/usr/lib/nginx/modules/ngx_nchan_module.so").exists(),
        "this test needs nginx with nchan: apt-get install nginx-light libnginx-mod-nchan (scripts/setup.sh does)"
    );
    let out = tempfile::tempdir().unwrap();
    let r = unicast_one_per_publish(out.path(), "nchan");
    assert!(r.contains("the nchan peer"), "{r}");
    assert!(
        gone(&out.path().join("unicast/nchan/nginx.conf")),
        "nginx left behind"
    );
    // nginx's /stats counts connects ($connection): the storms are measured on its side.
    storms(out.path(), "nchan");
    assert!(
        gone(&out.path().join("connect/nchan/nginx.conf")),
        "nginx left behind"
    );
}

#[test]
fn broadcast_unicast_and_connect_against_the_c_floor() {
    assert!(
        Command::new("cc").arg("--version").output().is_ok(),
        "this test needs a C compiler: apt-get install gcc"
    );
    let out = tempfile::tempdir().unwrap();
    // Its two threads each hold part of the streams: a publish reaches both.
    let r = one_user_broadcast(out.path(), "floor");
    assert!(r.contains("the C floor"), "{r}");
    assert!(
        gone(&out.path().join("broadcast/peer_floor")),
        "the floor left behind"
    );
    unicast_one_per_publish(out.path(), "floor");
    storms(out.path(), "floor");
    assert!(
        gone(&out.path().join("connect/peer_floor")),
        "the floor left behind"
    );
}

#[test]
fn rooms_against_the_nchan_peer() {
    assert!(
        Path::new("/usr/lib/nginx/modules/ngx_nchan_module.so").exists(),
        "this test needs nginx with nchan: apt-get install nginx-light libnginx-mod-nchan (scripts/setup.sh does)"
    );
    let out = tempfile::tempdir().unwrap();
    let r = against(out.path(), "rooms", "nchan", TINY_ROOMS);
    assert!(r.contains("the nchan peer"), "{r}");
    rooms_delivered(out.path(), &r);
    assert!(
        gone(&out.path().join("rooms/nchan/nginx.conf")),
        "nginx left behind"
    );
}

#[test]
fn rooms_against_the_socketio_peer() {
    assert!(
        Command::new("npm").arg("--version").output().is_ok(),
        "this test needs Node.js and npm: apt-get install -y nodejs npm"
    );
    let out = tempfile::tempdir().unwrap();
    let r = against(out.path(), "rooms", "socketio", TINY_ROOMS);
    assert!(r.contains("the Socket.IO peer"), "{r}");
    rooms_delivered(out.path(), &r);
    assert!(
        gone(&out.path().join("rooms/socketio/peer_socketio.js")),
        "the Socket.IO cluster left behind"
    );
}
