//! `myriad plot FILE... --out DIR`: PNG charts from the per-second CSV logs of
//! `myriad serve --csv` and `myriad flood --csv` (told apart by their header).
//!
//! Charts: `memory.png` (kernel / user stacked, per connection and in total), `cpu.png`,
//! `connections.png`, `lag.png` (log scale with a moving average), `deliveries.png`,
//! `latency.png`. Each has one panel per input file that carries its columns.
//!
//! Text needs a TrueType font, loaded at run time (nothing is embedded): `--font`, or
//! `MYRIAD_FONT`, or Debian's fonts-dejavu-core (`DejaVuSans.ttf`).

mod charts;
mod draw;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context};
use plotters::prelude::*;

pub use charts::moving_average;

/// Where the font is looked for when neither `--font` nor `MYRIAD_FONT` names one.
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];
/// Width of one panel in pixels.
const PANEL_WIDTH: u32 = 1200;
/// Height of one panel in pixels.
const PANEL_HEIGHT: u32 = 460;

/// Flags of `myriad plot`.
#[derive(clap::Args, Debug, Clone)]
pub struct PlotArgs {
    /// CSV files written by `myriad serve --csv` or `myriad flood --csv`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Directory for the PNG files (created if missing).
    #[arg(long, default_value = "plots")]
    pub out: PathBuf,
    /// Rows (seconds) in the moving average of the lag chart.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub window: u64,
    /// TrueType font for the text (default: Debian's DejaVuSans.ttf).
    #[arg(long, env = "MYRIAD_FONT")]
    pub font: Option<PathBuf>,
}

static FONT_LOADED: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// Register the font under [`draw::FONT`] once per process.
fn load_font(explicit: Option<&Path>) -> anyhow::Result<()> {
    let res = FONT_LOADED.get_or_init(|| {
        let candidates: Vec<PathBuf> = match explicit {
            Some(p) => vec![p.to_path_buf()],
            None => FONT_PATHS.iter().map(PathBuf::from).collect(),
        };
        let Some(path) = candidates.iter().find(|p| p.is_file()) else {
            return Err(format!(
                "no font found at {}: install one (apt-get install -y fonts-dejavu-core) or pass --font FILE.ttf",
                candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
            ));
        };
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read font {}: {e}", path.display()))?;
        // plotters keeps fonts for the life of the process; this runs once.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(draw::FONT, FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable TrueType font", path.display()))?;
        Ok(path.clone())
    });
    match res {
        Ok(_) => Ok(()),
        Err(e) => bail!("{e}"),
    }
}

/// A short name for titles: the file name without `.csv`.
fn short_name(p: &Path) -> String {
    p.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// Render the charts; returns the PNG paths written.
pub fn render(args: &PlotArgs) -> anyhow::Result<Vec<PathBuf>> {
    load_font(args.font.as_deref())?;
    let mut inputs = Vec::new();
    for f in &args.files {
        let table = observe::csv::Table::read(f)
            .with_context(|| format!("cannot read CSV {}", f.display()))?;
        if table.is_empty() {
            bail!("{} has a header but no rows", f.display());
        }
        inputs.push(charts::Input {
            name: short_name(f),
            table,
        });
    }
    let charts = charts::all(&inputs, args.window as usize);
    if charts.is_empty() {
        bail!("nothing to plot: no file has the columns of serve --csv or flood --csv");
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let mut written = Vec::new();
    for chart in charts {
        let cols = chart.columns as u32;
        let rows = (chart.panels.len() as u32).div_ceil(cols);
        let path = args.out.join(chart.file);
        let root = BitMapBackend::new(&path, (PANEL_WIDTH * cols, PANEL_HEIGHT * rows))
            .into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
        let areas = root.split_evenly((rows as usize, cols as usize));
        for (area, panel) in areas.iter().zip(&chart.panels) {
            draw::draw_panel(area, panel)?;
        }
        root.present()
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
        written.push(path.clone());
    }
    Ok(written)
}

/// Run `myriad plot`.
pub fn run(args: PlotArgs) -> anyhow::Result<()> {
    for p in render(&args)? {
        println!("{}", p.display());
    }
    Ok(())
}
