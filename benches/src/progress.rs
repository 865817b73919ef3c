//! Progress lines for long runs, drawn by indicatif: when stderr is a terminal, one line per
//! counter (records acknowledged, records read) with the elapsed time, how many of the total are
//! done and the rate (indicatif's moving average: 90% of its weight on the last 15 s), updated
//! about once a second. When stderr is not a terminal (CI, redirected output) nothing is drawn
//! and no thread is started.
//!
//! The lines are cleared when the [`Progress`] is dropped, so the report starts on a clean line.

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Time between two updates.
const TICK: Duration = Duration::from_secs(1);

/// A line when the total is known, e.g.
/// `end-to-end 00:00:12 read  [#######>-------] 239,812/1,000,000 (24%) 19,990/s`: the bar takes
/// what the terminal's width leaves, so the line does not wrap.
const WITH_TOTAL: &str =
    "{prefix} {elapsed_precise} {msg:5} [{wide_bar}] {human_pos}/{human_len} ({percent}%) {per_sec:0}";
/// A line when it is not (a run bounded by time): `produce 00:03:05 acked 3,702,221 20,012/s`.
const WITHOUT_TOTAL: &str = "{prefix} {elapsed_precise} {msg:5} {human_pos} {per_sec:0}";

/// A counter shown on the progress line: its name (`acked`, `read`) and its running total.
#[derive(Debug, Clone)]
pub struct Counter {
    /// The label on the line (`acked`, `read`).
    pub name: &'static str,
    /// The running total, shared with the clients that count it; read once a second.
    pub value: Arc<AtomicU64>,
}

impl Counter {
    /// A counter named `name` reading `value`.
    pub fn new(name: &'static str, value: &Arc<AtomicU64>) -> Counter {
        Counter {
            name,
            value: value.clone(),
        }
    }
}

/// The progress lines and the thread that copies the counters into them, if stderr is a
/// terminal. Dropping it stops the thread and clears the lines.
#[derive(Debug)]
pub struct Progress {
    running: Option<(Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    /// Starts drawing a line per counter for `mode` if stderr is a terminal; `total` is the
    /// number of records each counter goes up to, if known.
    pub fn start(mode: &'static str, total: Option<u64>, counters: Vec<Counter>) -> Progress {
        if !std::io::stderr().is_terminal() || counters.is_empty() {
            return Progress { running: None };
        }
        let bars = Bars::new(ProgressDrawTarget::stderr(), mode, total, counters);
        let (stop, stopped) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                // Nothing is ever sent: the channel closes when the `Progress` is dropped.
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
                    bars.update();
                }
                bars.clear();
            });
        Progress {
            // No thread, no progress lines: the run itself does not need them.
            running: spawned.ok().map(|handle| (stop, handle)),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((stop, handle)) = self.running.take() {
            drop(stop); // the thread sees the channel close, clears the lines and returns
            let _ = handle.join();
        }
    }
}

/// One bar per counter, drawn together.
#[derive(Debug)]
struct Bars {
    lines: MultiProgress,
    bars: Vec<(ProgressBar, Counter)>,
}

impl Bars {
    fn new(
        target: ProgressDrawTarget,
        mode: &'static str,
        total: Option<u64>,
        counters: Vec<Counter>,
    ) -> Bars {
        let lines = MultiProgress::with_draw_target(target);
        let template = if total.is_some() {
            WITH_TOTAL
        } else {
            WITHOUT_TOTAL
        };
        // The templates are constants (a test parses them); the default is only a fallback.
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("#>-");
        let bars = counters
            .into_iter()
            .map(|counter| {
                let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::hidden())
                    .with_style(style.clone())
                    .with_prefix(mode)
                    .with_message(counter.name);
                (lines.add(bar), counter)
            })
            .collect();
        Bars { lines, bars }
    }

    /// Copies each counter into its bar, which redraws the lines.
    fn update(&self) {
        for (bar, counter) in &self.bars {
            bar.set_position(counter.value.load(Ordering::Relaxed));
        }
    }

    fn clear(&self) {
        for (bar, _) in &self.bars {
            bar.finish_and_clear();
        }
        let _ = self.lines.clear();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use indicatif::TermLike;

    use super::*;

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Clone, Default)]
    struct Screen(Arc<Mutex<Vec<String>>>);

    impl Screen {
        fn lines(&self) -> Vec<String> {
            self.0.lock().unwrap().clone()
        }
    }

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            120
        }
        fn move_cursor_up(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> std::io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> std::io::Result<()> {
            self.write_str(s)
        }
        fn write_str(&self, s: &str) -> std::io::Result<()> {
            if !s.is_empty() {
                self.0.lock().unwrap().push(s.to_string());
            }
            Ok(())
        }
        fn clear_line(&self) -> std::io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn templates_parse() {
        for template in [WITH_TOTAL, WITHOUT_TOTAL] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }

    #[test]
    fn a_line_per_counter_with_counts_totals_and_percentages() {
        let (acked, read) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let screen = Screen::default();
        let bars = Bars::new(
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
            "end-to-end",
            Some(1_000_000),
            vec![Counter::new("acked", &acked), Counter::new("read", &read)],
        );
        acked.store(240_000, Ordering::Relaxed);
        read.store(239_812, Ordering::Relaxed);
        bars.update();
        let drawn = screen.lines();
        let line = |name: &str| {
            drawn
                .iter()
                .rfind(|l| l.contains(name))
                .unwrap_or_else(|| panic!("no {name} line in {drawn:?}"))
                .clone()
        };
        let (acked_line, read_line) = (line("acked"), line("read"));
        assert!(
            acked_line.starts_with("end-to-end 00:00:00 acked [#######"),
            "{acked_line}"
        );
        assert!(
            acked_line.contains("] 240,000/1,000,000 (24%) "),
            "{acked_line}"
        );
        assert!(read_line.contains("read  [") && read_line.contains(" 239,812/1,000,000 (24%) "));
        assert!(acked_line.ends_with("/s") && read_line.ends_with("/s"));
    }

    #[test]
    fn without_a_total_the_count_and_rate_only() {
        let acked = Arc::new(AtomicU64::new(3_702_221));
        let screen = Screen::default();
        let bars = Bars::new(
            ProgressDrawTarget::term_like(Box::new(screen.clone())),
            "produce",
            None,
            vec![Counter::new("acked", &acked)],
        );
        bars.update();
        let drawn = screen.lines();
        assert!(
            drawn
                .iter()
                .any(|l| l.starts_with("produce 00:00:00 acked 3,702,221 ")),
            "{drawn:?}"
        );
    }

    #[test]
    fn no_terminal_no_thread() {
        // Under `cargo test` stderr is captured or redirected far more often than not; either
        // way starting and dropping must not hang or panic.
        let value = Arc::new(AtomicU64::new(0));
        let p = Progress::start("produce", Some(10), vec![Counter::new("acked", &value)]);
        if !std::io::stderr().is_terminal() {
            assert!(p.running.is_none());
        }
        drop(p);
    }
}
