//! The broadcast ladder: publish rates held for `--step-secs` each, judged per message
//! (a step passes only when every message reached every subscriber and the slowest of
//! all deliveries took at most 1 s), continued one step past the first miss so the
//! cliff shows in the plot. Each step's latency percentiles come from the merged
//! per-second histograms of exactly the deliveries of that step (`Held::take_hist`).
//!
//! Not here: starting servers or subscribers (see `broadcast`, `rooms`).

use super::held::{Held, Live, Probe};
use super::report::{count, met, ms};
use load::flood::stats::quantile;
use load::msggen::{MsggenArgs, MsggenSummary};
use std::fmt::Write as _;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A delivery slower than this makes a step miss (the SPEC's "within 1 s").
pub const STEP_MAX_LATENCY_US: u64 = 1_000_000;
/// Steps shorter than this are reported but do not count as a figure: a backlog that
/// grows a few percent per second does not show in 4 s.
pub const MIN_STEP_SECS: f64 = 10.0;
/// Publishing connections per 2 msg/s of rate when a publish reaches a whole
/// broadcast: each waits for its reply, and a reply may take as long as the fan-out to
/// every subscriber (hundreds of ms when slow).
const RATE_PER_PUBLISHER: f64 = 2.0;
/// Publishing connections at least, and at most for a broadcast.
const PUBLISHERS: (usize, usize) = (2, 48);
/// Share of the asked rate msggen must reach for a step to count.
pub const MIN_ACHIEVED: f64 = 0.9;
/// Longest wait after a step for its last deliveries (a missed step may be seconds behind).
const DRAIN_MAX: Duration = Duration::from_secs(20);
/// Header of the ladder CSV (`rate_msg_s` makes `myriad plot` draw it against the rate).
pub const CSV_HEADER: &str = "time_s,rate_msg_s,achieved_msg_s,sent,expected,received,deliveries_per_s,lat_p50_us,lat_p99_us,lat_p999_us,lat_max_us,server_cpu_pct,client_cpu_pct,ok";

/// One step's outcome.
#[derive(Clone, Debug, Default)]
pub struct Step {
    pub rate: f64,
    pub sent: MsggenSummary,
    pub expected: u64,
    pub received: u64,
    pub deliveries_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
    pub server_cpu: f64,
    pub client_cpu: f64,
    pub lost_connections: u64,
    pub ok: bool,
}

/// Where a ladder publishes, and what each publish delivers.
#[derive(Clone, Debug)]
pub struct Publish {
    pub addr: SocketAddr,
    /// msggen's path template: `%d` becomes a subject drawn uniformly from 1..=`subjects`.
    pub path: String,
    pub subjects: u64,
    /// Deliveries each publish makes: the subject's subscribers, a room's members.
    pub fanout: u64,
    /// Rate one publishing connection is asked for, messages/s, and the most of them:
    /// a publish waits for its reply, so at most 1/RTT each; at thousands of msg/s to
    /// small rooms 48 connections would cap the rate themselves on a loaded box.
    pub per_publisher: f64,
    pub max_publishers: usize,
    /// Publish as Pusher events through this app's HTTP API (`ID:KEY:SECRET`, msggen
    /// `--pusher`): `path` then names the channel.
    pub pusher: Option<String>,
}

impl Publish {
    /// Every publish to `subject`, which `fanout` connections receive.
    pub fn subject(addr: SocketAddr, subject: u64, fanout: u64) -> Publish {
        Publish {
            addr,
            path: format!("/pub/{subject}"),
            subjects: subject,
            fanout,
            per_publisher: RATE_PER_PUBLISHER,
            max_publishers: PUBLISHERS.1,
            pusher: None,
        }
    }
}

/// Runs the ladder over `rates` against the subscribers held by `held`, publishing
/// `size`-byte payloads as `to` says. Stops one step after the first miss; writes one
/// CSV row per step to `csv`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    held: &Held,
    probe: &Probe,
    live: &Live,
    to: &Publish,
    rates: &[f64],
    step_secs: f64,
    size: usize,
    csv: &Path,
) -> anyhow::Result<Vec<Step>> {
    let mut out = std::fs::File::create(csv)?;
    writeln!(out, "{CSV_HEADER}")?;
    let steps = climb(
        rates,
        |rate| {
            let before = held.messages();
            let open_before = held.open();
            held.take_hist();
            let (cpu0, client0) = (probe.cpu(), held.cpu_mark());
            let t = live.t0.elapsed().as_secs_f64();
            live.emit(format!("step: {rate} msg/s for {step_secs} s"));
            let sent = publish_to(to, rate, step_secs, size)?;
            let secs = sent.elapsed_s.max(1e-3);
            let server_cpu = (probe.cpu() - cpu0) / secs * 100.0;
            let client_cpu = held.client_cpu_since(client0);
            held.wait_quiet(DRAIN_MAX);
            let received = held.messages() - before;
            let h = held.take_hist();
            let q = |x: f64| quantile(&h, x);
            let expected = sent.sent * to.fanout;
            let lost = open_before.saturating_sub(held.open());
            let step = Step {
                rate,
                expected,
                received,
                deliveries_per_s: received as f64 / secs,
                p50_us: q(0.5),
                p99_us: q(0.99),
                p999_us: q(0.999),
                max_us: h.max(),
                server_cpu,
                client_cpu,
                lost_connections: lost,
                ok: sent.sent > 0
                    && sent.achieved_rate >= MIN_ACHIEVED * rate
                    && sent.errors == 0
                    && received >= expected
                    && h.max() <= STEP_MAX_LATENCY_US
                    && lost == 0,
                sent,
            };
            writeln!(
            out,
            "{t:.1},{rate},{:.2},{},{expected},{received},{:.0},{},{},{},{},{server_cpu:.1},{client_cpu:.1},{}",
            step.sent.achieved_rate,
            step.sent.sent,
            step.deliveries_per_s,
            step.p50_us,
            step.p99_us,
            step.p999_us,
            step.max_us,
            u8::from(step.ok)
        )?;
            live.emit(format!(
                "step {rate} msg/s: {} of {} deliveries, p50 {} p99 {} max {}: {}",
                count(received as f64),
                count(expected as f64),
                ms(step.p50_us),
                ms(step.p99_us),
                ms(step.max_us),
                if step.ok { "pass" } else { "MISS" }
            ));
            Ok(step)
        },
        |step, _| step.ok,
    )?;
    Ok(steps.into_iter().map(|(_, step)| step).collect())
}

