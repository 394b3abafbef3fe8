//! The demo's live view: one line per second of the flood, with the server's own
//! counters beside what the clients saw. Formatting only; the demo feeds it.
//!
//! `pub/s` is what the server accepted through `POST /pub` (its `messages_in`), `deliv/s`
//! what it queued to connections (`messages_out`), both per second of wall time between
//! two `/stats` readings. Latency is the clients' publish → receive time of the stamps
//! received in that second; a second without messages shows `-`, not a zero.

use serde_json::Value;
use std::time::Instant;

/// The column titles, aligned with [`Line::render`].
pub const HEADER: &str =
    "  time    open  failed    pub/s  deliv/s   p50 ms   p99 ms  server RSS/conn";

/// One row of the live view.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Line {
    /// Whole seconds since the flood started.
    pub second: u64,
    pub open: u64,
    pub failed: u64,
    /// Messages the server accepted per second.
    pub published_per_s: f64,
    /// Deliveries the server queued per second.
    pub delivered_per_s: f64,
    /// Clients' (p50, p99) latency in microseconds; `None` in a second without messages.
    pub latency_us: Option<(u64, u64)>,
    /// Server RSS growth per open connection; `None` without connections.
    pub rss_per_conn: Option<u64>,
}

impl Line {
    pub fn render(&self) -> String {
        let ms = |us: u64| format!("{:.2}", us as f64 / 1000.0);
        let (p50, p99) = match self.latency_us {
            Some((a, b)) => (ms(a), ms(b)),
            None => ("-".into(), "-".into()),
        };
        let per_conn = self.rss_per_conn.map_or("-".into(), |b| format!("{b} B"));
        format!(
            "{:>5}s {:>7} {:>7} {:>8.0} {:>8.0} {:>8} {:>8} {:>16}",
            self.second,
            self.open,
            self.failed,
            self.published_per_s,
            self.delivered_per_s,
            p50,
            p99,
            per_conn
        )
    }
}

/// Per-second rates from successive `/stats` readings of the server.
#[derive(Default)]
pub struct ServerRates {
    last: Option<(Instant, u64, u64)>,
}

impl ServerRates {
    /// (published/s, delivered/s) since the previous reading; zeros for the first one or
    /// when `/stats` did not answer (a `Null` reading is skipped, not counted as zero).
    pub fn update(&mut self, now: Instant, stats: &Value) -> (f64, f64) {
        let (Some(pubs), Some(outs)) = (
            stats["messages_in"].as_u64(),
            stats["messages_out"].as_u64(),
        ) else {
            return (0.0, 0.0);
        };
        let rates = match self.last {
            Some((at, p, o)) => {
                let dt = now.duration_since(at).as_secs_f64().max(1e-3);
                (
                    pubs.saturating_sub(p) as f64 / dt,
                    outs.saturating_sub(o) as f64 / dt,
                )
            }
            None => (0.0, 0.0),
        };
        self.last = Some((now, pubs, outs));
        rates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn lines_line_up_and_idle_seconds_show_dashes() {
        let busy = Line {
            second: 7,
            open: 10_000,
            failed: 0,
            published_per_s: 500.0,
            delivered_per_s: 5_547.4,
            latency_us: Some((450, 4_830)),
            rss_per_conn: Some(311),
        };
        let text = busy.render();
        assert_eq!(text.len(), HEADER.len(), "{text}\n{HEADER}");
        let cells: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(
            cells,
            ["7s", "10000", "0", "500", "5547", "0.45", "4.83", "311", "B"]
        );
        let idle = Line {
            latency_us: None,
            rss_per_conn: None,
            ..busy
        };
        let cells: Vec<String> = idle.render().split_whitespace().map(String::from).collect();
        assert_eq!(&cells[5..], ["-", "-", "-"]);
    }

    #[test]
    fn rates_come_from_the_server_counters() {
        let mut r = ServerRates::default();
        let t0 = Instant::now();
        let stats = |i: u64, o: u64| serde_json::json!({"messages_in": i, "messages_out": o});
        assert_eq!(r.update(t0, &stats(100, 1_000)), (0.0, 0.0));
        assert_eq!(r.update(t0, &Value::Null), (0.0, 0.0), "no answer");
        let (p, d) = r.update(t0 + Duration::from_secs(2), &stats(1_100, 12_000));
        assert_eq!((p, d), (500.0, 5_500.0));
    }
}
