//! The Java programs as child processes: built once, started with a lean JVM, their stdout
//! lines collected, waited on, stopped (SIGTERM, as a service stops) or killed (SIGKILL).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// One JVM at a time: the tests hold this while their programs run.
pub static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The classpath of `tests/ecosystem/java` (its jar and `target/lib/*`), built when stale;
/// `None` (with the reason printed) without `java` or `mvn`.
pub fn classpath() -> Option<String> {
    static CLASSPATH: OnceLock<Option<String>> = OnceLock::new();
    CLASSPATH
        .get_or_init(|| {
            let dir = test_support::java::built("ecosystem", "Kafka Streams and Connect")?;
            let target = dir.join("java/target");
            Some(format!(
                "{}:{}/*",
                target.join("ecosystem.jar").display(),
                target.join("lib").display()
            ))
        })
        .clone()
}

/// A running Java program.
pub struct JavaApp {
    name: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: PathBuf,
}

impl JavaApp {
    /// Starts `class` with `args`; its stderr (the client logs) goes to `<log_dir>/<name>.log`,
    /// or under `LOGRAIL_TEST_JAVA_LOGS` (a directory kept after the test) when set.
    /// `LOGRAIL_TEST_JAVA_LOG` sets the log level (default `warn`).
    pub fn start(
        name: &str,
        classpath: &str,
        class: &str,
        args: &[String],
        log_dir: &Path,
    ) -> JavaApp {
        let log_dir = std::env::var_os("LOGRAIL_TEST_JAVA_LOGS")
            .map_or_else(|| log_dir.to_path_buf(), PathBuf::from);
        let stderr = log_dir.join(format!("{name}.log"));
        let level = std::env::var("LOGRAIL_TEST_JAVA_LOG").unwrap_or_else(|_| "warn".to_string());
        let mut child = Command::new("java")
            // A lean start: no JIT tiers beyond C1, the serial collector.
            .args([
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-Xss512k",
                "-Xmx512m",
            ])
            .arg(format!("-Dorg.slf4j.simpleLogger.defaultLogLevel={level}"))
            .arg("-Dorg.slf4j.simpleLogger.showDateTime=true")
            .arg("-cp")
            .arg(classpath)
            .arg(class)
            .args(args)
            .env_remove("LD_LIBRARY_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("java starts");
        let lines = test_support::process::collect_lines(child.stdout.take().unwrap());
        JavaApp {
            name: name.to_string(),
            child,
            lines,
            stderr,
        }
    }

    pub fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits until `check` holds (checked every 100 ms), at most `secs`; panics with what the
    /// program printed if it does not, or if the program exits first.
    pub async fn wait(&mut self, what: &str, secs: u64, mut check: impl FnMut(&[String]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if check(&self.lines()) {
                return;
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                if check(&self.lines()) {
                    return;
                }
                self.fail(&format!("exited ({status}) before {what}"));
            }
            if Instant::now() > deadline {
                self.fail(&format!("no {what} in {secs} s"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Panics (with its output) if the program has exited.
    pub fn alive(&mut self) {
        if let Some(status) = self.child.try_wait().unwrap() {
            self.fail(&format!("exited ({status})"));
        }
    }

    /// Panics with `why`, the program's stdout and the end of its log.
    pub fn fail(&self, why: &str) -> ! {
        panic!("{}: {why}\n{}", self.name, self.output());
    }

    /// Its stdout and the last lines of its log, for failure messages.
    pub fn output(&self) -> String {
        let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        format!(
            "stdout:\n{}\nlog {} (last lines):\n{}",
            self.lines().join("\n"),
            self.stderr.display(),
            tail.join("\n")
        )
    }

    /// SIGTERM, as a service is stopped (the JVM's shutdown hooks close the program), and waits
    /// until it has exited.
    pub async fn stop(&mut self) {
        signal(self.child.id(), "TERM");
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.child.try_wait().unwrap().is_none() {
            if Instant::now() > deadline {
                self.fail("still running 60 s after SIGTERM");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL: no shutdown hook, nothing flushed or committed.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for JavaApp {
    fn drop(&mut self) {
        self.kill();
    }
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}