/// A ladder's rule: runs `step` at each of `rates` in turn and stops one step after
/// the first that `met` says missed, so the cliff shows; each rate with its step.
pub fn climb<T>(
    rates: &[f64],
    mut step: impl FnMut(f64) -> anyhow::Result<T>,
    met: impl Fn(&T, f64) -> bool,
) -> anyhow::Result<Vec<(f64, T)>> {
    let mut steps = Vec::new();
    let mut missed = false;
    for &rate in rates {
        let got = step(rate)?;
        let this_met = met(&got, rate);
        steps.push((rate, got));
        if missed {
            break;
        }
        missed = !this_met;
    }
    Ok(steps)
}

/// The steps as a Markdown table.
pub fn table(steps: &[Step]) -> String {
    let mut t = String::from(
        "| rate msg/s | sent (achieved/s) | deliveries received / expected | deliveries/s | p50 | p99 | p99.9 | max | server CPU | client CPU | lost conns | ok |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for s in steps {
        let _ = writeln!(
            t,
            "| {} | {} ({:.1}/s) | {} / {} | {} | {} | {} | {} | {} | {:.0} % | {:.0} % | {} | {} |",
            s.rate,
            s.sent.sent,
            s.sent.achieved_rate,
            count(s.received as f64),
            count(s.expected as f64),
            count(s.deliveries_per_s),
            ms(s.p50_us),
            ms(s.p99_us),
            ms(s.p999_us),
            ms(s.max_us),
            s.server_cpu,
            s.client_cpu,
            s.lost_connections,
            met(s.ok)
        );
    }
    t
}

/// A ladder's closing facts and table in `report`, each named with `tag` (empty
/// for a scenario with one ladder): the server's CPU at the best step, the first
/// miss, and every step.
pub fn report_steps(report: &mut super::report::Report, steps: &[Step], tag: &str) {
    let named = |what: &str| match tag {
        "" => what.to_string(),
        tag => format!("{what} ({tag})"),
    };
    if let Some(s) = best(steps) {
        report.fact(
            &named("server CPU at that rate"),
            format!("{:.0} % of a core", s.server_cpu),
        );
    }
    if let Some(miss) = steps.iter().find(|s| !s.ok) {
        report.fact(
            &named("first miss"),
            format!(
                "{} msg/s: p99 {}, max {}, {} of {} deliveries",
                miss.rate,
                ms(miss.p99_us),
                ms(miss.max_us),
                count(miss.received as f64),
                count(miss.expected as f64)
            ),
        );
    }
    report.sections.push((named("Ladder"), table(steps)));
}

