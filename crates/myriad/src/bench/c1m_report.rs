//! `bench c1m`'s report parts: one publishing phase's rows and the per-process table.

use super::report::{bytes, count, met, ms, Report};
use load::msggen::MsggenSummary;

/// One publishing phase's figures.
pub(super) struct Phase {
    pub sent: MsggenSummary,
    pub received: u64,
    pub hist: hdrhistogram::Histogram<u64>,
    pub lag_max: u64,
    /// All server processes' CPU over the phase, percent of one core...
    pub cpu: f64,
    /// ...over this many seconds (the sending and the quiet tail after it).
    pub window_s: f64,
    /// Server and load threads' wait for a CPU over the phase, and the CPU of
    /// server, load and the rest of the machine ([`super::cpu_wait`]).
    pub cpu_wait: (String, String),
}

/// The report rows of one publishing phase: deliveries, latency against its target
/// (µs, as text), CPU, and the CPU per publish above `held_cpu` (holding's, percent
/// of a core): what a message costs, comparable between runs at different rates.
pub(super) fn phase_rows(
    report: &mut Report,
    what: &str,
    plural: &str,
    p: &Phase,
    held_cpu: f64,
    (target_us, target): (u64, &str),
) {
    let q = |x: f64| {
        if p.hist.is_empty() {
            0
        } else {
            p.hist.value_at_quantile(x)
        }
    };
    let (p50, p99, p999) = (q(0.5), q(0.99), q(0.999));
    report.row(
        &format!("{plural}: deliveries received / reported by the server"),
        format!(
            "{} / {} ({} published at {}/s, {} errors; {}/s deliveries)",
            count(p.received as f64),
            count(p.sent.deliveries as f64),
            count(p.sent.sent as f64),
            count(p.sent.achieved_rate),
            p.sent.errors,
            count(p.sent.deliveries as f64 / p.sent.elapsed_s.max(1e-3))
        ),
        "all",
        met(p.received == p.sent.deliveries && p.sent.sent > 0 && p.sent.errors == 0),
    );
    report.row(
        &format!("{what} latency p50 / p99 / p99.9 / max"),
        format!(
            "{} / {} / {} / {}",
            ms(p50),
            ms(p99),
            ms(p999),
            ms(p.hist.max())
        ),
        &format!("p99 {target}"),
        met(p99 > 0 && p99 <= target_us),
    );
    report.fact(
        &format!("{plural}: server CPU (all processes) / worst loop lag"),
        format!("{:.0} % of a core / {}", p.cpu, ms(p.lag_max)),
    );
    report.fact(
        &format!("{plural}: server CPU per publish above holding"),
        per_publish_us(p.cpu, held_cpu, p.window_s, p.sent.sent)
            .map_or_else(|| "—".into(), |us| format!("{us:.0} µs")),
    );
    report.fact(
        &format!("{plural}: wait for a CPU, server / load threads"),
        p.cpu_wait.0.clone(),
    );
    report.fact(
        &format!("{plural}: CPU of server (with nats-server) / load / rest of the machine"),
        p.cpu_wait.1.clone(),
    );
}

/// CPU-µs per publish that a phase of `sent` publishes, at `cpu` % of a core over
/// `window_s`, added to holding's `held` %; none without publishes.
fn per_publish_us(cpu: f64, held: f64, window_s: f64, sent: u64) -> Option<f64> {
    (sent > 0).then(|| (cpu - held).max(0.0) / 100.0 * window_s / sent as f64 * 1e6)
}

/// The per-process table: role, peak connections, CPU over the run, RSS, loop lag.
pub(super) fn process_table(seen: &super::c1m_watch::Seen) -> String {
    let mut t = String::from(
        "| pid | role | connections (max) | CPU s | RSS max | loop lag p99 max | loop lag max |\n|---|---|---|---|---|---|---|\n",
    );
    for (pid, p) in &seen.peaks {
        t.push_str(&format!(
            "| {pid} | {} | {} | {:.1} | {} | {} | {} |\n",
            p.role,
            p.connections_max,
            p.cpu_last - p.cpu_first.unwrap_or(p.cpu_last),
            bytes(p.rss_max as f64),
            ms(p.lag_p99_max),
            ms(p.lag_max)
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::per_publish_us;

    #[test]
    fn cpu_per_publish_is_what_the_phase_added_to_holding() {
        // 20,000 publishes over 10 s taking a core from 66 % to 113 %: 235 µs each.
        let us = per_publish_us(113.0, 66.0, 10.0, 20_000);
        assert_eq!(us.map(f64::round), Some(235.0));
        let below = per_publish_us(50.0, 66.0, 10.0, 20_000);
        assert_eq!(below, Some(0.0), "noise below holding");
        assert_eq!(per_publish_us(113.0, 66.0, 10.0, 0), None);
    }
}
