//! `bench churn --churn-rooms`: the list of a 10,000-member channel timed while the
//! churn runs, asked every [`EVERY`] on two ports at once, each on a keep-alive
//! connection of its own ([`Listers`]): the API port (answered by an event loop,
//! behind its churn work) and the admin listener (its own thread, off the loops;
//! a supervisor's hands the ask to its router's, which is asked directly too).
//! Each answer is timed as the caller sees it and without the client's own
//! scheduling (the kernel's receive stamp, see `presence::Api`); the router role's
//! share (router lock wait and time under it, or a read of the channel's mirror) comes from the server's `/stats`.

use super::report::{count, met, Report};
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Pause between two asks of one lister.
const EVERY: Duration = Duration::from_millis(20);

/// One port's timings, µs, one per ask.
#[derive(Default)]
pub(super) struct Listed {
    /// From the request's write to the answer's last byte read by the client.
    client: Vec<u64>,
    /// From the request's write to the kernel's receive stamp of the last bytes.
    server: Vec<u64>,
    /// Why the asks stopped early (a server without the endpoint there).
    failed: Option<String>,
}

/// The listers, by port.
pub(super) struct Listers {
    threads: Vec<(&'static str, JoinHandle<anyhow::Result<Listed>>)>,
    api: SocketAddr,
}

impl Listers {
    /// Asks `/presence/<channel>` on the API port `api`, on the admin listener
    /// `admin` and, for a supervised server, on its router's admin listener `router`
    /// (the supervisor's hands each ask to it) until `deadline`.
    pub(super) fn start(
        api: SocketAddr,
        admin: Option<SocketAddr>,
        router: Option<SocketAddr>,
        channel: &str,
        deadline: Instant,
    ) -> Listers {
        let ports = [
            ("API port (event loop)", Some(api)),
            ("admin listener", admin),
            ("router's admin listener", router),
        ];
        let threads = ports
            .into_iter()
            .filter_map(|(via, addr)| {
                let (addr, path) = (addr?, format!("/presence/{channel}"));
                let t = std::thread::spawn(move || -> anyhow::Result<Listed> {
                    let mut api = super::presence::Api::connect(addr)?;
                    let mut listed = Listed::default();
                    while Instant::now() < deadline {
                        let t = Instant::now();
                        if let Err(e) = api.get(&path) {
                            listed.failed = Some(e.to_string());
                            break;
                        }
                        listed.client.push(t.elapsed().as_micros() as u64);
                        listed.server.push(api.last_server_us());
                        std::thread::sleep(EVERY);
                    }
                    Ok(listed)
                });
                Some((via, t))
            })
            .collect();
        Listers { threads, api }
    }

    /// Waits for the listers; their timings and the server's `presence_lists`.
    pub(super) fn finish(self) -> anyhow::Result<Lists> {
        let mut ports = Vec::new();
        for (via, t) in self.threads {
            let listed = t
                .join()
                .map_err(|_| anyhow::anyhow!("presence lister panicked"))??;
            ports.push((via, listed));
        }
        let mut api = super::presence::Api::connect(self.api)?;
        let stats: serde_json::Value = serde_json::from_slice(&api.get("/stats")?)?;
        let router = stats
            .pointer("/router/presence_lists")
            .or_else(|| stats.get("presence_lists"))
            .cloned();
        Ok(Lists { ports, router })
    }
}

/// What the listers measured.
pub(super) struct Lists {
    ports: Vec<(&'static str, Listed)>,
    /// The server's `presence_lists` counters at the end.
    router: Option<serde_json::Value>,
}

/// p50, p99 and max of `us` (sorted here), ms.
fn quantiles(us: &mut [u64]) -> (f64, f64, f64) {
    us.sort_unstable();
    let at = |i: usize| us[i.min(us.len() - 1)] as f64 / 1e3;
    (at(us.len() / 2), at(us.len() * 99 / 100), at(us.len() - 1))
}

/// The list's rows, one per port: the target judged on the time without the client.
pub(super) fn list_rows(report: &mut Report, lists: Lists, members: u64) {
    for (via, mut listed) in lists.ports {
        if let Some(why) = &listed.failed {
            let why = why.lines().next().unwrap_or_default().to_string();
            report.fact(&format!("lists on the {via} stopped"), why);
        }
        if listed.client.is_empty() {
            continue;
        }
        let asks = listed.client.len();
        let (c50, c99, cmax) = quantiles(&mut listed.client);
        let (s50, s99, smax) = quantiles(&mut listed.server);
        report.row(
            &format!(
                "GET /presence/<channel> of {} members during the churn on the {via}, p99 \
                 to the answer's last byte in the kernel ({asks} asks; p50 {s50:.2} ms, \
                 max {smax:.2} ms)",
                count(members as f64)
            ),
            format!("{s99:.2} ms"),
            "≤ 10 ms",
            met(s99 <= 10.0),
        );
        report.fact(
            &format!("the same on the {via} as the client read it, p50 / p99 / max"),
            format!("{c50:.2} / {c99:.2} / {cmax:.2} ms"),
        );
    }
    if let Some(r) = &lists.router {
        let get = |k: &str| r[k].as_u64().unwrap_or(0);
        let per = |sum: &str, n: u64| get(sum) as f64 / n.max(1) as f64 / 1e3;
        let ms = |k: &str| get(k) as f64 / 1e3;
        report.fact(
            "answers under the router lock: lock wait avg / max, held avg / max",
            format!(
                "{:.3} / {:.2} ms, {:.3} / {:.2} ms ({} answers)",
                per("lock_wait_us_sum", get("count")),
                ms("lock_wait_us_max"),
                per("held_us_sum", get("count")),
                ms("held_us_max"),
                get("count")
            ),
        );
        report.fact(
            "answers from the channel's mirror (no router lock): avg / max",
            format!(
                "{:.3} / {:.2} ms ({} answers)",
                per("mirror_us_sum", get("mirror_count")),
                ms("mirror_us_max"),
                get("mirror_count")
            ),
        );
    }
}
