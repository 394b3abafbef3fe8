//! The demo's report: `report.md` next to the CSVs and charts it links (relative links,
//! so the directory can be moved or opened on another machine), and its table for the
//! terminal.

use observe::kernel::PerSocket;
use std::path::PathBuf;

/// What the demo measured, ready to write.
pub struct Figures {
    pub users: u64,
    pub m: u32,
    pub pairs: u64,
    pub transport: String,
    pub open: u64,
    pub asked: u64,
    pub failed: u64,
    pub connect_rate: f64,
    /// User-space bytes per connection: idle, and once every user has history.
    pub user_idle: f64,
    pub user_peak: f64,
    /// Kernel memory per TCP socket once every connection is open (`None`: no socket added).
    pub kernel: Option<PerSocket>,
    pub sent: u64,
    pub achieved_rate: f64,
    pub errors: u64,
    pub deliveries: u64,
    pub window_s: f64,
    pub latency_ms: (f64, f64, f64),
    pub total_s: f64,
    /// The charts written (file names in the report's directory), or why there are none.
    pub charts: Result<Vec<PathBuf>, String>,
    pub live: Vec<String>,
}

/// The Markdown report.
pub fn markdown(f: &Figures) -> String {
    let kernel = match &f.kernel {
        Some(k) => {
            let slab = k.slab.map_or("socket slab unreadable".into(), |s| {
                format!("socket slab {s:.0} B")
            });
            format!(
                "{:.0} B = {slab} + TCP buffers {:.0} B",
                k.total(),
                k.buffers
            )
        }
        None => format!(
            "- (fewer than {} TCP sockets were added)",
            observe::kernel::MIN_SOCKETS_ADDED
        ),
    };
    let definition = f
        .kernel
        .as_ref()
        .map_or(observe::kernel::DEFINITION, |k| k.definition());
    let charts = match &f.charts {
        Ok(files) => files
            .iter()
            .filter_map(|p| {
                let name = p.file_name()?.to_string_lossy();
                let stem = p.file_stem()?.to_string_lossy();
                Some(format!("![{stem}]({name})\n"))
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("No charts: {e}\n"),
    };
    format!(
        "# myriad demo\n\n\
         | what | value |\n|---|---|\n\
         | friends graph | {users} users, m = {m}, {pairs} friendships |\n\
         | connections held ({transport}) | {open} of {asked} ({failed} failed), {rate:.0} connects/s |\n\
         | server memory per idle connection | {user:.0} B user space (RSS growth / connections, before publishing) |\n\
         | … with history filled | {user_peak:.0} B user space (each user keeps its last messages for resume) |\n\
         | kernel memory per TCP socket | {kernel} |\n\
         | published | {sent} messages at {achieved:.0}/s ({errors} errors) |\n\
         | deliveries | {deliveries} in {window:.1} s = {dps:.0}/s |\n\
         | publish → receive latency | p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms |\n\
         | total time | {total:.1} s |\n\n\
         Kernel memory per TCP socket, here and in `memory.png` (the same two stacked \
         kernel layers) and the dashboard: {definition}. Measured once every connection \
         was open, before publishing. Client and server run on this machine, so each \
         connection is two sockets.\n\n\
         ## Charts\n\n{charts}\n\
         Data: [server.csv](server.csv) (`serve --csv`, one row per second), \
         [flood.csv](flood.csv) (the clients), [server.log](server.log). Redraw with \
         `myriad plot server.csv flood.csv --out .`\n\n\
         ## Live view\n\n```\n{header}\n{live}\n```\n",
        users = f.users,
        m = f.m,
        pairs = f.pairs,
        transport = f.transport,
        open = f.open,
        asked = f.asked,
        failed = f.failed,
        rate = f.connect_rate,
        user = f.user_idle,
        user_peak = f.user_peak,
        sent = f.sent,
        achieved = f.achieved_rate,
        errors = f.errors,
        deliveries = f.deliveries,
        window = f.window_s,
        dps = f.deliveries as f64 / f.window_s,
        p50 = f.latency_ms.0,
        p99 = f.latency_ms.1,
        max = f.latency_ms.2,
        total = f.total_s,
        header = super::live::HEADER,
        live = f.live.join("\n"),
    )
}

/// The report's table, for the terminal.
pub fn summary_text(report: &str) -> String {
    report
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| what"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            format!(
                "{:<36} {}",
                cells.first().copied().unwrap_or(""),
                cells.get(1).copied().unwrap_or("")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> Figures {
        Figures {
            users: 10,
            m: 2,
            pairs: 17,
            transport: "stream".into(),
            open: 20,
            asked: 20,
            failed: 0,
            connect_rate: 1000.0,
            user_idle: 150.0,
            user_peak: 300.0,
            kernel: Some(PerSocket {
                buffers: 52.0,
                slab: Some(3200.0),
            }),
            sent: 100,
            achieved_rate: 50.0,
            errors: 0,
            deliveries: 400,
            window_s: 2.0,
            latency_ms: (0.4, 2.0, 5.0),
            total_s: 9.0,
            charts: Ok(vec!["/tmp/x/memory.png".into(), "/tmp/x/cpu.png".into()]),
            live: vec!["    1s ...".into()],
        }
    }

    #[test]
    fn charts_are_embedded_by_relative_links_and_kernel_is_defined_once() {
        let md = markdown(&figures());
        assert!(md.contains("\n![memory](memory.png)\n"), "{md}");
        assert!(md.contains("\n![cpu](cpu.png)\n"), "{md}");
        assert!(!md.contains("/tmp/x"), "no absolute paths: {md}");
        assert!(md.contains(
            "| kernel memory per TCP socket | 3252 B = socket slab 3200 B + TCP buffers 52 B |"
        ));
        assert!(md.contains(observe::kernel::DEFINITION));
        assert!(md.contains("| deliveries | 400 in 2.0 s = 200/s |"));
        let text = summary_text(&md);
        assert!(text.lines().any(|l| l.starts_with("deliveries ")), "{text}");

        let failed = Figures {
            charts: Err("no font".into()),
            kernel: None,
            ..figures()
        };
        let md = markdown(&failed);
        assert!(md.contains("No charts: no font"), "{md}");
        assert!(md.contains(
            "| kernel memory per TCP socket | - (fewer than 100 TCP sockets were added) |"
        ));
    }
}
