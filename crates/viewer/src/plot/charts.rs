//! Which charts `myriad plot` draws from which CSV columns. A chart is one PNG with one
//! panel per input file that has the columns it needs (memory has two per file: per
//! connection and total). Server (`serve --csv`) and load (`flood --csv`) files are told
//! apart by their header (see `csv::CsvKind`).

use plotters::style::RGBColor;

use super::draw::{Panel, Series, Stroke};
use observe::csv::{CsvKind, Table};

const USER: RGBColor = RGBColor(55, 178, 77);
const KERNEL: RGBColor = RGBColor(245, 159, 0);
const SLAB: RGBColor = RGBColor(232, 89, 12);
const BLUE: RGBColor = RGBColor(34, 139, 230);
const PINK: RGBColor = RGBColor(214, 51, 108);
const GREY: RGBColor = RGBColor(90, 90, 90);
const GREEN: RGBColor = RGBColor(47, 158, 68);
const ORANGE: RGBColor = RGBColor(240, 140, 0);
const RED: RGBColor = RGBColor(224, 49, 49);
const PURPLE: RGBColor = RGBColor(112, 72, 232);
const TEAL: RGBColor = RGBColor(18, 184, 134);

/// One PNG: its file name, panels per row, and the panels.
pub struct Chart {
    pub file: &'static str,
    pub columns: usize,
    pub panels: Vec<Panel>,
}

/// An input file: a short name for titles and its table.
pub struct Input {
    pub name: String,
    pub table: Table,
}

fn pct(v: f64) -> String {
    format!("{:.0} %", v)
}
/// A count on an axis: `500`, `2.5k`, `80k`, `1.2M`.
fn si(v: f64) -> String {
    let n = super::draw::axis_number;
    if v.abs() >= 1e6 {
        format!("{}M", n(v / 1e6))
    } else if v.abs() >= 1e3 {
        format!("{}k", n(v / 1e3))
    } else {
        n(v)
    }
}

/// Microseconds on an axis: `500 µs`, `2 ms`, `1.5 s`.
fn us(v: f64) -> String {
    let (n, unit) = if v >= 1e6 {
        (v / 1e6, "s")
    } else if v >= 1e3 {
        (v / 1e3, "ms")
    } else {
        (v, "µs")
    };
    format!("{} {unit}", super::draw::axis_number(n))
}

/// Trailing moving average over `window` rows, skipping NaN cells.
pub fn moving_average(v: &[f64], window: usize) -> Vec<f64> {
    let w = window.max(1);
    (0..v.len())
        .map(|i| {
            let part: Vec<f64> = v[i.saturating_sub(w - 1)..=i]
                .iter()
                .copied()
                .filter(|x| x.is_finite())
                .collect();
            if part.is_empty() {
                f64::NAN
            } else {
                part.iter().sum::<f64>() / part.len() as f64
            }
        })
        .collect()
}

fn panel(inp: &Input, title: &str, y_desc: &str, y_fmt: fn(f64) -> String) -> Panel {
    Panel {
        title: format!("{}: {title}", inp.name),
        y_desc: y_desc.to_string(),
        x_desc: "time (s)".into(),
        x: inp.table.column("time_s").unwrap_or_default(),
        stacked: Vec::new(),
        lines: Vec::new(),
        log: false,
        y_fmt,
        bytes: false,
    }
}

/// A panel of byte values (drawn in the unit that fits, see `draw::Panel::bytes`).
fn bytes_panel(inp: &Input, title: &str, y_desc: &str) -> Panel {
    let mut p = panel(inp, title, y_desc, super::draw::axis_number);
    p.bytes = true;
    p
}

/// Column `name`, or zeros when the file lacks it (NaN cells become 0 for stacking).
fn col0(t: &Table, name: &str) -> Vec<f64> {
    t.column(name)
        .map(|v| {
            v.into_iter()
                .map(|x| if x.is_finite() { x } else { 0.0 })
                .collect()
        })
        .unwrap_or_else(|| vec![0.0; t.len()])
}

fn col(t: &Table, name: &str) -> Vec<f64> {
    t.column(name).unwrap_or_else(|| vec![f64::NAN; t.len()])
}

/// Fewest connections a per-connection figure is drawn from: below it the process's
/// fixed cost divided by a handful of connections would stretch the axis (hundreds of
/// KiB "per connection"), so those rows are drawn as zero, as the dashboard leaves them out.
pub const MIN_CONNECTIONS_PER_CONN: f64 = 100.0;

/// Column `name` of a server table, zero in rows with too few connections to divide by.
fn per_connection(t: &Table, name: &str) -> Vec<f64> {
    let conns = col0(t, "connections");
    col0(t, name)
        .into_iter()
        .zip(conns)
        .map(|(v, c)| {
            if c >= MIN_CONNECTIONS_PER_CONN {
                v
            } else {
                0.0
            }
        })
        .collect()
}

fn scale(v: Vec<f64>, k: f64) -> Vec<f64> {
    v.into_iter().map(|x| x * k).collect()
}

