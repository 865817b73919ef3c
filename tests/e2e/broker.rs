//! Starts the real `lograil` binary on 127.0.0.1:0 and stops it gracefully or with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct TestBroker {
    child: Option<Child>,
    /// `127.0.0.1:PORT`
    pub addr: String,
    /// `127.0.0.1:PORT` of `/metrics`, when started with `--metrics-listen`.
    pub metrics_addr: Option<String>,
    pub data_dir: PathBuf,
    args: Vec<String>,
}

impl TestBroker {
    /// Starts a broker on a fresh port with its data in `data_dir` and extra `serve` flags.
    pub fn start(data_dir: &Path, args: &[&str]) -> TestBroker {
        let mut broker = TestBroker {
            child: None,
            addr: String::new(),
            metrics_addr: None,
            data_dir: data_dir.to_path_buf(),
            args: args.iter().map(|s| s.to_string()).collect(),
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
        let mut child = Command::new(env!("CARGO_BIN_EXE_lograil"))
            .arg("serve")
            .arg("--listen")
            .arg("127.0.0.1:0")
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
        self.addr = addr.to_string();
        self.metrics_addr = line.split_whitespace().find_map(|w| {
            w.strip_prefix("http://")
                .and_then(|w| w.strip_suffix("/metrics"))
                .map(str::to_string)
        });
        self.child = Some(child);
    }

    /// The broker's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("broker running").id()
    }

    /// Where the broker's log lines (stderr) go.
    pub fn log_path(&self) -> PathBuf {
        self.data_dir.with_extension("broker.log")
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
