//! `myriad friends load`: an `A B` edge list into the subscription store.
//!
//! The file is parsed completely before the store is touched, so `--on-bad-line
//! reject` leaves the store unchanged; every bad line is reported with its number
//! (the first [`MAX_REPORTED`] in full, then a count), never dropped silently.
//! Blank lines and `#` comments are not edges and not errors.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};

/// Bad lines printed in full; the rest are counted.
pub const MAX_REPORTED: u64 = 20;
/// Read buffer for the edge list.
const READ_BUFFER: usize = 1 << 20;

/// What to do with a line that is not `A B` with two u64 ids.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum BadLinePolicy {
    /// Report it and go on.
    Skip,
    /// Report it and load nothing.
    Reject,
}

/// Flags of `myriad friends load`.
#[derive(clap::Args, Debug, Clone)]
pub struct LoadArgs {
    /// Edge list, one `A B` per line (igraph `write_edgelist`); `#` comments and blank lines are ignored.
    pub file: PathBuf,
    /// Subscription store: `sqlite:PATH`, `postgres://...` or `memory`.
    #[arg(long, env = "MYRIAD_STORE", default_value = "sqlite:myriad.db")]
    pub store: String,
    /// Each line is a one-way follow (A follows B) instead of a mutual friendship.
    #[arg(long)]
    pub directed: bool,
    /// What to do with a malformed line: skip it (reported) or reject the file.
    #[arg(long, value_enum, default_value_t = BadLinePolicy::Skip)]
    pub on_bad_line: BadLinePolicy,
}

/// What a load did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadSummary {
    /// Lines read, including blank, comment and bad ones.
    pub lines: u64,
    pub bad_lines: u64,
    /// Valid `A B` lines.
    pub pairs: u64,
    /// Directed edges handed to the store (two per pair unless `--directed`).
    pub edges_offered: u64,
    /// Edges the store did not hold before.
    pub edges_new: u64,
    /// Edges in the store afterwards.
    pub store_edges: u64,
}

/// Parses one line: `Ok(None)` for blank or comment, `Err(reason)` if malformed.
pub fn parse_edge_line(line: &[u8]) -> Result<Option<(u64, u64)>, &'static str> {
    let line = line.trim_ascii();
    if line.is_empty() || line[0] == b'#' {
        return Ok(None);
    }
    let mut fields = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let a = fields.next().ok_or("empty line")?;
    let b = fields.next().ok_or("one id, expected two")?;
    if fields.next().is_some() {
        return Err("more than two fields");
    }
    Ok(Some((parse_id(a)?, parse_id(b)?)))
}

fn parse_id(field: &[u8]) -> Result<u64, &'static str> {
    let mut x: u64 = 0;
    for &c in field {
        if !c.is_ascii_digit() {
            return Err("not an unsigned integer id");
        }
        x = x
            .checked_mul(10)
            .and_then(|x| x.checked_add(u64::from(c - b'0')))
            .ok_or("id above 2^64-1")?;
    }
    Ok(x)
}

fn bar(len: u64, template: &str) -> anyhow::Result<indicatif::ProgressBar> {
    let bar = indicatif::ProgressBar::new(len);
    bar.set_style(
        indicatif::ProgressStyle::with_template(template)
            .context("progress template")?
            .progress_chars("=> "),
    );
    Ok(bar)
}

/// Runs `myriad friends load` (the summary goes to stderr).
pub fn load(args: LoadArgs) -> anyhow::Result<()> {
    load_with_summary(args).map(|_| ())
}

