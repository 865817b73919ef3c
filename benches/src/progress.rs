//! A progress line for long runs: when stderr is a terminal, a thread redraws one line (`\r`)
//! about once a second with the elapsed time and, for each counter (records acknowledged,
//! records read), how many of the total are done and the rate over the last second. When stderr
//! is not a terminal (CI, redirected output) nothing is printed and no thread is started.
//!
//! The line is erased when the [`Progress`] is dropped, so the report starts on a clean line.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time between two redraws.
const TICK: Duration = Duration::from_secs(1);

/// A counter shown on the progress line: its name (`acked`, `read`) and its running total.
#[derive(Debug, Clone)]
pub struct Counter {
    pub name: &'static str,
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

/// The progress line's thread, if stderr is a terminal. Dropping it stops the thread and
/// erases the line.
#[derive(Debug)]
pub struct Progress {
    running: Option<(Sender<()>, JoinHandle<()>)>,
}

impl Progress {
    /// Starts redrawing the line for `mode` if stderr is a terminal; `total` is the number of
    /// records each counter goes up to, if known.
    pub fn start(mode: &'static str, total: Option<u64>, counters: Vec<Counter>) -> Progress {
        if !std::io::stderr().is_terminal() || counters.is_empty() {
            return Progress { running: None };
        }
        let (stop, stopped) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || draw_until_stopped(mode, total, &counters, &stopped));
        Progress {
            // No thread, no progress line: the run itself does not need it.
            running: spawned.ok().map(|handle| (stop, handle)),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some((stop, handle)) = self.running.take() {
            drop(stop); // the thread sees the channel close, erases its line and returns
            let _ = handle.join();
        }
    }
}

fn draw_until_stopped(
    mode: &str,
    total: Option<u64>,
    counters: &[Counter],
    stopped: &mpsc::Receiver<()>,
) {
    let start = Instant::now();
    let mut last_at = start;
    let mut last: Vec<u64> = vec![0; counters.len()];
    let mut width: usize = 0;
    // Nothing is ever sent: the channel closes when the `Progress` is dropped.
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(TICK) {
        let now = Instant::now();
        let dt = now.saturating_duration_since(last_at).as_secs_f64();
        let shown: Vec<Shown> = counters
            .iter()
            .zip(&mut last)
            .map(|(c, last)| {
                let done = c.value.load(Ordering::Relaxed);
                let rate = if dt > 0.0 {
                    done.saturating_sub(*last) as f64 / dt
                } else {
                    0.0
                };
                *last = done;
                Shown {
                    name: c.name,
                    done,
                    rate,
                }
            })
            .collect();
        last_at = now;
        let text = line(mode, now.saturating_duration_since(start), total, &shown);
        // Pad over what is left of a longer previous line.
        let pad = width.saturating_sub(text.chars().count());
        width = text.chars().count();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{text}{:pad$}", "");
        let _ = err.flush();
    }
    if width > 0 {
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{:width$}\r", "");
        let _ = err.flush();
    }
}

/// One counter as the line shows it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Shown {
    name: &'static str,
    done: u64,
    /// Records per second over the last tick.
    rate: f64,
}

/// The longest line drawn: one that wraps on an 80-column terminal could not be overwritten.
const MAX_CHARS: usize = 79;

/// The text of the line, e.g. `end-to-end 12 s | acked 240.1k/1M 20.0k/s | read 239.8k/1M
/// (24%) 20.0k/s`: the percentage is that of the last counter (the one that ends the run).
fn line(mode: &str, elapsed: Duration, total: Option<u64>, counters: &[Shown]) -> String {
    let mut out = format!("{mode} {}", clock(elapsed));
    for (i, c) in counters.iter().enumerate() {
        let _ = write!(out, " | {} {}", c.name, count(c.done));
        if let Some(total) = total {
            let _ = write!(out, "/{}", count(total));
            if total > 0 && i + 1 == counters.len() {
                let pct = (c.done as f64 / total as f64 * 100.0).min(100.0);
                let _ = write!(out, " ({pct:.0}%)");
            }
        }
        let _ = write!(out, " {}/s", compact(c.rate));
    }
    match out.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => out[..cut].to_string(),
        None => out,
    }
}

/// A record count: exact below 100000, else `657.7k`, `1.178M`, `10M`.
fn count(n: u64) -> String {
    let trim = |s: String| s.trim_end_matches('0').trim_end_matches('.').to_string();
    if n < 100_000 {
        n.to_string()
    } else if n < 1_000_000 {
        format!("{}k", trim(format!("{:.1}", n as f64 / 1e3)))
    } else {
        format!("{}M", trim(format!("{:.3}", n as f64 / 1e6)))
    }
}

/// Elapsed time as `42 s` or `3 m 05 s`.
fn clock(elapsed: Duration) -> String {
    let s = elapsed.as_secs();
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} m {:02} s", s / 60, s % 60)
    }
}

/// A rate in few characters: `950`, `20.0k`, `1.25M`.
fn compact(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_shows_counts_totals_and_rates() {
        let counters = [
            Shown {
                name: "acked",
                done: 240_000,
                rate: 20_012.0,
            },
            Shown {
                name: "read",
                done: 239_812,
                rate: 19_990.0,
            },
        ];
        assert_eq!(
            line(
                "end-to-end",
                Duration::from_millis(12_400),
                Some(1_000_000),
                &counters
            ),
            "end-to-end 12 s | acked 240k/1M 20.0k/s | read 239.8k/1M (24%) 20.0k/s"
        );
        assert_eq!(
            line("consume", Duration::from_secs(185), None, &counters[1..]),
            "consume 3 m 05 s | read 239.8k 20.0k/s"
        );
        let big = Shown {
            name: "acked",
            done: 9_984_321,
            rate: 1_250_000.0,
        };
        let long = line(
            "end-to-end",
            Duration::from_secs(185),
            Some(10_000_000),
            &[
                big,
                Shown {
                    name: "read",
                    ..big
                },
            ],
        );
        assert!(long.chars().count() <= MAX_CHARS, "{long}");
        assert!(long.starts_with("end-to-end 3 m 05 s | acked 9.984M/10M 1.25M/s | read"));
        assert_eq!(count(99_999), "99999");
        assert_eq!(count(1_177_765), "1.178M");
        assert_eq!(count(1_000_000), "1M");
        let zero = Shown {
            name: "acked",
            done: 0,
            rate: 0.0,
        };
        assert_eq!(
            line("produce", Duration::ZERO, Some(0), &[zero]),
            "produce 0 s | acked 0/0 0/s"
        );
        assert_eq!(compact(1_250_000.0), "1.25M");
        assert_eq!(compact(950.4), "950");
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
