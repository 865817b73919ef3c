//! The docs' shell blocks, run as written. Every ```sh block of README.md and docs/*.md (a page
//! added to docs/ is picked up) runs, page by page, in one bash (`set -euo pipefail`) per page:
//! in a temporary directory, against a fresh broker whose address replaces `127.0.0.1:9092`,
//! with this build's `lograil` first on PATH and Kafka's `bin/` scripts (`kafka-configs.sh`, ...)
//! run from the jars of `tests/kafka/kafka.sh fetch`. A block that cannot run there carries
//! `<!-- not run: REASON -->` on the line above it; those are counted and printed. A page may
//! name its broker's flags once: `<!-- broker flags: --authorizer-class-name acl -->`.
//! A block that fails fails the test with its page, its line and its output.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::external_clients::require;
use test_support::broker::lograil_bin;
use test_support::TestBroker;

/// The address the docs write; each page's broker's replaces it.
const DOCS_ADDR: &str = "127.0.0.1:9092";
/// Seconds one page's blocks may take together (a JVM tool run takes 1-3 s).
const PAGE_TIMEOUT_S: u32 = 180;
/// Pages run at once.
const WORKERS: usize = 3;

/// Kafka's `bin/` scripts the docs use, as the main classes `tests/kafka/kafka.sh tool` runs.
const KAFKA_SCRIPTS: &[(&str, &str)] = &[
    ("kafka-topics.sh", "org.apache.kafka.tools.TopicCommand"),
    ("kafka-configs.sh", "org.apache.kafka.tools.ConfigCommand"),
    (
        "kafka-consumer-groups.sh",
        "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    ),
    (
        "kafka-get-offsets.sh",
        "org.apache.kafka.tools.GetOffsetShell",
    ),
    (
        "kafka-delete-records.sh",
        "org.apache.kafka.tools.DeleteRecordsCommand",
    ),
    ("kafka-log-dirs.sh", "org.apache.kafka.tools.LogDirsCommand"),
    ("kafka-cluster.sh", "org.apache.kafka.tools.ClusterTool"),
    (
        "kafka-transactions.sh",
        "org.apache.kafka.tools.TransactionsCommand",
    ),
    ("kafka-acls.sh", "org.apache.kafka.tools.AclCommand"),
    (
        "kafka-console-producer.sh",
        "org.apache.kafka.tools.ConsoleProducer",
    ),
    (
        "kafka-console-consumer.sh",
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
    ),
    (
        "kafka-console-share-consumer.sh",
        "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    ),
];

/// The `lograil` subcommands that are Kafka clients: without `--bootstrap-server` they talk to
/// 127.0.0.1:9092, so the page's broker is given to them (`demo` starts a broker of its own).
const CLIENT_COMMANDS: &str = "topic|group|queue|dlt|quota|produce|consume";

/// A shell block of a page.
#[derive(Debug, PartialEq)]
struct Block {
    /// The line of its opening fence (1-based).
    line: usize,
    code: String,
    /// Why it is not run, from the marker above it.
    not_run: Option<String>,
}

#[derive(Debug, PartialEq)]
struct Page {
    blocks: Vec<Block>,
    /// `lograil serve` flags of the page's broker.
    broker_flags: Vec<String>,
}

const NOT_RUN: &str = "<!-- not run:";
const BROKER_FLAGS: &str = "<!-- broker flags:";

/// The text of a one-line HTML comment starting with `prefix`.
fn comment<'a>(line: &'a str, prefix: &str) -> Option<&'a str> {
    line.trim()
        .strip_prefix(prefix)?
        .strip_suffix("-->")
        .map(str::trim)
}

