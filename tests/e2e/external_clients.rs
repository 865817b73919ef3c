//! Clients outside the Rust build, installed by `.ci/run`: kcat (Debian package), and the
//! Python `confluent-kafka` and `kafka-python` (2.0.x) packages.

use std::collections::BTreeSet;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use test_support::TestBroker;

/// Fails the test unless `program args` runs and succeeds, saying how to install it.
pub(crate) fn require(program: &str, args: &[&str], install: &str) {
    let ok = Command::new(program)
        .args(args)
        .env_remove("LD_LIBRARY_PATH")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{program} is needed by this test: {install} (.ci/run does it)"
    );
}

fn python_client(script: &str, module: &str, package: &str) {
    require(
        "python3",
        &["-c", &format!("import {module}")],
        &format!("pip install {package}"),
    );
    let broker = TestBroker::start_temp(&["--default-partitions", "3"]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/clients")
        .join(script);
    let out = Command::new("python3")
        .arg(&script)
        .arg(&broker.addr)
        .arg("py-roundtrip")
        .arg("3000")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{}\n{stdout}\n{stderr}",
        script.display()
    );
    assert!(stdout.contains("OK 3000"), "{stdout}\n{stderr}");
    println!("{stdout}");
}

#[test]
fn confluent_kafka_round_trip() {
    python_client(
        "confluent_roundtrip.py",
        "confluent_kafka",
        "confluent-kafka",
    );
}

/// confluent-kafka's transactions (`confluent_transactions.py`, which makes the checks): a
/// transactional producer's commit and abort, consume-transform-produce with
/// `send_offsets_to_transaction` (one transaction aborted and redone), a zombie fenced by a
/// second `init_transactions` (`_FENCED`); read_committed sees exactly the committed records,
/// read_uncommitted the aborted ones too; the group's offsets are the input's end.
#[test]
fn confluent_kafka_transactions() {
    require(
        "python3",
        &["-c", "import confluent_kafka"],
        "pip install confluent-kafka",
    );
    let broker = TestBroker::start_temp(&[]);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/clients/confluent_transactions.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(&broker.addr)
        .arg("pytx")
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("OK transactions"),
        "{}: {}\n{stdout}\n{stderr}",
        script.display(),
        out.status
    );
}

#[test]
fn kafka_python_round_trip_with_version_inference() {
    python_client("kafka_python_roundtrip.py", "kafka", "kafka-python==2.0.2");
}

#[test]
fn kcat_round_trip() {
    require("kcat", &["-V"], "apt-get install kcat");
    let broker = TestBroker::start_temp(&["--default-partitions", "4"]);
    let lines: Vec<String> = (0..2000)
        .map(|i| format!("key-{}:value-{i}", i % 37))
        .collect();
    let mut producer = Command::new("kcat")
        .args([
            "-b",
            &broker.addr,
            "-P",
            "-t",
            "kc",
            "-K:",
            "-X",
            "enable.idempotence=true",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    producer
        .stdin
        .take()
        .unwrap()
        .write_all((lines.join("\n") + "\n").as_bytes())
        .unwrap();
    let out = producer.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = Command::new("kcat")
        .args([
            "-b",
            &broker.addr,
            "-C",
            "-t",
            "kc",
            "-o",
            "beginning",
            "-e",
            "-f",
            "%k:%s:%p:%o\n",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let consumed: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let got: BTreeSet<String> = consumed
        .iter()
        .map(|l| l.rsplitn(3, ':').nth(2).unwrap().to_string())
        .collect();
    assert_eq!(consumed.len(), lines.len(), "each record once");
    assert_eq!(got, lines.iter().cloned().collect::<BTreeSet<_>>());

    let out = Command::new("kcat")
        .args(["-b", &broker.addr, "-L", "-t", "kc"])
        .output()
        .unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(
        listing.contains("topic \"kc\" with 4 partitions"),
        "{listing}"
    );
}
