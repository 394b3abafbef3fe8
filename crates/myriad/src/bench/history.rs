//! `bench --durable-history[=sqlite|postgres|jetstream]`: the servers a scenario
//! starts keep history durably, each from empty storage (history restored from an
//! earlier run would change what is measured), so the same scenario measures what
//! each history store costs per publish.

use std::path::Path;

/// Where a benchmarked server keeps history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DurableHistory {
    /// `--history-store store` on a fresh SQLite file next to the server's CSV.
    Sqlite,
    /// `--history-store store` with `--store` = `--bench-postgres` (its `history`
    /// table dropped first).
    Postgres,
    /// `--history-store jetstream` on `--bench-nats` (the stream deleted first).
    Jetstream,
}

/// `(store URL, extra serve flags)` for a server writing `csv`, storage emptied.
pub fn server_store(
    which: Option<DurableHistory>,
    csv: &Path,
    postgres: &str,
    nats: &str,
) -> anyhow::Result<(String, Vec<String>)> {
    let store_flags = || vec!["--history-store".to_string(), "store".to_string()];
    Ok(match which {
        None => ("memory".into(), Vec::new()),
        Some(DurableHistory::Sqlite) => {
            let db = csv.with_extension("db");
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(format!("{}{suffix}", db.display()));
            }
            (format!("sqlite:{}", db.display()), store_flags())
        }
        Some(DurableHistory::Postgres) => {
            store::postgres::PgHistory::drop_table(postgres)?;
            (postgres.to_string(), store_flags())
        }
        Some(DurableHistory::Jetstream) => {
            let config = cluster::NatsConfig::from_flags(nats, &Default::default())?;
            cluster::jet_history::JetHistory::delete(&config)?;
            let flags = ["--history-store", "jetstream", "--nats", nats];
            (
                "memory".into(),
                flags.iter().map(|s| s.to_string()).collect(),
            )
        }
    })
}

impl std::fmt::Display for DurableHistory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DurableHistory::Sqlite => "sqlite",
            DurableHistory::Postgres => "postgres",
            DurableHistory::Jetstream => "jetstream",
        })
    }
}
