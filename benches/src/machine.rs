//! What the figures were measured on: CPU model, cores, memory and kernel from /proc, and the
//! git revision of the working directory (if it is a git checkout).

use std::process::Command;

use serde::Serialize;

/// The machine and source revision a run happened on.
#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    /// The first `model name` of /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// Logical CPUs this process may run on.
    pub cores: usize,
    /// `MemTotal` of /proc/meminfo, in bytes.
    pub memory_bytes: Option<u64>,
    /// Kernel release (/proc/sys/kernel/osrelease).
    pub kernel: Option<String>,
    /// `git rev-parse HEAD` in the current directory.
    pub git_revision: Option<String>,
    /// Tracked files differ from HEAD (`git status --porcelain --untracked-files=no`).
    pub git_dirty: Option<bool>,
}

impl Machine {
    /// Reads /proc and asks git; anything unavailable is `None`.
    pub fn detect() -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Machine {
            cpu_model: cpu_model(&cpuinfo),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_bytes: mem_total_bytes(&meminfo),
            kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .map(|s| s.trim().to_string()),
            git_revision: git(&["rev-parse", "HEAD"]),
            git_dirty: git(&["status", "--porcelain", "--untracked-files=no"])
                .map(|s| !s.is_empty()),
        }
    }

    /// One line for the human report.
    pub fn describe(&self) -> String {
        let mem = self.memory_bytes.map_or("? GiB".to_string(), |b| {
            format!("{:.1} GiB", crate::units::gib(b))
        });
        let rev = match (&self.git_revision, self.git_dirty) {
            (Some(r), Some(true)) => format!("{} (dirty)", &r[..r.len().min(12)]),
            (Some(r), _) => r[..r.len().min(12)].to_string(),
            _ => "no git".to_string(),
        };
        format!(
            "{} x {}, {}, Linux {}, git {}",
            self.cores,
            self.cpu_model.as_deref().unwrap_or("unknown CPU"),
            mem,
            self.kernel.as_deref().unwrap_or("?"),
            rev
        )
    }
}

fn cpu_model(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        (name.trim() == "model name").then(|| value.trim().to_string())
    })
}

fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let kib: u64 = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
        Some(kib * 1024)
    })
}

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo_and_meminfo() {
        let cpuinfo = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("AMD EPYC 7B13"));
        assert_eq!(cpu_model("processor : 0\n"), None);
        let meminfo = "MemTotal:       24578000 kB\nMemFree:        1 kB\n";
        assert_eq!(mem_total_bytes(meminfo), Some(24_578_000 * 1024));
    }

    #[test]
    fn detect_never_fails() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(!m.describe().is_empty());
    }
}
