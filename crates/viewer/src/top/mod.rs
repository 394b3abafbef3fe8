//! `myriad top ADDR [ADDR...]`: a live terminal view, like `top`, of every process behind
//! the given admin addresses (their `/stats`), sorted, with totals. `--once` prints one
//! text snapshot and exits, for scripts and tests. Both fit the width they have (120
//! columns for `--once` off a terminal) by leaving out the least important columns.
//!
//! `model` fetches and sums the numbers, `table` turns them into columns of text, `view`
//! draws them. It only reads `/stats`; it changes nothing on the server.

pub mod model;
pub mod table;
mod view;

use std::time::{Duration, Instant};

use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

pub use model::SortKey;

/// Flags of `myriad top`.
#[derive(clap::Args, Debug, Clone)]
pub struct TopArgs {
    /// Admin addresses of the server's processes (host:port or http://host:port).
    #[arg(required = true, value_name = "ADDR")]
    pub addrs: Vec<String>,
    /// Print one text snapshot and exit (for scripts and tests).
    #[arg(long)]
    pub once: bool,
    /// Refresh interval in milliseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..))]
    pub interval_ms: u64,
    /// Sort rows by this column.
    #[arg(long, value_enum, default_value_t = SortKey::Conns)]
    pub sort: SortKey,
    /// Columns of the --once text; the least important columns leave to fit [default:
    /// the terminal's width, 120 when not a terminal].
    #[arg(long, value_parser = clap::value_parser!(u16).range(40..))]
    pub width: Option<u16>,
}

/// The `--once` text for these arguments. Errors only when no address answered.
pub fn snapshot_text(args: &TopArgs) -> anyhow::Result<String> {
    let snap = model::collect(&args.addrs);
    if snap.rows.is_empty() {
        let why: Vec<String> = snap
            .errors
            .iter()
            .map(|(a, e)| format!("{a}: {e}"))
            .collect();
        anyhow::bail!("no admin address answered ({})", why.join("; "));
    }
    let width = args
        .width
        .map(usize::from)
        .or_else(|| {
            std::io::IsTerminal::is_terminal(&std::io::stdout())
                .then(|| ratatui::crossterm::terminal::size().ok())
                .flatten()
                .map(|(w, _)| w as usize)
        })
        .unwrap_or(table::DEFAULT_WIDTH);
    Ok(table::render_text(&snap, args.sort, width))
}

/// Run `myriad top`.
pub fn run(args: TopArgs) -> anyhow::Result<()> {
    if args.once {
        print!("{}", snapshot_text(&args)?);
        return Ok(());
    }
    let mut terminal = ratatui::try_init()?;
    let result = live(&mut terminal, &args);
    ratatui::restore();
    result
}

fn live(terminal: &mut ratatui::DefaultTerminal, args: &TopArgs) -> anyhow::Result<()> {
    let interval = Duration::from_millis(args.interval_ms);
    let mut key = args.sort;
    let mut snap = model::collect(&args.addrs);
    let mut fetched = Instant::now();
    loop {
        let age = format!("updated {:.1} s ago", fetched.elapsed().as_secs_f64());
        terminal.draw(|f| view::draw(f, &snap, key, args.addrs.len(), &age))?;
        let wait = interval
            .saturating_sub(fetched.elapsed())
            .min(Duration::from_millis(250));
        if event::poll(wait)? {
            if let Event::Key(k) = event::read()? {
                if k.kind != KeyEventKind::Press {
                    continue;
                }
                match k.code {
                    KeyCode::Char('q') | KeyCode::Esc => return Ok(()),
                    KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                        return Ok(())
                    }
                    KeyCode::Char('c') => key = SortKey::Conns,
                    KeyCode::Char('p') => key = SortKey::Cpu,
                    KeyCode::Char('m') => key = SortKey::Rss,
                    KeyCode::Char('o') => key = SortKey::Out,
                    KeyCode::Char('l') => key = SortKey::Lag,
                    KeyCode::Char('i') => key = SortKey::Pid,
                    _ => {}
                }
            }
        }
        if fetched.elapsed() >= interval {
            snap = model::collect(&args.addrs);
            fetched = Instant::now();
        }
    }
}
