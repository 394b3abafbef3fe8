//! `myriad friends gen`: a Barabási–Albert graph (preferential attachment).
//!
//! Nodes `1..=m` start unconnected; node `m + 1` links to all of them; every later
//! node links to `m` distinct earlier nodes chosen with probability proportional
//! to their degree. Sampling a uniform slot of `ends` (every edge endpoint ever
//! written, so node k appears degree(k) times) is exactly that, in O(1). The result
//! has `m · (n − m)` edges, no self loops, no duplicates, and a degree pdf falling
//! as k^-3.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};

use super::rng::Rng;

/// Nodes between progress-bar updates.
const PROGRESS_EVERY: u64 = 1 << 14;
/// Output buffered before each write.
const WRITE_CHUNK: usize = 1 << 20;

/// Flags of `myriad friends gen`.
#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {
    /// Number of users; ids are 1..=N.
    #[arg(long, default_value_t = 1_000_000)]
    pub users: u64,
    /// Friendships added per new user (the Barabási–Albert m).
    #[arg(long, default_value_t = 15)]
    pub m: u32,
    /// Random seed: the same seed gives the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file (`-` for stdout), one `A B` friendship per line.
    #[arg(long)]
    pub out: PathBuf,
}

/// Generates the graph, calling `emit(new_node, earlier_node)` per edge and
/// `progress(nodes_done)` now and then. Ids are `1..=users`.
pub fn barabasi_albert(
    users: u32,
    m: u32,
    seed: u64,
    mut emit: impl FnMut(u32, u32),
    mut progress: impl FnMut(u64),
) {
    assert!(m >= 1 && users > m, "need users > m >= 1");
    let mut rng = Rng::new(seed);
    let edges = u64::from(m) * u64::from(users - m);
    let mut ends: Vec<u32> = Vec::with_capacity(2 * edges as usize);
    let hub = m + 1;
    for v in 1..=m {
        emit(hub, v);
        ends.push(v);
        ends.push(hub);
    }
    let mut chosen: Vec<u32> = Vec::with_capacity(m as usize);
    for v in hub + 1..=users {
        chosen.clear();
        while chosen.len() < m as usize {
            let t = ends[rng.below(ends.len() as u64) as usize];
            // m is small (15): a linear scan beats any set.
            if !chosen.contains(&t) {
                chosen.push(t);
            }
        }
        for &t in &chosen {
            emit(v, t);
            ends.push(t);
            ends.push(v);
        }
        if u64::from(v) & (PROGRESS_EVERY - 1) == 0 {
            progress(u64::from(v));
        }
    }
    progress(u64::from(users));
}

