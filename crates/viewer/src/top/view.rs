//! Drawing of `myriad top` with ratatui: title, machine line, the process table with a
//! totals row, errors and the key help. Pure drawing from a [`Snapshot`]; no fetching.

use ratatui::layout::{Alignment, Constraint, Layout};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Cell, Paragraph, Row, Table, Wrap};
use ratatui::Frame;

use super::model::{Snapshot, SortKey};
use super::table::{self, GAP, HEADER};

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
    let m: Vec<Line> = match &snap.machine {
        Some(m) => table::machine_lines(m)
            .into_iter()
            .map(|l| Line::raw(format!(" {l}")))
            .collect(),
        None => vec![Line::raw(" machine: no answer yet")],
    };
    f.render_widget(Paragraph::new(m).wrap(Wrap { trim: true }), machine);

    let (body, total) = table::table(snap, key);
    // Column widths: the widest of header and cells, so numbers never get cut; columns
    // that do not fit inside the border leave, least important first.
    let all_widths = table::column_widths(
        &body
            .iter()
            .chain(std::iter::once(&total))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let shown = table::fit_columns(&all_widths, area.width.saturating_sub(2) as usize);
    let widths: Vec<Constraint> = shown
        .iter()
        .map(|&c| Constraint::Length(all_widths[c] as u16))
        .collect();
    let header_cells: Vec<&str> = shown.iter().map(|&c| HEADER[c]).collect();
    // Text columns (address) left, numbers right, as in `top`.
    let row = |r: Vec<String>| {
        Row::new(shown.iter().map(|&c| {
            let align = if c == 0 {
                Alignment::Left
            } else {
                Alignment::Right
            };
            Cell::from(Text::from(r[c].clone()).alignment(align))
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
        .column_spacing(GAP as u16)
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
