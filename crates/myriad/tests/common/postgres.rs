//! The real PostgreSQL on 127.0.0.1:5432 (trust auth, database `test`): a check
//! that says what to start, psql, and a schema per test dropped after it.

use std::process::{Command, Stdio};

/// The test database, with no schema.
pub const BASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

/// Fails with what to start when PostgreSQL is not on 127.0.0.1:5432.
pub fn need_postgres() {
    if std::net::TcpStream::connect("127.0.0.1:5432").is_err() {
        panic!("this test needs PostgreSQL on 127.0.0.1:5432 (trust auth, database test); start it with: pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start");
    }
}

/// psql on the test database, running `sql` and stopping at its first error;
/// rows come out unaligned, without headers.
fn psql_command(sql: &str) -> Command {
    let mut cmd = Command::new("psql");
    cmd.args(["-h", "127.0.0.1", "-U", "postgres", "-d", "test"])
        .args(["-v", "ON_ERROR_STOP=1", "-tAqc", sql]);
    cmd
}

/// Runs `sql` in the test database (fails the test when psql does): its output,
/// trimmed.
pub fn psql(sql: &str) -> String {
    let out = psql_command(sql)
        .output()
        .expect("psql runs (Debian's postgresql-client)");
    assert!(out.status.success(), "psql failed on {sql}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A PostgreSQL schema of this test's own, dropped at the end (also on failure).
pub struct PgSchema(pub String);

impl PgSchema {
    pub fn new(test: &str) -> PgSchema {
        need_postgres();
        PgSchema(format!("myriad_{test}_{}", std::process::id()))
    }

    pub fn url(&self) -> String {
        format!("{BASE_URL}?schema={}", self.0)
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0);
        let _ = psql_command(&drop)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