/// [`load`], returning what it did.
pub fn load_with_summary(args: LoadArgs) -> anyhow::Result<LoadSummary> {
    let started = Instant::now();
    let mut store =
        store::open(&args.store).with_context(|| format!("open store {}", args.store))?;
    let file =
        std::fs::File::open(&args.file).with_context(|| format!("open {}", args.file.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let mut reader = std::io::BufReader::with_capacity(READ_BUFFER, file);

    let reading = bar(
        size,
        "reading {elapsed_precise} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec})",
    )?;
    let mut pairs: Vec<(u64, u64)> = Vec::with_capacity((size / 14) as usize);
    let (mut lines, mut bad, mut read) = (0u64, 0u64, 0u64);
    let mut line = Vec::with_capacity(128);
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .with_context(|| format!("read {}", args.file.display()))?;
        if n == 0 {
            break;
        }
        lines += 1;
        read += n as u64;
        if lines & 0xffff == 0 {
            reading.set_position(read);
        }
        match parse_edge_line(&line) {
            Ok(Some(pair)) => pairs.push(pair),
            Ok(None) => {}
            Err(reason) => {
                bad += 1;
                let shown = String::from_utf8_lossy(&line[..line.len().min(80)]);
                let shown = shown.trim_end();
                if args.on_bad_line == BadLinePolicy::Reject {
                    reading.abandon();
                    bail!(
                        "{}:{lines}: {reason}: {shown:?}; nothing loaded (--on-bad-line reject)",
                        args.file.display()
                    );
                }
                if bad <= MAX_REPORTED {
                    reading.suspend(|| {
                        eprintln!(
                            "{}:{lines}: {reason}: {shown:?} (skipped)",
                            args.file.display()
                        )
                    });
                }
            }
        }
    }
    reading.finish();
    if bad > MAX_REPORTED {
        eprintln!(
            "{}: {} more bad lines skipped",
            args.file.display(),
            bad - MAX_REPORTED
        );
    }

    tracing::info!(
        lines,
        bad,
        read_s = started.elapsed().as_secs_f64(),
        "edge list parsed"
    );
    let per_pair = if args.directed { 1 } else { 2 };
    let offered = pairs.len() as u64 * per_pair;
    let storing = bar(
        offered,
        "storing {elapsed_precise} [{bar:40}] {pos}/{len} edges ({per_sec})",
    )?;
    let directed = args.directed;
    // (subscriber, subject): A follows B; a friendship also has B follow A.
    let mut edges = pairs
        .iter()
        .flat_map(|&(a, b)| [Some((a, b)), (!directed).then_some((b, a))])
        .flatten();
    let new = store
        .bulk_load(&mut edges, &|n| {
            storing.set_position(n);
            if n == offered {
                storing.set_message("writing");
            }
        })
        .with_context(|| format!("load into {}", args.store))?;
    storing.finish();
    let summary = LoadSummary {
        lines,
        bad_lines: bad,
        pairs: pairs.len() as u64,
        edges_offered: offered,
        edges_new: new,
        store_edges: store.edge_count()?,
    };
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "friends load: {} lines, {} bad ({}), {} {}, {} directed edges offered, {} new, store now holds {} edges; {secs:.2} s ({:.2} M edges/s) into {}",
        summary.lines,
        summary.bad_lines,
        if args.on_bad_line == BadLinePolicy::Skip { "skipped" } else { "rejected" },
        summary.pairs,
        if directed { "follows" } else { "friendships" },
        summary.edges_offered,
        summary.edges_new,
        summary.store_edges,
        summary.edges_offered as f64 / secs / 1e6,
        args.store,
    );
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lines_and_names_the_problem() {
        assert_eq!(parse_edge_line(b"1 2\n"), Ok(Some((1, 2))));
        assert_eq!(parse_edge_line(b"  7\t9 \r\n"), Ok(Some((7, 9))));
        assert_eq!(parse_edge_line(b"\n"), Ok(None));
        assert_eq!(parse_edge_line(b"# comment"), Ok(None));
        assert_eq!(
            parse_edge_line(b"18446744073709551615 0"),
            Ok(Some((u64::MAX, 0)))
        );
        assert!(parse_edge_line(b"18446744073709551616 0").is_err());
        assert!(parse_edge_line(b"1").is_err());
        assert!(parse_edge_line(b"1 2 3").is_err());
        assert!(parse_edge_line(b"a b").is_err());
        assert!(parse_edge_line(b"-1 2").is_err());
    }

    fn write(dir: &std::path::Path, text: &str) -> PathBuf {
        let p = dir.join("edges.txt");
        std::fs::write(&p, text).expect("write edge list");
        p
    }

    const FILE: &str = "1 2\n2 3\n# a comment\n\n1 2\nbad line here\n3 1\n4\n5 5\n";

    #[test]
    fn mutual_load_skips_bad_lines_with_exact_counts() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = write(dir.path(), FILE);
        let url = format!("sqlite:{}", dir.path().join("s.db").display());
        let s = load_with_summary(LoadArgs {
            file,
            store: url.clone(),
            directed: false,
            on_bad_line: BadLinePolicy::Skip,
        })
        .expect("load");
        // 5 valid pairs (1-2 twice, 2-3, 3-1, 5-5) -> 10 offered; distinct directed
        // edges: 1→2 2→1 2→3 3→2 3→1 1→3 5→5 = 7.
        assert_eq!(
            s,
            LoadSummary {
                lines: 9,
                bad_lines: 2,
                pairs: 5,
                edges_offered: 10,
                edges_new: 7,
                store_edges: 7
            }
        );
        let mut st = store::open(&url).expect("reopen");
        assert_eq!(st.subscribers(1).expect("query"), vec![2, 3]);
        assert_eq!(st.subscriptions(1).expect("query"), vec![2, 3]);
        assert_eq!(st.subscribers(5).expect("query"), vec![5]);
    }

    #[test]
    fn directed_load_adds_one_way_follows() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = write(dir.path(), FILE);
        let url = format!("sqlite:{}", dir.path().join("d.db").display());
        let s = load_with_summary(LoadArgs {
            file,
            store: url.clone(),
            directed: true,
            on_bad_line: BadLinePolicy::Skip,
        })
        .expect("load");
        assert_eq!((s.edges_offered, s.edges_new, s.store_edges), (5, 4, 4));
        let mut st = store::open(&url).expect("reopen");
        // "1 2": 1 follows 2, so 1 is a subscriber of 2.
        assert_eq!(st.subscribers(2).expect("query"), vec![1]);
        assert_eq!(st.subscribers(1).expect("query"), vec![3]);
    }

    #[test]
    fn reject_names_the_line_and_loads_nothing() {
        let dir = tempfile::tempdir().expect("temp dir");
        let file = write(dir.path(), FILE);
        let url = format!("sqlite:{}", dir.path().join("r.db").display());
        let err = load_with_summary(LoadArgs {
            file,
            store: url.clone(),
            directed: false,
            on_bad_line: BadLinePolicy::Reject,
        })
        .expect_err("a bad line must reject");
        assert!(format!("{err:#}").contains(":6: "), "{err:#}");
        assert_eq!(
            store::open(&url)
                .expect("reopen")
                .edge_count()
                .expect("count"),
            0
        );
    }
}
