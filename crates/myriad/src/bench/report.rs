//! A scenario's Markdown report: the figure | measured | target | met? table, the exact
//! command line, machine facts and kernel settings, the shared-cores caveat, notes,
//! plots (rendered by `viewer::plot` from the scenario's CSVs) and the live view.
//! `write_index` puts the tables of an `all` run into one summary.

use super::context::{machine_facts, Ctx};
use super::{name, Scenario};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The caveat every report carries.
pub const CAVEAT: &str = "Client (flood, msggen) and server run on the same machine and share \
its cores: every figure includes the load generator's own cost, and other work on the \
machine (builds, other engineers' tests) adds noise.";

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    pub figure: String,
    pub measured: String,
    pub target: String,
    /// "yes", "no", or "—" (no target: a fact to report).
    pub met: String,
}

/// One scenario's report.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub scenario: String,
    pub title: String,
    pub dir: PathBuf,
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
    /// CSVs to plot and link.
    pub csvs: Vec<PathBuf>,
    /// The live lines printed during the run.
    pub live: Vec<String>,
    /// Extra sections (title, Markdown body).
    pub sections: Vec<(String, String)>,
}

/// "yes" / "no" from a comparison.
pub fn met(ok: bool) -> String {
    if ok { "yes" } else { "no" }.to_string()
}

/// The SPEC's idle-memory target, shared by every scenario that measures it.
pub const MEMORY_TARGET: &str = "≤ 100 B (first milestone ≤ 256 B)";

/// Verdict for user-space bytes per idle connection against [`MEMORY_TARGET`].
pub fn memory_verdict(user_bytes: f64) -> String {
    if user_bytes <= 100.0 {
        met(true)
    } else if user_bytes <= 256.0 {
        "milestone only".into()
    } else {
        met(false)
    }
}

impl Report {
    pub fn new(scenario: &str, title: &str, dir: &Path) -> Report {
        Report {
            scenario: scenario.to_string(),
            title: title.to_string(),
            dir: dir.to_path_buf(),
            ..Default::default()
        }
    }

    pub fn row(&mut self, figure: &str, measured: String, target: &str, met: String) {
        self.rows.push(Row {
            figure: figure.to_string(),
            measured,
            target: target.to_string(),
            met,
        });
    }

    /// A row with no target.
    pub fn fact(&mut self, figure: &str, measured: String) {
        self.row(figure, measured, "—", "—".into());
    }

    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }

    /// The table in Markdown.
    pub fn table(&self) -> String {
        let mut t = String::from("| figure | measured | target | met? |\n|---|---|---|---|\n");
        for r in &self.rows {
            let _ = writeln!(
                t,
                "| {} | {} | {} | {} |",
                r.figure, r.measured, r.target, r.met
            );
        }
        t
    }

    /// The table for the terminal.
    pub fn table_text(&self) -> String {
        let mut t = format!("== {} ==\n", self.title);
        for r in &self.rows {
            let _ = writeln!(
                t,
                "{:<58} {:<34} target {:<28} {}",
                r.figure, r.measured, r.target, r.met
            );
        }
        t
    }

    /// Renders the plots and writes DIR/<scenario>/report.md; returns its path.
    pub fn write(&self, ctx: &Ctx) -> anyhow::Result<PathBuf> {
        let csvs: Vec<PathBuf> = self
            .csvs
            .iter()
            .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 0))
            .cloned()
            .collect();
        let plots = if csvs.is_empty() {
            Err(anyhow::anyhow!("no CSV"))
        } else {
            viewer::plot::render(&viewer::plot::PlotArgs {
                files: csvs.clone(),
                out: self.dir.clone(),
                window: 10,
                font: None,
            })
        };
        let mut md = format!("# myriad bench {}: {}\n\n", self.scenario, self.title);
        let _ = writeln!(md, "Command: `{}`\n", ctx.command);
        let _ = writeln!(md, "Finished {}.\n", utc_now());
        md.push_str(&self.table());
        md.push('\n');
        let _ = writeln!(md, "> {CAVEAT}\n");
        if !self.notes.is_empty() {
            md.push_str("## Notes\n\n");
            for n in &self.notes {
                let _ = writeln!(md, "- {n}");
            }
            md.push('\n');
        }
        for (title, body) in &self.sections {
            let _ = writeln!(md, "## {title}\n\n{body}\n");
        }
        md.push_str("## Machine\n\n");
        for f in machine_facts() {
            let _ = writeln!(md, "- {f}");
        }
        for s in &ctx.sysctls {
            let _ = writeln!(md, "- {s}");
        }
        md.push_str("\n## Plots and data\n\n");
        match plots {
            Ok(files) => {
                for f in files {
                    let file = f
                        .file_name()
                        .map_or(String::new(), |n| n.to_string_lossy().into());
                    let _ = writeln!(md, "![{file}]({file})\n");
                }
            }
            Err(e) => {
                let _ = writeln!(md, "No plots: {e:#}\n");
            }
        }
        for c in &csvs {
            let _ = writeln!(md, "- CSV: `{}`", c.display());
        }
        if !self.live.is_empty() {
            let _ = writeln!(md, "\n## Live view\n\n```\n{}\n```", self.live.join("\n"));
        }
        let path = self.dir.join("report.md");
        std::fs::write(&path, md)?;
        Ok(path)
    }
}