/// The fastest step that passed, if no slower step missed before it (a pass above a
/// miss is noise, not capacity).
pub fn best(steps: &[Step]) -> Option<&Step> {
    steps.iter().take_while(|s| s.ok).last()
}

/// The report's fact `figure` for a ladder of `step_secs`-long steps: the best step's
/// rate, deliveries/s, p99 and max, or why there is no figure.
pub fn report_best(
    report: &mut super::report::Report,
    figure: &str,
    steps: &[Step],
    step_secs: f64,
) {
    match best(steps) {
        Some(s) if step_secs >= MIN_STEP_SECS => report.fact(
            figure,
            format!(
                "{} msg/s ({} deliveries/s), p99 {}, max {}",
                count(s.rate),
                count(s.deliveries_per_s),
                ms(s.p99_us),
                ms(s.max_us)
            ),
        ),
        Some(s) => report.fact(
            figure,
            format!(
                "{} msg/s, but steps of {step_secs} s < {MIN_STEP_SECS} s: no figure",
                count(s.rate)
            ),
        ),
        None => report.fact(figure, "no step met the criterion".into()),
    }
}

/// Publishes `size`-byte stamped payloads to `subject` at `rate` for `secs` (the
/// latency phases).
pub fn publish(
    addr: SocketAddr,
    subject: u64,
    rate: f64,
    secs: f64,
    size: usize,
) -> anyhow::Result<MsggenSummary> {
    publish_to(&Publish::subject(addr, subject, 0), rate, secs, size)
}

/// Publishes `size`-byte stamped payloads as `to` says at `rate` for `secs` (a step).
pub fn publish_to(
    to: &Publish,
    rate: f64,
    secs: f64,
    size: usize,
) -> anyhow::Result<MsggenSummary> {
    load::msggen::run_with(
        MsggenArgs {
            url: format!("{}://{}", super::context::scheme(), to.addr),
            ca: super::context::tls_ca(),
            path: to.path.clone(),
            rate,
            max: to.subjects,
            publishers: ((rate / to.per_publisher).ceil() as usize)
                .clamp(PUBLISHERS.0, to.max_publishers.max(PUBLISHERS.0)),
            duration: secs,
            size,
            quiet: true,
            pusher: to.pusher.clone(),
            ..Default::default()
        },
        &AtomicBool::new(false),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The rates at which a ladder whose steps meet the target below `limit` runs.
    fn climbed(rates: &[f64], limit: f64) -> Vec<f64> {
        climb(rates, |rate| Ok(rate < limit), |met, _| *met)
            .unwrap()
            .into_iter()
            .map(|(rate, _)| rate)
            .collect()
    }

    #[test]
    fn the_ladder_stops_one_step_after_the_first_miss() {
        let rates = [1.0, 2.0, 4.0, 8.0, 16.0];
        assert_eq!(
            climbed(&rates, 3.0),
            [1.0, 2.0, 4.0, 8.0],
            "4 missed, 8 shows the cliff"
        );
        assert_eq!(climbed(&rates, 100.0), rates, "all met");
        assert_eq!(climbed(&rates, 0.0), [1.0, 2.0], "the first missed");
        assert_eq!(
            climbed(&rates, 16.0),
            rates,
            "the last missed: nothing after it"
        );
        assert!(climbed(&[], 1.0).is_empty());
    }

    #[test]
    fn a_failed_step_ends_the_ladder_with_its_error() {
        let r = climb(
            &[1.0, 2.0],
            |rate| {
                anyhow::ensure!(rate < 2.0, "step {rate} failed");
                Ok(())
            },
            |_, _| true,
        );
        assert_eq!(r.unwrap_err().to_string(), "step 2 failed");
    }

    fn step(rate: f64, ok: bool) -> Step {
        Step {
            rate,
            ok,
            ..Default::default()
        }
    }

    #[test]
    fn best_is_the_last_pass_before_the_first_miss() {
        let s = [
            step(2.0, true),
            step(5.0, true),
            step(10.0, false),
            step(20.0, true),
        ];
        assert_eq!(best(&s).map(|s| s.rate), Some(5.0));
        assert!(best(&[step(2.0, false)]).is_none());
        let t = table(&s);
        assert_eq!(t.lines().count(), 6);
        assert_eq!(CSV_HEADER.split(',').count(), 14);
    }
}