/// The page's shell blocks (```sh, ```bash or ```shell) and broker flags; an error names the
/// line of a fence left open, a marker that is not just above a shell block, or a second
/// broker-flags line.
fn parse(text: &str) -> Result<Page, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut page = Page {
        blocks: Vec::new(),
        broker_flags: Vec::new(),
    };
    let mut flags_line = None;
    // A marker waiting for its block: its line and reason.
    let mut marker: Option<(usize, String)> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let number = i + 1;
        if let Some(fence) = line.strip_prefix("```") {
            let end = (i + 1..lines.len())
                .find(|&j| lines[j].starts_with("```"))
                .ok_or_else(|| format!("line {number}: a ``` fence that is never closed"))?;
            let info = fence.split_whitespace().next().unwrap_or("");
            let shell = matches!(info, "sh" | "bash" | "shell");
            match marker.take() {
                Some((at, _)) if !shell => {
                    return Err(format!(
                        "line {at}: a not-run marker above a ```{info} block, which is never \
                         run (only shell blocks are)"
                    ))
                }
                not_run if shell => page.blocks.push(Block {
                    line: number,
                    code: lines[i + 1..end].join("\n"),
                    not_run: not_run.map(|(_, reason)| reason),
                }),
                _ => {}
            }
            i = end + 1;
            continue;
        }
        if let Some((at, _)) = &marker {
            if !line.trim().is_empty() {
                return Err(format!(
                    "line {at}: a not-run marker that is not just above a shell block"
                ));
            }
        }
        if let Some(reason) = comment(line, NOT_RUN) {
            if reason.is_empty() {
                return Err(format!("line {number}: a not-run marker without a reason"));
            }
            marker = Some((number, reason.to_string()));
        } else if let Some(flags) = comment(line, BROKER_FLAGS) {
            if let Some(first) = flags_line {
                return Err(format!(
                    "line {number}: a second broker-flags line (the first is line {first})"
                ));
            }
            flags_line = Some(number);
            page.broker_flags = flags.split_whitespace().map(str::to_string).collect();
        }
        i += 1;
    }
    if let Some((at, _)) = marker {
        return Err(format!(
            "line {at}: a not-run marker that is not just above a shell block"
        ));
    }
    Ok(page)
}

/// README.md and docs/*.md, by name, relative to the repository.
fn pages(repo: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo.join("docs"))
        .expect("docs/")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    names.sort();
    names.insert(0, "README.md".to_string());
    names
}

/// The directory put first on PATH: `lograil` (the client commands given `addr`) and Kafka's
/// scripts.
fn bin_dir(dir: &Path, repo: &Path, addr: &str) {
    std::fs::create_dir(dir).unwrap();
    let write = |name: &str, script: String| {
        let path = dir.join(name);
        std::fs::write(&path, script).unwrap();
        let status = Command::new("chmod").arg("+x").arg(&path).status().unwrap();
        assert!(status.success());
    };
    write(
        "lograil",
        format!(
            "#!/usr/bin/env bash\n\
             case \"${{1:-}}\" in {CLIENT_COMMANDS})\n  \
             case \" $* \" in *\" --bootstrap-server \"*) ;; *) set -- \"$1\" --bootstrap-server {addr} \"${{@:2}}\" ;; esac ;;\n\
             esac\n\
             exec '{}' \"$@\"\n",
            lograil_bin().display()
        ),
    );
    let kafka_sh = repo.join("tests/kafka/kafka.sh");
    for (name, class) in KAFKA_SCRIPTS {
        write(
            name,
            format!(
                "#!/usr/bin/env bash\nexec '{}' tool - {class} \"$@\"\n",
                kafka_sh.display()
            ),
        );
    }
}

/// What running a page's blocks came to.
struct Outcome {
    ran: usize,
    not_run: Vec<String>,
    failure: Option<String>,
}

/// Runs `name`'s shell blocks in order in one bash against a broker of their own.
fn run_page(repo: &Path, name: &str) -> Outcome {
    let text = std::fs::read_to_string(repo.join(name)).unwrap();
    let page = match parse(&text) {
        Ok(page) => page,
        Err(e) => {
            return Outcome {
                ran: 0,
                not_run: Vec::new(),
                failure: Some(format!("{name}: {e}")),
            }
        }
    };
    let not_run: Vec<String> = page
        .blocks
        .iter()
        .filter_map(|b| {
            b.not_run
                .as_ref()
                .map(|reason| format!("{name}:{}: not run: {reason}", b.line))
        })
        .collect();
    let runnable: Vec<&Block> = page.blocks.iter().filter(|b| b.not_run.is_none()).collect();
    if runnable.is_empty() {
        return Outcome {
            ran: 0,
            not_run,
            failure: None,
        };
    }
    let tmp = tempfile::tempdir().unwrap();
    let flags: Vec<&str> = page.broker_flags.iter().map(String::as_str).collect();
    let broker = TestBroker::start(&tmp.path().join("data"), &flags);
    let bin = tmp.path().join("bin");
    bin_dir(&bin, repo, &broker.addr);
    // The docs' commands run from a checkout: tests/kafka/kafka.sh, deploy/prometheus/...
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    for dir in ["tests", "deploy"] {
        std::os::unix::fs::symlink(repo.join(dir), work.join(dir)).unwrap();
    }
    let mut script = String::from("set -euo pipefail\n");
    for block in &runnable {
        script.push_str(&format!("printf '\\n@@docs-block %d\\n' {}\n", block.line));
        script.push_str(&block.code.replace(DOCS_ADDR, &broker.addr));
        script.push('\n');
    }
    let script_path = tmp.path().join("page.sh");
    std::fs::write(&script_path, &script).unwrap();
    let output_path = tmp.path().join("output");
    let output = std::fs::File::create(&output_path).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let status = Command::new("timeout")
        .args(["--kill-after=5", &PAGE_TIMEOUT_S.to_string(), "bash"])
        .arg("--noprofile")
        .arg("--norc")
        .arg(&script_path)
        .current_dir(&work)
        .env("PATH", path)
        .env_remove("LD_LIBRARY_PATH")
        .stdin(Stdio::null())
        .stdout(output.try_clone().unwrap())
        .stderr(output)
        .status()
        .expect("bash and timeout (coreutils)");
    let out = std::fs::read_to_string(&output_path).unwrap_or_default();
    let failure = (!status.success()).then(|| {
        // The block that failed is the last one that began.
        let (line, block_out) = match out.rfind("@@docs-block ") {
            Some(at) => {
                let rest = &out[at + "@@docs-block ".len()..];
                let (line, block_out) = rest.split_once('\n').unwrap_or((rest, ""));
                (line.to_string(), block_out.to_string())
            }
            None => ("?".to_string(), out.clone()),
        };
        let how = if status.code() == Some(124) {
            format!("timed out after {PAGE_TIMEOUT_S} s")
        } else {
            format!("failed ({status})")
        };
        let log = std::fs::read_to_string(broker.log_path()).unwrap_or_default();
        let log_tail: Vec<&str> = log.lines().rev().take(10).collect();
        format!(
            "{name}:{line}: the ```sh block {how}; its output:\n{block_out}\n\
             (the broker's last log lines:)\n{}",
            log_tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )
    });
    Outcome {
        ran: runnable.len(),
        not_run,
        failure,
    }
}