/// DIR/report.md for `all`: every scenario's table, with links.
pub fn write_index(
    ctx: &Ctx,
    done: &[(Scenario, Report)],
    failures: &[String],
) -> anyhow::Result<PathBuf> {
    let mut md = String::from("# myriad bench all\n\n");
    let _ = writeln!(
        md,
        "Command: `{}`\n\nFinished {}.\n\n> {CAVEAT}\n",
        ctx.command,
        utc_now()
    );
    md.push_str("## The SPEC's performance table\n\n");
    md.push_str(&spec_table(done));
    md.push('\n');
    for (s, r) in done {
        let _ = writeln!(
            md,
            "## {}: {}\n\n[report]({}/report.md)\n\n{}",
            name(*s),
            r.title,
            name(*s),
            r.table()
        );
    }
    for f in failures {
        let _ = writeln!(md, "- FAILED: {f}");
    }
    md.push_str("\n## Machine\n\n");
    for f in machine_facts().iter().chain(&ctx.sysctls) {
        let _ = writeln!(md, "- {f}");
    }
    let path = ctx.out.join("report.md");
    std::fs::write(&path, md)?;
    Ok(path)
}

/// The SPEC's performance lines and the report rows (scenario, figure prefix) that
/// measure them, in the SPEC's order.
const SPEC_ROWS: &[(Scenario, &str)] = &[
    (Scenario::Idle, "user-space memory per idle connection"),
    (Scenario::Idle, "kernel memory per socket"),
    (Scenario::Idle, "connection accept rate"),
    (Scenario::Connect, "server accepts per second"),
    (Scenario::Broadcast, "broadcast: deliveries/s"),
    (Scenario::Broadcast, "broadcast latency p99"),
    (Scenario::Unicast, "unicast latency p99"),
    (Scenario::Unicast, "server CPU while publishing"),
    (Scenario::MassDisconnect, "mass disconnect of"),
    (Scenario::Idle, "memory "),
    (Scenario::MassDisconnect, "memory "),
    (Scenario::Keepalive, "time from the last response"),
];

/// The rows of [`SPEC_ROWS`] found in the reports (every transport's, for idle).
fn spec_table(done: &[(Scenario, Report)]) -> String {
    let mut t =
        String::from("| scenario | figure | measured | target | met? |\n|---|---|---|---|---|\n");
    for (scenario, prefix) in SPEC_ROWS {
        for (s, r) in done.iter().filter(|(s, _)| s == scenario) {
            for row in r.rows.iter().filter(|row| row.figure.starts_with(prefix)) {
                let _ = writeln!(
                    t,
                    "| {} | {} | {} | {} | {} |",
                    name(*s),
                    row.figure,
                    row.measured,
                    row.target,
                    row.met
                );
            }
        }
    }
    t
}

/// The time now as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// A unix time as `YYYY-MM-DD HH:MM:SS UTC` (Howard Hinnant's civil-from-days).
fn utc(secs: u64) -> String {
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Bytes as "12.3 KB" / "456 B" (decimal, as in the SPEC table).
pub fn bytes(b: f64) -> String {
    if b.abs() >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else if b.abs() >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b.abs() >= 1e4 {
        format!("{:.1} KB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// A count with thousands separators.
pub fn count(n: f64) -> String {
    let s = format!("{:.0}", n.abs());
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0.0 {
        format!("-{out}")
    } else {
        out
    }
}

/// Microseconds as milliseconds with two decimals.
pub fn ms(us: u64) -> String {
    format!("{:.2} ms", us as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_like_the_spec() {
        assert_eq!(count(600000.0), "600,000");
        assert_eq!(count(999.0), "999");
        assert_eq!(count(-1234.0), "-1,234");
        assert_eq!(bytes(33.0), "33 B");
        assert_eq!(bytes(12_200.0), "12.2 KB");
        assert_eq!(ms(1500), "1.50 ms");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_795_313_620), "2026-11-22 02:13:40 UTC");
    }

    #[test]
    fn table_has_one_line_per_row() {
        let mut r = Report::new("idle", "t", Path::new("/tmp"));
        r.row("a", "1 B".into(), "≤ 2 B", met(true));
        r.fact("b", "x".into());
        let t = r.table();
        assert_eq!(t.lines().count(), 4);
        assert!(t.contains("| a | 1 B | ≤ 2 B | yes |"));
        assert!(t.contains("| b | x | — | — |"));
    }
}
