//! CPU time and peak memory of a process from /proc: the broker's cost (`--broker-pid`) and the
//! harness's own, so a run can say where the CPU went.

use std::process::Command;
use std::sync::OnceLock;

use anyhow::{bail, Context};
use serde::Serialize;

/// CPU time a process has used so far (user + system), from /proc/PID/stat.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuTime {
    /// Seconds of CPU in user mode (utime).
    pub user_s: f64,
    /// Seconds of CPU in the kernel (stime).
    pub system_s: f64,
}

impl CpuTime {
    /// Reads /proc/`pid`/stat (`None`: this process, /proc/self).
    pub fn of(pid: Option<u32>) -> anyhow::Result<CpuTime> {
        let path = match pid {
            Some(pid) => format!("/proc/{pid}/stat"),
            None => "/proc/self/stat".to_string(),
        };
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        parse_stat(&text, clock_ticks_per_second()).with_context(|| format!("parsing {path}"))
    }

    /// Seconds of CPU, user and system together.
    pub fn total_s(&self) -> f64 {
        self.user_s + self.system_s
    }

    /// CPU used since `earlier`.
    pub fn since(&self, earlier: &CpuTime) -> CpuTime {
        CpuTime {
            user_s: self.user_s - earlier.user_s,
            system_s: self.system_s - earlier.system_s,
        }
    }
}

/// Fields 14 and 15 (utime, stime) of /proc/PID/stat, in clock ticks. The command name (field
/// 2) may hold spaces and parentheses, so fields are counted after its last ')'.
fn parse_stat(text: &str, ticks_per_s: f64) -> anyhow::Result<CpuTime> {
    let after_comm = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .context("no ')' after the command name")?;
    // After ')' come field 3 (state), 4, ...: utime is field 14, i.e. index 11 here.
    let fields: Vec<&str> = after_comm.split_whitespace().collect();
    if fields.len() < 13 {
        bail!("only {} fields after the command name", fields.len());
    }
    let utime: u64 = fields[11].parse().context("utime")?;
    let stime: u64 = fields[12].parse().context("stime")?;
    Ok(CpuTime {
        user_s: utime as f64 / ticks_per_s,
        system_s: stime as f64 / ticks_per_s,
    })
}

/// `getconf CLK_TCK` (USER_HZ), 100 when that fails: the unit of /proc/PID/stat times.
fn clock_ticks_per_second() -> f64 {
    static TICKS: OnceLock<f64> = OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<f64>()
                    .ok()
            })
            .filter(|t| *t > 0.0)
            .unwrap_or(100.0)
    })
}

/// Peak resident set size (VmHWM) of a process, in bytes, from /proc/PID/status.
pub fn peak_rss_bytes(pid: Option<u32>) -> anyhow::Result<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_string(),
    };
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    parse_vm_hwm(&text).with_context(|| format!("no VmHWM line in {path}"))
}

fn parse_vm_hwm(status: &str) -> Option<u64> {
    status.lines().find_map(|line| {
        let rest = line.strip_prefix("VmHWM:")?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

/// CPU used by a process during a run, per GiB the run moved, and its peak RSS.
#[derive(Debug, Clone, Serialize)]
pub struct ProcessCost {
    /// The process measured; `None`: the harness itself.
    pub pid: Option<u32>,
    /// Seconds of CPU in user mode during the run.
    pub user_s: f64,
    /// Seconds of CPU in the kernel during the run.
    pub system_s: f64,
    /// `user_s + system_s`.
    pub cpu_s: f64,
    /// CPU seconds per GiB of record values moved (produced, or fetched for `consume`).
    pub cpu_s_per_gib: f64,
    /// Average CPU cores busy over the run's wall time.
    pub cores_busy: f64,
    /// Peak resident set size (VmHWM) over the process's whole life, not only
    /// the run, in bytes; `None` if /proc/PID/status could not be read.
    pub peak_rss_bytes: Option<u64>,
}

/// Samples a process's CPU at the start of the measured phase; [`CostProbe::finish`] turns it
/// into a [`ProcessCost`].
#[derive(Debug, Clone)]
pub struct CostProbe {
    pid: Option<u32>,
    start: CpuTime,
}

impl CostProbe {
    /// Starts measuring process `pid` (`None`: this process).
    pub fn start(pid: Option<u32>) -> anyhow::Result<CostProbe> {
        Ok(CostProbe {
            pid,
            start: CpuTime::of(pid)?,
        })
    }

    /// The CPU used since [`CostProbe::start`], per GiB of `bytes` moved in `wall_s` seconds.
    pub fn finish(&self, bytes: u64, wall_s: f64) -> anyhow::Result<ProcessCost> {
        let used = CpuTime::of(self.pid)?.since(&self.start);
        let gib = crate::units::gib(bytes);
        Ok(ProcessCost {
            pid: self.pid,
            user_s: used.user_s,
            system_s: used.system_s,
            cpu_s: used.total_s(),
            cpu_s_per_gib: if gib > 0.0 { used.total_s() / gib } else { 0.0 },
            cores_busy: if wall_s > 0.0 {
                used.total_s() / wall_s
            } else {
                0.0
            },
            peak_rss_bytes: peak_rss_bytes(self.pid).ok(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_a_tricky_command_name() {
        let stat = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 \
                    9 0 123 456789 100 18446744073709551615";
        let cpu = parse_stat(stat, 100.0).unwrap();
        assert_eq!(cpu.user_s, 2.5);
        assert_eq!(cpu.system_s, 0.75);
        assert!(parse_stat("1 (x) S 1 2", 100.0).is_err());
        assert!(parse_stat("no parenthesis", 100.0).is_err());
    }

    #[test]
    fn parses_vm_hwm() {
        let status = "Name:\tlograil\nVmPeak:\t 100 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(2048 * 1024));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    fn own_process_is_readable() {
        let probe = CostProbe::start(None).unwrap();
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let cost = probe.finish(1 << 30, 1.0).unwrap();
        assert!(cost.cpu_s >= 0.0);
        assert!(cost.peak_rss_bytes.unwrap_or(0) > 0);
    }
}