fn memory(inputs: &[Input]) -> Chart {
    let mut panels = Vec::new();
    for inp in inputs {
        let t = &inp.table;
        match t.kind {
            CsvKind::Server => {
                // Kernel per TCP socket as `observe::kernel` defines it: socket slab +
                // TCP buffers, growth since idle per TCP socket added, machine-wide.
                let mut a = bytes_panel(
                    inp,
                    "memory per connection (stacked): kernel = socket slab + TCP buffers",
                    "per connection",
                );
                a.stacked = vec![
                    Series::new(
                        "kernel: TCP buffers / TCP socket added",
                        KERNEL,
                        per_connection(t, "kernel_bytes_per_conn"),
                        Stroke::Thin,
                    ),
                    Series::new(
                        "kernel: socket slab / TCP socket added",
                        SLAB,
                        per_connection(t, "slab_bytes_per_conn"),
                        Stroke::Thin,
                    ),
                    Series::new(
                        "user space: RSS growth / connection",
                        USER,
                        per_connection(t, "user_bytes_per_conn"),
                        Stroke::Thin,
                    ),
                ];
                let mut b = bytes_panel(inp, "memory in total (stacked)", "memory");
                b.stacked = vec![
                    Series::new(
                        "kernel TCP buffers (machine)",
                        KERNEL,
                        col0(t, "tcp_mem_bytes"),
                        Stroke::Thin,
                    ),
                    Series::new(
                        "kernel socket slab (machine)",
                        SLAB,
                        col0(t, "sock_slab_bytes"),
                        Stroke::Thin,
                    ),
                    Series::new(
                        "user space: process RSS",
                        USER,
                        col0(t, "rss_bytes"),
                        Stroke::Thin,
                    ),
                ];
                panels.extend([a, b]);
            }
            CsvKind::Flood if t.has("rss_bytes") => {
                let rss = col0(t, "rss_bytes");
                let open = col0(t, "open");
                let per: Vec<f64> = rss
                    .iter()
                    .zip(&open)
                    .map(|(r, o)| if *o > 0.0 { r / o } else { 0.0 })
                    .collect();
                let mut a = bytes_panel(
                    inp,
                    "load client memory per open connection",
                    "per connection",
                );
                a.stacked = vec![Series::new(
                    "user space: RSS / open",
                    USER,
                    per,
                    Stroke::Thin,
                )];
                let mut b = bytes_panel(inp, "load client memory in total", "memory");
                b.stacked = vec![Series::new(
                    "user space: process RSS",
                    USER,
                    rss,
                    Stroke::Thin,
                )];
                panels.extend([a, b]);
            }
            _ => {}
        }
    }
    Chart {
        file: "memory.png",
        columns: 2,
        panels,
    }
}

fn cpu(inputs: &[Input]) -> Chart {
    let mut panels = Vec::new();
    for inp in inputs
        .iter()
        .filter(|i| i.table.has("cpu_user") && i.table.has("cpu_sys"))
    {
        let t = &inp.table;
        // serve --csv writes cores (1.0 = one core); flood --csv writes percent of one core.
        let k = if t.kind == CsvKind::Flood { 1.0 } else { 100.0 };
        let mut p = panel(
            inp,
            "CPU (stacked user + sys; 100 % = one core)",
            "% of one core",
            pct,
        );
        p.stacked = vec![
            Series::new("sys", PINK, scale(col0(t, "cpu_sys"), k), Stroke::Thin),
            Series::new("user", BLUE, scale(col0(t, "cpu_user"), k), Stroke::Thin),
        ];
        if t.has("m_cpu_total") {
            p.lines.push(Series::new(
                "whole machine",
                GREY,
                scale(col(t, "m_cpu_total"), 100.0),
                Stroke::Dashed,
            ));
        }
        panels.push(p);
    }
    Chart {
        file: "cpu.png",
        columns: 1,
        panels,
    }
}

fn connections(inputs: &[Input]) -> Chart {
    let mut panels = Vec::new();
    for inp in inputs {
        let t = &inp.table;
        let mut p = panel(inp, "connections", "connections", si);
        match t.kind {
            CsvKind::Server => p.lines.push(Series::new(
                "open connections",
                BLUE,
                col(t, "connections"),
                Stroke::Thick,
            )),
            CsvKind::Flood => {
                p.lines
                    .push(Series::new("open", BLUE, col(t, "open"), Stroke::Thick));
                if t.has("failed") {
                    p.lines
                        .push(Series::new("failed", RED, col(t, "failed"), Stroke::Thin));
                }
                if t.has("closed") {
                    p.lines
                        .push(Series::new("closed", GREY, col(t, "closed"), Stroke::Thin));
                }
            }
            CsvKind::Other => continue,
        }
        panels.push(p);
    }
    Chart {
        file: "connections.png",
        columns: 1,
        panels,
    }
}