/// Appends the decimal form of `x` (the job of `itoa`, for one integer type).
fn push_decimal(buf: &mut Vec<u8>, mut x: u32) {
    let mut tmp = [0u8; 10];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// Runs `myriad friends gen`.
pub fn gen(args: GenArgs) -> anyhow::Result<()> {
    let users = u32::try_from(args.users).context("--users must fit in 32 bits")?;
    if args.m == 0 || users <= args.m {
        bail!(
            "need --users > --m >= 1 (got users {} m {})",
            args.users,
            args.m
        );
    }
    let started = Instant::now();
    let mut out: Box<dyn Write> = if args.out.as_os_str() == "-" {
        Box::new(std::io::stdout().lock())
    } else {
        Box::new(
            std::fs::File::create(&args.out)
                .with_context(|| format!("create {}", args.out.display()))?,
        )
    };
    let bar = indicatif::ProgressBar::new(args.users);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:40}] {pos}/{len} users ({per_sec}, eta {eta})",
        )
        .context("progress template")?
        .progress_chars("=> "),
    );
    let mut buf: Vec<u8> = Vec::with_capacity(WRITE_CHUNK + 32);
    let mut io_error: Option<std::io::Error> = None;
    let mut edges = 0u64;
    barabasi_albert(
        users,
        args.m,
        args.seed,
        |a, b| {
            push_decimal(&mut buf, a);
            buf.push(b' ');
            push_decimal(&mut buf, b);
            buf.push(b'\n');
            edges += 1;
            if buf.len() >= WRITE_CHUNK && io_error.is_none() {
                if let Err(e) = out.write_all(&buf) {
                    io_error = Some(e);
                }
                buf.clear();
            }
        },
        |n| bar.set_position(n),
    );
    if let Some(e) = io_error {
        return Err(e).with_context(|| format!("write {}", args.out.display()));
    }
    out.write_all(&buf)
        .and_then(|_| out.flush())
        .with_context(|| format!("write {}", args.out.display()))?;
    bar.finish();
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "friends gen: {} users, m={}, seed={}: {edges} friendships in {secs:.2} s ({:.1} M/s) -> {}",
        args.users,
        args.m,
        args.seed,
        edges as f64 / secs / 1e6,
        args.out.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn degrees(users: u32, m: u32, seed: u64) -> (Vec<u64>, Vec<(u32, u32)>) {
        let mut deg = vec![0u64; users as usize + 1];
        let mut edges = Vec::new();
        barabasi_albert(users, m, seed, |a, b| edges.push((a, b)), |_| {});
        for &(a, b) in &edges {
            deg[a as usize] += 1;
            deg[b as usize] += 1;
        }
        (deg, edges)
    }

    #[test]
    fn decimal_formatting() {
        let mut b = Vec::new();
        for x in [0, 7, 10, 4_294_967_295] {
            push_decimal(&mut b, x);
            b.push(b',');
        }
        assert_eq!(b, b"0,7,10,4294967295,");
    }

    #[test]
    fn no_self_loops_no_duplicates_ids_in_range_exact_count() {
        let (users, m) = (5000, 4);
        let (_, edges) = degrees(users, m, 3);
        assert_eq!(edges.len() as u64, u64::from(m) * u64::from(users - m));
        let mut seen = std::collections::HashSet::new();
        for &(a, b) in &edges {
            assert_ne!(a, b, "self loop");
            assert!((1..=users).contains(&a) && (1..=users).contains(&b));
            assert!(
                seen.insert((a.min(b), a.max(b))),
                "duplicate friendship {a} {b}"
            );
        }
    }

    #[test]
    fn degree_distribution_is_heavy_tailed_with_slope_near_minus_three() {
        let (users, m) = (200_000u32, 3u32);
        let (deg, _) = degrees(users, m, 42);
        let deg = &deg[1..];
        let mean = deg.iter().sum::<u64>() as f64 / deg.len() as f64;
        let max = *deg.iter().max().expect("non-empty") as f64;
        assert!(
            (mean - 2.0 * f64::from(m)).abs() < 0.1,
            "mean degree {mean}"
        );
        assert!(
            max > 50.0 * mean,
            "max degree {max} not far above mean {mean}"
        );
        // Least-squares slope of log CCDF vs log k over k in [m, 100]: the CCDF of a
        // k^-3 pdf falls as k^-2, so the pdf slope is the CCDF slope minus one.
        let mut hist = vec![0u64; max as usize + 2];
        deg.iter().for_each(|&d| hist[d as usize] += 1);
        let mut tail = deg.len() as u64;
        let mut pts = Vec::new();
        for (k, &h) in hist.iter().enumerate() {
            if k as u32 >= m && k <= 100 {
                pts.push(((k as f64).ln(), (tail as f64 / deg.len() as f64).ln()));
            }
            tail -= h;
        }
        let n = pts.len() as f64;
        let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), p| (a + p.0, b + p.1));
        let (mx, my) = (sx / n, sy / n);
        let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum::<f64>()
            / pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
        let pdf_slope = slope - 1.0;
        eprintln!("mean {mean:.2} max {max} pdf slope {pdf_slope:.3}");
        assert!(
            (-3.5..=-2.5).contains(&pdf_slope),
            "pdf log-log slope {pdf_slope}"
        );
    }

    #[test]
    fn same_seed_same_file_other_seed_other_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        let run = |name: &str, seed: u64| {
            let out = dir.path().join(name);
            gen(GenArgs {
                users: 3000,
                m: 5,
                seed,
                out: out.clone(),
            })
            .expect("gen");
            std::fs::read(out).expect("read back")
        };
        let (a, b, c) = (run("a", 9), run("b", 9), run("c", 10));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let text = String::from_utf8(a).expect("ascii");
        assert_eq!(text.lines().count(), 5 * (3000 - 5));
        assert!(text.lines().all(|l| l.split(' ').count() == 2));
    }

    #[test]
    fn rejects_bad_parameters() {
        let out = PathBuf::from("/nonexistent/never-written");
        assert!(gen(GenArgs {
            users: 5,
            m: 5,
            seed: 1,
            out: out.clone()
        })
        .is_err());
        assert!(gen(GenArgs {
            users: 5,
            m: 0,
            seed: 1,
            out
        })
        .is_err());
    }
}
