//! `myriad fleet` (SPEC G4): drive many drones at once and watch them in a top-like
//! table that refreshes every second, with totals. Commands given as flags (`--set-url`,
//! `--set-n`, `--restart`, ...) go to every drone first. Not here: the drone itself
//! (`drone`), or discovery — drones are listed with `--drone ADDR`.

use crate::drone::send;
use anyhow::bail;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Flags of `myriad fleet`.
#[derive(clap::Args, Clone, Debug)]
pub struct FleetArgs {
    /// A drone's control address (repeat for each drone).
    #[arg(long = "drone", value_name = "ADDR", required = true)]
    pub drones: Vec<String>,
    /// Set the target URL(s) of every drone.
    #[arg(long)]
    pub set_url: Vec<String>,
    /// Set the connection count of every drone (with --split: of all drones together).
    #[arg(long)]
    pub set_n: Option<u64>,
    /// Divide --set-n evenly over the drones.
    #[arg(long)]
    pub split: bool,
    /// Set the connect rate of every drone.
    #[arg(long)]
    pub set_rate: Option<f64>,
    /// Set the transport of every drone (stream, sse, ws, poll).
    #[arg(long)]
    pub set_transport: Option<String>,
    /// (Re)start every drone's flood after the settings.
    #[arg(long)]
    pub restart: bool,
    /// Stop every drone's flood.
    #[arg(long)]
    pub stop: bool,
    /// End every drone.
    #[arg(long)]
    pub quit: bool,
    /// Print the table once and exit.
    #[arg(long)]
    pub once: bool,
    /// Watch for at most this many seconds.
    #[arg(long, default_value_t = 600.0)]
    pub duration: f64,
}

/// The commands the flags ask for, per drone index.
fn commands(args: &FleetArgs, i: usize) -> Vec<String> {
    let mut out = Vec::new();
    if !args.set_url.is_empty() {
        out.push(format!("set url {}", args.set_url.join(" ")));
    }
    if let Some(n) = args.set_n {
        let k = args.drones.len() as u64;
        let n = if args.split {
            n / k + u64::from((i as u64) < n % k)
        } else {
            n
        };
        out.push(format!("set n {n}"));
    }
    if let Some(r) = args.set_rate {
        out.push(format!("set rate {r}"));
    }
    if let Some(t) = &args.set_transport {
        out.push(format!("set transport {t}"));
    }
    if args.stop {
        out.push("stop".into());
    }
    if args.restart {
        out.push("restart".into());
    }
    if args.quit {
        out.push("quit".into());
    }
    out
}

/// `myriad fleet`.
pub fn run(args: FleetArgs) -> anyhow::Result<()> {
    host::sys::catch_interrupt();
    let mut failed = 0;
    for (i, d) in args.drones.iter().enumerate() {
        for c in commands(&args, i) {
            match send(d, &c) {
                Ok(v) if v["ok"] == true => {}
                Ok(v) => {
                    failed += 1;
                    eprintln!("fleet: {d}: {c}: {}", v["error"]);
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("fleet: {d}: {c}: {e:#}");
                }
            }
        }
    }
    if args.quit {
        return if failed > 0 {
            bail!("{failed} command(s) failed")
        } else {
            Ok(())
        };
    }
    let tty = std::io::stdout().is_terminal();
    let end = Instant::now() + Duration::from_secs_f64(args.duration.max(0.0));
    loop {
        let statuses: Vec<(String, Result<Value, String>)> = args
            .drones
            .iter()
            .map(|d| (d.clone(), send(d, "status").map_err(|e| format!("{e:#}"))))
            .collect();
        let table = render(&statuses);
        let mut out = std::io::stdout().lock();
        if tty && !args.once {
            write!(out, "\x1b[H\x1b[2J")?;
        }
        write!(out, "{table}")?;
        out.flush()?;
        if args.once || Instant::now() >= end || host::sys::interrupted() {
            break;
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    if failed > 0 {
        bail!("{failed} command(s) failed");
    }
    Ok(())
}

/// The status table: one row per drone and a totals row.
pub fn render(statuses: &[(String, Result<Value, String>)]) -> String {
    let mut s = format!(
        "{:<22} {:<8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}  {}\n",
        "drone",
        "state",
        "target",
        "open",
        "failed",
        "closed",
        "msg/s",
        "p50 us",
        "p99 us",
        "rss MB",
        "url"
    );
    let mut tot = [0u64; 6];
    for (addr, st) in statuses {
        match st {
            Ok(v) => {
                let t = &v["tick"];
                let g = |k: &str| t[k].as_u64().unwrap_or(0);
                // A running drone shows what it runs; an idle one what it will run next.
                let running = v["state"] == "running";
                let (n_key, url_key) = if running {
                    ("active_n", "active_urls")
                } else {
                    ("n", "urls")
                };
                let row = [
                    v[n_key].as_u64().unwrap_or(0),
                    g("open"),
                    g("failed"),
                    g("closed"),
                    g("messages"),
                    g("rss_bytes"),
                ];
                for (a, b) in tot.iter_mut().zip(row) {
                    *a += b;
                }
                let url = v[url_key]
                    .as_array()
                    .and_then(|u| u.first())
                    .and_then(|u| u.as_str())
                    .unwrap_or("-");
                let note = v["error"]
                    .as_str()
                    .map(|e| format!("  ({e})"))
                    .unwrap_or_default();
                s += &format!(
                    "{:<22} {:<8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}  {url}{note}\n",
                    addr,
                    v["state"].as_str().unwrap_or("?"),
                    row[0],
                    row[1],
                    row[2],
                    row[3],
                    row[4],
                    g("lat_p50_us"),
                    g("lat_p99_us"),
                    row[5] >> 20
                );
            }
            Err(e) => s += &format!("{addr:<22} {:<8} {e}\n", "down"),
        }
    }
    s += &format!(
        "{:<22} {:<8} {:>9} {:>9} {:>8} {:>8} {:>9} {:>9} {:>9} {:>7}\n",
        "TOTAL",
        format!("{}", statuses.len()),
        tot[0],
        tot[1],
        tot[2],
        tot[3],
        tot[4],
        "",
        "",
        tot[5] >> 20
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_spreads_the_total() {
        let args = FleetArgs {
            drones: vec!["a".into(), "b".into(), "c".into()],
            set_url: vec![],
            set_n: Some(10),
            split: true,
            set_rate: None,
            set_transport: None,
            restart: true,
            stop: false,
            quit: false,
            once: true,
            duration: 1.0,
        };
        let ns: Vec<String> = (0..3).map(|i| commands(&args, i)[0].clone()).collect();
        assert_eq!(ns, ["set n 4", "set n 3", "set n 3"]);
        assert_eq!(commands(&args, 0)[1], "restart");
    }

    #[test]
    fn table_has_totals() {
        let v = serde_json::json!({"state":"running","n":9,"active_n":5,"active_urls":["http://x/%d"],"tick":{"open":3,"failed":1}});
        let t = render(&[
            ("a:1".into(), Ok(v.clone())),
            ("b:1".into(), Ok(v)),
            ("c:1".into(), Err("refused".into())),
        ]);
        let total = t.lines().find(|l| l.starts_with("TOTAL")).unwrap();
        let cols: Vec<&str> = total.split_whitespace().collect();
        assert_eq!(&cols[..5], &["TOTAL", "3", "10", "6", "2"]);
        assert!(t.contains("down"));
    }
}