fn lag(inputs: &[Input], window: usize) -> Chart {
    let mut panels = Vec::new();
    for inp in inputs.iter().filter(|i| i.table.has("lag_p90_us")) {
        let t = &inp.table;
        let p90 = col(t, "lag_p90_us");
        let mut p = panel(
            inp,
            "event-loop lag of the 10 ms tick (log scale)",
            "lag",
            us,
        );
        p.log = true;
        p.lines = vec![
            Series::new("max", RED, col(t, "lag_max_us"), Stroke::Thin),
            Series::new("p90", ORANGE, p90.clone(), Stroke::Thin),
            Series::new("avg", GREEN, col(t, "lag_avg_us"), Stroke::Thin),
            Series::new(
                &format!("p90, {window} s moving average"),
                PURPLE,
                moving_average(&p90, window),
                Stroke::Thick,
            ),
        ];
        panels.push(p);
    }
    Chart {
        file: "lag.png",
        columns: 1,
        panels,
    }
}

fn deliveries(inputs: &[Input]) -> Chart {
    let mut panels = Vec::new();
    for inp in inputs {
        let t = &inp.table;
        let mut p = panel(inp, "deliveries per second", "messages / s", si);
        match t.kind {
            CsvKind::Server => {
                p.lines.push(Series::new(
                    "deliveries/s (to connections)",
                    PURPLE,
                    col(t, "messages_out_per_s"),
                    Stroke::Thick,
                ));
                p.lines.push(Series::new(
                    "publishes/s (API)",
                    TEAL,
                    col(t, "messages_in_per_s"),
                    Stroke::Thin,
                ));
            }
            CsvKind::Flood => {
                p.title = format!("{}: messages received per second", inp.name);
                p.lines.push(Series::new(
                    "messages/s received",
                    PURPLE,
                    col(t, "messages"),
                    Stroke::Thick,
                ));
            }
            CsvKind::Other => continue,
        }
        panels.push(p);
    }
    Chart {
        file: "deliveries.png",
        columns: 1,
        panels,
    }
}

fn latency(inputs: &[Input]) -> Chart {
    let mut panels = Vec::new();
    for inp in inputs
        .iter()
        .filter(|i| i.table.has("lat_p99_us") && !i.table.has(LADDER_X))
    {
        let t = &inp.table;
        let what = match t.kind {
            CsvKind::Flood => "latency, send stamp to receipt (log scale)",
            _ => "delivery latency, publish to socket write (log scale)",
        };
        let mut p = panel(inp, what, "latency", us);
        p.log = true;
        latency_lines(&mut p, t);
        panels.push(p);
    }
    Chart {
        file: "latency.png",
        columns: 1,
        panels,
    }
}

/// A latency panel's lines: the max (thin, when the table has it), p99 and p50.
fn latency_lines(p: &mut Panel, t: &Table) {
    if t.has("lat_max_us") {
        p.lines
            .push(Series::new("max", RED, col(t, "lat_max_us"), Stroke::Thin));
    }
    for (name, colour, column) in [("p99", ORANGE, "lat_p99_us"), ("p50", GREEN, "lat_p50_us")] {
        p.lines
            .push(Series::new(name, colour, col(t, column), Stroke::Thick));
    }
}

/// The x column of a ladder CSV (`bench broadcast`, `bench c1m --unicast-ladder`: one
/// row per rate step).
const LADDER_X: &str = "rate_msg_s";

/// `ladder.png`: per ladder file, latency p50/p99/max of each step against its publish
/// rate (log scale), with the line a step must stay under (its `limit_us`, else 1 s):
/// where the cliff is.
fn ladder(inputs: &[Input]) -> Chart {
    let mut panels = Vec::new();
    for inp in inputs.iter().filter(|i| i.table.has(LADDER_X)) {
        let t = &inp.table;
        let mut p = panel(
            inp,
            "latency per step against the rate (log scale)",
            "latency",
            us,
        );
        p.x = col(t, LADDER_X);
        p.x_desc = "publish rate (messages/s)".into();
        p.log = true;
        // A ladder names its own limit (`limit_us`: c1m's unicast 5 ms); broadcast's
        // is the SPEC's 1 s.
        let (limit_name, limit) = if t.has("limit_us") {
            ("target", col(t, "limit_us"))
        } else {
            ("1 s limit", vec![1e6; t.len()])
        };
        p.lines
            .push(Series::new(limit_name, GREY, limit, Stroke::Dashed));
        latency_lines(&mut p, t);
        panels.push(p);
    }
    Chart {
        file: "ladder.png",
        columns: 1,
        panels,
    }
}

/// Every chart that at least one input has data for.
pub fn all(inputs: &[Input], window: usize) -> Vec<Chart> {
    [
        memory(inputs),
        cpu(inputs),
        connections(inputs),
        lag(inputs, window),
        deliveries(inputs),
        latency(inputs),
        ladder(inputs),
    ]
    .into_iter()
    .filter(|c| !c.panels.is_empty())
    .collect()
}

#[cfg(test)]
mod tests;