#[test]
fn every_shell_block_of_the_docs_runs() {
    require("kcat", &["-V"], "apt-get install kcat");
    require(
        "java",
        &["-version"],
        "apt-get install default-jdk-headless",
    );
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let names = pages(&repo);
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(String, Outcome)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..WORKERS {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                let Some(name) = names.get(i) else { break };
                let outcome = run_page(&repo, name);
                results.lock().unwrap().push((name.clone(), outcome));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let mut failures = Vec::new();
    for (name, outcome) in &results {
        println!(
            "{name}: {} shell blocks run, {} not run",
            outcome.ran,
            outcome.not_run.len()
        );
        for line in &outcome.not_run {
            println!("  {line}");
        }
        failures.extend(outcome.failure.clone());
    }
    let ran: usize = results.iter().map(|(_, o)| o.ran).sum();
    let not_run: usize = results.iter().map(|(_, o)| o.not_run.len()).sum();
    println!(
        "{ran} shell blocks run, {not_run} not run, on {} pages",
        results.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    let readme = results
        .iter()
        .find(|(name, _)| name == "README.md")
        .unwrap();
    assert!(
        readme.1.ran > 0,
        "no shell block of README.md ran: the tour's blocks should"
    );
}

#[test]
fn markers_and_blocks_are_read_as_written() {
    let page = parse(
        "# t\n\n<!-- broker flags: --a b -->\n```sh\necho 1\n```\n\n\
         <!-- not run: runs until stopped -->\n\n```bash\nlograil serve\n```\n\
         ```rust\nfn main() {}\n```\n```text\n$ not a command\n```\n",
    )
    .unwrap();
    assert_eq!(page.broker_flags, ["--a", "b"]);
    assert_eq!(
        page.blocks,
        [
            Block {
                line: 4,
                code: "echo 1".to_string(),
                not_run: None
            },
            Block {
                line: 10,
                code: "lograil serve".to_string(),
                not_run: Some("runs until stopped".to_string())
            },
        ]
    );
    let stray = parse("<!-- not run: why -->\ntext\n```sh\necho\n```\n").unwrap_err();
    assert!(stray.starts_with("line 1:"), "{stray}");
    let above_rust = parse("<!-- not run: why -->\n```rust\nx\n```\n").unwrap_err();
    assert!(above_rust.contains("```rust"), "{above_rust}");
    let no_reason = parse("<!-- not run: -->\n```sh\nx\n```\n").unwrap_err();
    assert!(no_reason.contains("without a reason"), "{no_reason}");
    let open = parse("```sh\necho\n").unwrap_err();
    assert!(open.contains("never closed"), "{open}");
    let twice = parse("<!-- broker flags: -a -->\n<!-- broker flags: -b -->\n").unwrap_err();
    assert!(twice.starts_with("line 2:"), "{twice}");
}

/// The pages this test reads are found where the docs live.
#[test]
fn the_pages_are_the_readme_and_docs() {
    let repo: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let names = pages(&repo);
    assert_eq!(names[0], "README.md");
    assert!(names.iter().any(|n| n == "docs/task-queue.md"), "{names:?}");
    assert!(names.iter().all(|n| repo.join(n).is_file()), "{names:?}");
}
