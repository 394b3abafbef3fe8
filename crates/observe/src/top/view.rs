//! Drawing of `myriad top` with ratatui: title, machine line, the process table with a
//! totals row, errors and the key help. Pure drawing from a [`Snapshot`]; no fetching.

use ratatui::layout::{Alignment, Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::model::{self, Snapshot, SortKey, HEADER, HEADER_WIDE};

/// Narrowest terminal that gets the wide columns (queued, drops, latency).
const WIDE_COLUMNS_MIN_WIDTH: u16 = 150;

/// Draw one frame.
pub fn draw(f: &mut Frame, snap: &Snapshot, key: SortKey, addrs: usize, age: &str) {
    let area = f.area();
    let [title, machine, table, errors, help] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(2),
        Constraint::Min(4),
        Constraint::Length(snap.errors.len().min(4) as u16),
        Constraint::Length(1),
    ])
    .areas(area);

    let head = format!(
        " myriad top · {} process(es) behind {} address(es) · sorted by {} · {}",
        snap.rows.len(),
        addrs,
        key.name(),
        age
    );
    f.render_widget(
        Paragraph::new(head).style(
            Style::default()
                .add_modifier(Modifier::BOLD)
                .fg(Color::Cyan),
        ),
        title,
    );
    let m = snap
        .machine
        .as_ref()
        .map(model::machine_line)
        .unwrap_or_else(|| "machine: no answer yet".into());
    f.render_widget(
        Paragraph::new(format!(" {m}")).wrap(Wrap { trim: true }),
        machine,
    );

    let wide = area.width >= WIDE_COLUMNS_MIN_WIDTH;
    let ncols = if wide {
        HEADER.len() + HEADER_WIDE.len()
    } else {
        HEADER.len()
    };
    let (body, total) = model::table(snap, key);
    let header_cells: Vec<&str> = HEADER
        .iter()
        .chain(HEADER_WIDE.iter())
        .take(ncols)
        .copied()
        .collect();
    // Column widths: the widest of header and cells, so numbers never get cut.
    let widths: Vec<Constraint> = (0..ncols)
        .map(|c| {
            let w = body
                .iter()
                .chain(std::iter::once(&total))
                .map(|r| r[c].chars().count())
                .chain(std::iter::once(header_cells[c].len()))
                .max()
                .unwrap_or(4);
            Constraint::Length(w as u16)
        })
        .collect();
    // Text columns (address) left, numbers right, as in `top`.
    let row = |r: Vec<String>| {
        Row::new(r.into_iter().take(ncols).enumerate().map(|(c, v)| {
            let align = if c == 0 {
                Alignment::Left
            } else {
                Alignment::Right
            };
            Cell::from(Text::from(v).alignment(align))
        }))
    };
    let mut rows: Vec<Row> = body.into_iter().map(row).collect();
    rows.push(
        row(total).style(
            Style::default()
                .add_modifier(Modifier::BOLD)
                .fg(Color::Yellow),
        ),
    );
    let header = Row::new(header_cells.iter().enumerate().map(|(c, h)| {
        let align = if c == 0 {
            Alignment::Left
        } else {
            Alignment::Right
        };
        Cell::from(Text::from(*h).alignment(align))
    }));
    let t = Table::new(rows, widths)
        .header(header.style(Style::default().add_modifier(Modifier::REVERSED)))
        .column_spacing(2)
        .block(Block::bordered().title(" processes "));
    f.render_widget(t, table);

    let err_lines: Vec<Line> = snap
        .errors
        .iter()
        .map(|(a, e)| Line::styled(format!(" {a}: {e}"), Style::default().fg(Color::Red)))
        .collect();
    f.render_widget(Paragraph::new(err_lines), errors);
    f.render_widget(
        Paragraph::new(" q quit · sort: c conns  p cpu  m rss  o deliveries  l lag  i pid")
            .style(Style::default().fg(Color::DarkGray)),
        help,
    );
}
