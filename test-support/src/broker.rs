//! Starts the real `lograil` binary on 127.0.0.1:0 and stops it gracefully or with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The `lograil` binary of this build. Cargo builds it for the integration tests of the
/// `lograil` package (the suites that start brokers are those) and names it in
/// `CARGO_BIN_EXE_lograil` when it builds them and (recent cargo) when it runs them; a test
/// binary run by an older cargo or by hand finds it where cargo put it, beside `deps/` holding
/// the test binary.
pub fn lograil_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("CARGO_BIN_EXE_lograil") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let beside_deps = exe
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join("lograil"));
    match beside_deps {
        Some(path) if path.is_file() => path,
        _ => panic!(
            "no lograil binary: CARGO_BIN_EXE_lograil is not set and there is none beside the \
             folder of {} (run the suite with cargo test)",
            exe.display()
        ),
    }
}

/// Runs `lograil <args>` (a CLI command) to its end: whether it succeeded, its stdout and stderr.
pub fn lograil(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(lograil_bin()).args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `lograil <args>`; fails the test (showing stderr) unless it succeeds; its stdout.
pub fn lograil_stdout(args: &[&str]) -> String {
    let (ok, out, err) = lograil(args);
    assert!(ok, "lograil {args:?}: {err}");
    out
}

/// A `lograil serve` process on a fresh port; killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct TestBroker {
    child: Option<Child>,
    /// `127.0.0.1:PORT`
    pub addr: String,
    /// `127.0.0.1:PORT` of `/metrics`, when started with `--metrics-listen`.
    pub metrics_addr: Option<String>,
    /// `127.0.0.1:PORT` of the web console, when started with `--console-listen`.
    pub console_addr: Option<String>,
    /// With `--listeners`: each listener's name and `127.0.0.1:PORT`, in the order given.
    pub listeners: Vec<(String, String)>,
    /// The broker's `--data-dir`; [`TestBroker::restart`] starts on it again.
    pub data_dir: PathBuf,
    /// Where the log lines go, when not beside the data dir.
    log: Option<PathBuf>,
    args: Vec<String>,
    /// The address to listen on again ([`TestBroker::restart_at_same_address`]).
    same_address: Option<String>,
    /// The temporary folder of the data dir, for a broker from [`TestBroker::start_temp`];
    /// removed after the process is gone (fields drop after `drop`).
    _tmp: Option<tempfile::TempDir>,
}

impl TestBroker {
    /// Starts a broker on a fresh port with its data in `data_dir` and extra `serve` flags.
    pub fn start(data_dir: &Path, args: &[&str]) -> TestBroker {
        TestBroker::launched(data_dir.to_path_buf(), args, None, None)
    }

    /// Starts a broker as [`TestBroker::start`] does, on a data dir of its own in a temporary
    /// folder that goes with it (`data_dir` is `<tmp>/data`, the log `<tmp>/data.broker.log`).
    pub fn start_temp(args: &[&str]) -> TestBroker {
        let tmp = tempfile::tempdir().unwrap();
        TestBroker::launched(tmp.path().join("data"), args, Some(tmp), None)
    }

    /// As [`TestBroker::start`], its log lines in `log`: for a data dir on a file system
    /// that loses what was not synced ([`crate::PowerCutFs`]).
    pub fn start_logging_to(data_dir: &Path, log: &Path, args: &[&str]) -> TestBroker {
        TestBroker::launched(data_dir.to_path_buf(), args, None, Some(log.to_path_buf()))
    }

    fn launched(
        data_dir: PathBuf,
        args: &[&str],
        tmp: Option<tempfile::TempDir>,
        log: Option<PathBuf>,
    ) -> TestBroker {
        let mut broker = TestBroker {
            child: None,
            addr: String::new(),
            metrics_addr: None,
            console_addr: None,
            listeners: Vec::new(),
            data_dir,
            log,
            args: args.iter().map(|s| s.to_string()).collect(),
            same_address: None,
            _tmp: tmp,
        };
        broker.launch();
        broker
    }

    fn launch(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("broker log file");
        let mut command = Command::new(lograil_bin());
        command.arg("serve");
        if !self.args.iter().any(|a| a == "--listeners") {
            command
                .arg("--listen")
                .arg(self.same_address.as_deref().unwrap_or("127.0.0.1:0"));
        }
        let mut child = command
            .arg("--data-dir")
            .arg(&self.data_dir)
            .args(&self.args)
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn lograil");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("lograil printed no start-up line within 30 s");
        let addr = line
            .split_whitespace()
            .find(|w| w.starts_with("127.0.0.1:"))
            .unwrap_or_else(|| panic!("no address in start-up line {line:?}"));
        self.addr = addr.trim_end_matches(',').to_string();
        // "127.0.0.1:P1 (NAME1), 127.0.0.1:P2 (NAME2)" with --listeners.
        let words: Vec<&str> = line.split_whitespace().collect();
        self.listeners = words
            .windows(2)
            .filter(|w| w[0].starts_with("127.0.0.1:") && w[1].starts_with('('))
            .map(|w| {
                let name = w[1]
                    .trim_end_matches(',')
                    .trim_matches(|c| c == '(' || c == ')');
                (name.to_string(), w[0].to_string())
            })
            .collect();
        // "…, metrics at http://ADDR/metrics, console at http://ADDR/" (https with TLS)
        let urls = || {
            line.split_whitespace().filter_map(|w| {
                let w = w.trim_end_matches(',');
                w.strip_prefix("http://")
                    .or_else(|| w.strip_prefix("https://"))
            })
        };
        self.metrics_addr = urls().find_map(|w| w.strip_suffix("/metrics").map(str::to_string));
        self.console_addr = urls().find_map(|w| {
            let addr = w.strip_suffix('/')?;
            (!addr.contains('/')).then(|| addr.to_string())
        });
        self.child = Some(child);
    }

    /// The address of listener `name` (started with `--listeners`).
    pub fn listener(&self, name: &str) -> &str {
        self.listeners
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, addr)| addr.as_str())
            .unwrap_or_else(|| panic!("no listener {name} in {:?}", self.listeners))
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("broker running").id()
    }

    /// Where the broker's log lines (stderr) go.
    pub fn log_path(&self) -> PathBuf {
        self.log
            .clone()
            .unwrap_or_else(|| self.data_dir.with_extension("broker.log"))
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let status = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status()
                .expect("kill -TERM");
            assert!(status.success());
            let status = wait_with_timeout(&mut child, Duration::from_secs(30));
            assert!(
                status.success(),
                "lograil exited with {status} after SIGTERM"
            );
        }
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().expect("SIGKILL");
            let _ = child.wait();
        }
    }

    /// Starts again on the same data dir (a new port).
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop or kill the broker first");
        self.same_address = None;
        self.launch();
    }

    /// Starts again on the same data dir and the same address, so clients that were
    /// connected reconnect to it as to a broker back from a crash (without `--listeners`).
    pub fn restart_at_same_address(&mut self) {
        assert!(self.child.is_none(), "stop or kill the broker first");
        self.same_address = Some(self.addr.clone());
        self.launch();
    }
}

fn wait_with_timeout(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("lograil did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Drop for TestBroker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
