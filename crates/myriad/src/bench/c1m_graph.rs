//! `bench c1m`'s users: the Barabási–Albert friends graph of N users, generated and
//! bulk-loaded into the embedded store, and every user's inbox subject (what the
//! unicast phase publishes to), loaded beside it.
//!
//! Not here: the phases that publish over them (`c1m`).

use super::held::Live;
use super::report::count;
use load::friends::{BadLinePolicy, GenArgs, LoadArgs, LoadSummary};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Friendships per new user of the graph (the Barabási–Albert m of issue 9).
pub(super) const GRAPH_M: u32 = 15;
/// Power-law exponent of the graph publishes' subjects. The graph's oldest users (low
/// ids) are its hubs (~m·√N friends: ~15,000 at 1M), and msggen's power law favours
/// low ids: at exponent 1.0 a twentieth of all publishes hit user 1 and the mean
/// publish reaches ~2,800 users (2.8 M deliveries/s at 1,000 msg/s); at 0.5 the mean
/// is ~7.5·ln N ≈ 100 (median tens), the "median follower count ~30" of the issue.
pub(super) const GRAPH_EXPONENT: f64 = 0.5;
/// Every user also follows an inbox subject of its own, `user × INBOX_FACTOR` (above
/// every user id), which nobody else follows: a publish to it reaches exactly that
/// user's connection, as unicast should (a publish to the user itself also reaches its
/// ~30 friends). msggen writes it through its path template (`/pub/%d0000000`).
pub(super) const INBOX_FACTOR: u64 = 10_000_000;
pub(super) const INBOX_PATH: &str = "/pub/%d0000000";

/// The store c1m's server reads, and what building it took.
pub(super) struct Graph {
    /// The SQLite file holding both the friendships and the inboxes.
    pub db: PathBuf,
    pub gen_s: f64,
    pub load_s: f64,
    /// Friendships generated...
    pub pairs: u64,
    /// ...and the subscriptions they became (two per friendship).
    pub edges: u64,
    pub inbox_edges: u64,
}

/// Generates the graph of `n` users in `dir`, loads it and the inboxes into
/// `dir/friends.db` (replacing an earlier run's), and removes the text files.
pub(super) fn build(n: u64, dir: &Path, live: &Live) -> anyhow::Result<Graph> {
    anyhow::ensure!(
        n < INBOX_FACTOR,
        "c1m: at most {} connections",
        INBOX_FACTOR - 1
    );
    let graph = dir.join("friends.txt");
    let db = dir.join("friends.db");
    for stale in [
        &db,
        &dir.join("friends.db-wal"),
        &dir.join("friends.db-shm"),
    ] {
        let _ = std::fs::remove_file(stale);
    }
    let t = Instant::now();
    load::friends::gen(GenArgs {
        users: n.max(u64::from(GRAPH_M) + 1),
        m: GRAPH_M,
        seed: 1,
        out: graph.clone(),
    })?;
    let gen_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let loaded = load_into(&db, &graph, false)?;
    let load_s = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&graph);

    let inbox = dir.join("inbox.txt");
    {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&inbox)?);
        for user in 1..=n {
            writeln!(w, "{user} {}", user * INBOX_FACTOR)?;
        }
        w.flush()?;
    }
    let inboxes = load_into(&db, &inbox, true)?;
    let _ = std::fs::remove_file(&inbox);
    live.emit(format!(
        "graph: {} friendships generated in {gen_s:.1} s, {} subscriptions loaded in {load_s:.1} s",
        count(loaded.pairs as f64),
        count(loaded.edges_new as f64)
    ));
    Ok(Graph {
        db,
        gen_s,
        load_s,
        pairs: loaded.pairs,
        edges: loaded.edges_new,
        inbox_edges: inboxes.edges_new,
    })
}

fn load_into(db: &Path, file: &Path, directed: bool) -> anyhow::Result<LoadSummary> {
    load::friends::load_with_summary(LoadArgs {
        file: file.to_path_buf(),
        store: format!("sqlite:{}", db.display()),
        directed,
        on_bad_line: BadLinePolicy::Reject,
    })
}
