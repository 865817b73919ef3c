//! The live table: one line a second while the story runs, its header again every 20 lines;
//! the phase is coloured on a terminal and plain text otherwise.

use std::io::Write;

use super::plan::TENANTS;
use super::queue::GROUPS;
use super::stats::{Row, Waits};

/// Where the table goes and how.
pub struct Table {
    out: Box<dyn Write + Send>,
    color: bool,
    lines: usize,
}

impl Table {
    /// To stdout, or to stderr when stdout carries the JSON summary.
    pub fn new(to_stderr: bool) -> Table {
        use std::io::IsTerminal;
        let (out, color): (Box<dyn Write + Send>, bool) = if to_stderr {
            (Box::new(std::io::stderr()), std::io::stderr().is_terminal())
        } else {
            (Box::new(std::io::stdout()), std::io::stdout().is_terminal())
        };
        Table {
            out,
            color,
            lines: 0,
        }
    }

    /// Prints a line of text as is.
    pub fn say(&mut self, text: &str) -> std::io::Result<()> {
        writeln!(self.out, "{text}")?;
        self.out.flush()
    }

    /// Prints the row of one second.
    pub fn row(&mut self, row: &Row) -> std::io::Result<()> {
        if self.lines.is_multiple_of(20) {
            writeln!(self.out, "{}", header())?;
        }
        self.lines += 1;
        let text = line(row, self.color);
        writeln!(self.out, "{text}")?;
        self.out.flush()
    }
}

fn header() -> String {
    let tenants = TENANTS.join(" ");
    let groups: Vec<String> = GROUPS
        .iter()
        .map(|g| format!("{}: {tenants}", g.label))
        .collect();
    format!(
        "{:>4} {:>6} {:>6} {:>7} {:>4} {:>6}  {:<7} | wait p50/p99 ms  {}",
        "t",
        "sent",
        "done",
        "retried",
        "dead",
        "lag s",
        "phase",
        groups.join(" | ")
    )
}

fn cell(w: &Waits) -> String {
    if w.count == 0 {
        "-".to_string()
    } else {
        format!("{}/{}", w.p50, w.p99)
    }
}

/// The phase word: the flood, the outage, the chain paused by it.
pub fn phase(row: &Row) -> &'static str {
    match (row.flooding, row.down, row.paused) {
        (_, _, true) => "paused",
        (_, true, _) => "outage",
        (true, _, _) => "flood",
        _ => "",
    }
}

fn line(row: &Row, color: bool) -> String {
    let lag = row
        .lag_seconds
        .map_or_else(|| "-".to_string(), |s| format!("{s:.1}"));
    let phase = phase(row);
    let shown = match (color, phase) {
        (false, _) | (_, "") => format!("{phase:<7}"),
        (true, "flood") => format!("\x1b[33m{phase:<7}\x1b[0m"),
        (true, _) => format!("\x1b[31m{phase:<7}\x1b[0m"),
    };
    let groups: Vec<String> = GROUPS
        .iter()
        .zip(&row.waits)
        .map(|(g, waits)| {
            let cells: Vec<String> = waits.iter().map(cell).collect();
            format!("{}: {}", g.label, cells.join(" "))
        })
        .collect();
    format!(
        "{:>3}s {:>6} {:>6} {:>7} {:>4} {:>6}  {shown} | {}",
        row.t,
        row.produced,
        row.completed,
        row.retried,
        row.dead_lettered,
        lag,
        groups.join(" | ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_one_plain_line_with_each_groups_tenants() {
        let w = Waits {
            count: 3,
            p50: 12,
            p99: 40,
            max: 41,
        };
        let row = Row {
            t: 7,
            produced: 100,
            completed: 90,
            retried: 2,
            dead_lettered: 1,
            lag_seconds: Some(0.3),
            flooding: true,
            waits: vec![vec![w, Waits::default(), w], vec![w, w, w]],
            ..Row::default()
        };
        let text = line(&row, false);
        assert!(!text.contains('\x1b') && !text.contains('\n'), "{text}");
        assert!(text.contains("flood"), "{text}");
        assert!(
            text.contains("fair: 12/40 - 12/40 | fifo: 12/40 12/40 12/40"),
            "{text}"
        );
        assert!(
            text.starts_with("  7s    100     90       2    1    0.3"),
            "{text}"
        );
        assert!(line(&row, true).contains("\x1b[33m"));
    }
}
