//! Unmodified share consumers against lograil: the scenarios of `tests/share` (Java's
//! `KafkaShareConsumer` 4.4 and confluent-kafka's `ShareConsumer`; implicit and explicit acks,
//! eight consumers on two partitions, a consumer killed or hung while holding records, a poison
//! record, reject and release) run by `run_scenarios.sh` against a `lograil` broker of this
//! build. A test binary of its own so that nothing else competes for the CPU while its timing
//! checks run. Needs a JDK with Maven, Kafka's tool jars (`tests/kafka/kafka.sh fetch`) and
//! confluent-kafka >= 2.16; `.ci/run` installs them.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::path::Path;
use std::process::Command;

use test_support::TestBroker;

#[test]
fn java_and_librdkafka_share_consumers_pass_every_scenario() {
    let broker = TestBroker::start_temp(&[]);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/share/run_scenarios.sh");
    let out = Command::new(&script)
        .arg(&broker.addr)
        // Kafka 4.2 has no per-group delivery limit; lograil takes Kafka's broker config name
        // per group too, and the poison scenarios then expect exactly 3 deliveries.
        .args(["--limit-config", "group.share.delivery.count.limit"])
        .args(["--delivery-limit", "3"])
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let passed = stdout.lines().filter(|l| l.starts_with("PASS ")).count();
    assert_eq!(passed, 13, "every scenario runs and passes:\n{stdout}");
    assert!(stdout.contains("all passed"), "{stdout}");
}
