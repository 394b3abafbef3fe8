//! `myriad plot` end to end: write a server CSV (with the real writer) and a flood CSV,
//! render them, and check the PNGs are real images with drawn content. The images stay
//! in `target/tmp/plots/` for a person to look at.

use std::path::Path;

use observe::csv::{CsvWriter, FLOOD_COLUMNS};
use observe::Sample;
use viewer::plot::{render, PlotArgs};

/// Two minutes of a plausible run: ramp to 10k connections, hold with broadcasts, leave.
fn write_server_csv(path: &Path) {
    let mut w = CsvWriter::create(path).unwrap();
    for t in 0..120u64 {
        let conns = if t < 30 {
            t * 333
        } else if t < 100 {
            10_000
        } else {
            10_000 - (t - 100) * 500
        };
        let mut s = Sample {
            uptime_s: t as f64,
            time: 1_800_000_000.0 + t as f64,
            pid: 4242,
            connections: conns,
            rss_bytes: 8_000_000 + conns * 180,
            rss_idle_bytes: 8_000_000,
            user_bytes_per_conn: if conns > 0 { 180.0 } else { 0.0 },
            kernel_bytes_per_conn: if conns > 0 {
                1800.0 + (t % 7) as f64 * 40.0
            } else {
                0.0
            },
            slab_bytes_per_conn: if conns > 0 { 2400.0 } else { 0.0 },
            cpu_user: 0.05 + (t % 10) as f64 * 0.02,
            cpu_sys: 0.10 + (t % 5) as f64 * 0.03,
            connects_per_s: if t < 30 { 333.0 } else { 0.0 },
            messages_out_per_s: if (30..100).contains(&t) {
                50_000.0 + (t % 9) as f64 * 4000.0
            } else {
                0.0
            },
            messages_in_per_s: if (30..100).contains(&t) { 5.0 } else { 0.0 },
            lag_avg_us: 300.0 + (t % 13) as f64 * 90.0,
            lag_p90_us: 800 + (t % 11) * 300,
            lag_max_us: if t % 17 == 0 { 45_000 } else { 2_500 },
            latency_p50_us: 900 + (t % 5) * 100,
            latency_p99_us: 4_000 + (t % 9) * 1_000,
            latency_max_us: 12_000,
            ..Sample::default()
        };
        s.machine.cpu_total = 0.6 + (t % 4) as f64 * 0.1;
        s.machine.tcp_mem_bytes = conns * 1800;
        s.machine.sock_slab_bytes = Some(conns * 2400);
        w.write(&s).unwrap();
    }
}

fn write_flood_csv(path: &Path) {
    let mut text = FLOOD_COLUMNS.join(",") + "\n";
    for t in 0..120u64 {
        let open = if t < 30 {
            t * 333
        } else if t < 100 {
            10_000
        } else {
            10_000 - (t - 100) * 500
        };
        let msgs = if (30..100).contains(&t) { 50_000 } else { 0 };
        text += &format!(
            "{t},{open},{},{},{msgs},{},{},{},{},{},{},{}\n",
            t / 40,
            if t >= 100 { (t - 99) * 500 } else { 0 },
            msgs * 60,
            1_000 + (t % 5) * 100,
            5_000 + (t % 9) * 900,
            20_000,
            30_000_000 + open * 900,
            20.0 + (t % 10) as f64,
            30.0
        );
    }
    std::fs::write(path, text).unwrap();
}

/// Width, height and the number of distinct colours of a PNG.
fn inspect(path: &Path) -> (u32, u32, usize) {
    let bytes = std::fs::read(path).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
        "{} is not a PNG",
        path.display()
    );
    let mut reader = png::Decoder::new(&bytes[..]).read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    let px = info.line_size / info.width as usize;
    let colours: std::collections::HashSet<&[u8]> = buf[..info.buffer_size()].chunks(px).collect();
    (info.width, info.height, colours.len())
}

#[test]
fn renders_readable_pngs_from_server_and_flood_csv() {
    let tmp = tempfile::tempdir().unwrap();
    let server = tmp.path().join("server.csv");
    let flood = tmp.path().join("flood.csv");
    write_server_csv(&server);
    write_flood_csv(&flood);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("plots");
    let _ = std::fs::remove_dir_all(&out);
    let args = PlotArgs {
        files: vec![server, flood],
        out: out.clone(),
        window: 10,
        font: None,
    };
    let written = render(&args)
        .unwrap_or_else(|e| panic!("{e:#} (CI needs: apt-get install -y fonts-dejavu-core)"));
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "memory.png",
            "cpu.png",
            "connections.png",
            "lag.png",
            "deliveries.png",
            "latency.png"
        ]
    );
    for p in &written {
        let (w, h, colours) = inspect(p);
        let size = std::fs::metadata(p).unwrap().len();
        assert!(w >= 1000 && h >= 400, "{}: {w}x{h}", p.display());
        assert!(size > 20_000, "{}: only {size} bytes", p.display());
        // White background, grid, text (antialiased) and coloured series: many colours.
        assert!(
            colours > 50,
            "{}: {colours} colours, looks blank",
            p.display()
        );
    }
    // Two panels per file for memory, one for the others; lag comes from the server only.
    assert_eq!(inspect(&out.join("memory.png")).0, 2400);
    assert_eq!(inspect(&out.join("cpu.png")).1, 920);
    assert_eq!(inspect(&out.join("lag.png")).1, 460);
    eprintln!("plots in {}", out.display());
}

#[test]
fn bad_inputs_give_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out");
    let missing = PlotArgs {
        files: vec![tmp.path().join("nope.csv")],
        out: out.clone(),
        window: 10,
        font: None,
    };
    assert!(format!("{:#}", render(&missing).unwrap_err()).contains("nope.csv"));
    let odd = tmp.path().join("odd.csv");
    std::fs::write(&odd, "a,b\n1,2\n").unwrap();
    let args = PlotArgs {
        files: vec![odd],
        out,
        window: 10,
        font: None,
    };
    assert!(format!("{:#}", render(&args).unwrap_err()).contains("time_s"));
}
