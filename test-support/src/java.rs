//! The Java programs some suites run (Spring Kafka, Kafka Streams and Connect, MirrorMaker 2):
//! whether a JDK and Maven are here, and a program's `build.sh` run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tools of `java` and `mvn` missing from PATH, as one reason ("java and mvn on PATH");
/// `None` when both run.
pub fn missing_tools() -> Option<String> {
    let runs = |tool: &str, arg: &str| {
        Command::new(tool)
            .arg(arg)
            .env_remove("LD_LIBRARY_PATH")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let missing: Vec<&str> = [("java", "-version"), ("mvn", "-v")]
        .into_iter()
        .filter(|(tool, arg)| !runs(tool, arg))
        .map(|(tool, _)| tool)
        .collect();
    (!missing.is_empty()).then(|| format!("{} on PATH", missing.join(" and ")))
}

/// `tests/<name>/`, built by its `build.sh` (a no-op when up to date); `None`, with the reason
/// printed, without a JDK and Maven (`needs` says what needs them).
pub fn built(name: &str, needs: &str) -> Option<PathBuf> {
    if let Some(missing) = missing_tools() {
        eprintln!("skipped: no {missing} ({needs} needs a JDK and Maven)");
        return None;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests")
        .join(name);
    let status = Command::new(dir.join("build.sh"))
        .env_remove("LD_LIBRARY_PATH")
        .status()
        .unwrap_or_else(|e| panic!("tests/{name}/build.sh runs: {e}"));
    assert!(status.success(), "tests/{name}/build.sh: {status}");
    Some(dir)
}
