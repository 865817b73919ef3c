//! Fair turns between tenants and the overload mode of share groups (issue 27), with the real
//! broker: a flooding tenant does not delay quiet ones (and offset order does, the contrast),
//! by key, by header and with weights; every record delivered and every acknowledgement kept
//! across a restart and a kill -9 with fair turns on; the overload mode (CoDel's rule)
//! archives expired records to the dead letters, serves the newest first and switches back
//! when drained; per-tenant figures with the `other` bucket in `/metrics` and `lograil queue
//! describe`; bad configs refused with INVALID_CONFIG. Lograil's own queue consumer (the
//! `consumer` crate) and raw protocol here; confluent-kafka's and the Java share consumers in
//! `fair_turns_reach_unmodified_share_consumers`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use consumer::QueueConsumer;
use test_support::cluster::client_config_for;
use test_support::kafka::{self, alter_configs, create_topic, set_configs, Record, GROUP_RESOURCE};
use test_support::{lograil_stdout, TestBroker};

use crate::metrics::{must, scrape, value};
use crate::shares::{create_dlq, header, Member};

const INVALID_CONFIG: i16 = 40;

/// `count` records of tenant `tenant` keyed by it, valued `<tenant>-<i>`.
fn tenant_records(tenant: &str, count: usize) -> Vec<Record> {
    (0..count)
        .map(|i| Record::new(format!("{tenant}-{i}")).key(tenant))
        .collect()
}

/// Produces `records` to partition 0 of `topic`, in batches of at most 100, in order.
fn produce(addr: &str, topic: &str, records: Vec<Record>) {
    for batch in records.chunks(100) {
        kafka::produce_records(addr, topic, 0, batch.to_vec());
    }
}

/// The tenant of a value `<tenant>-<i>`.
fn tenant_of(value: &str) -> &str {
    value.rsplit_once('-').map_or(value, |(t, _)| t)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Lograil's queue consumer on `group`, `topic`, `max.poll.records` of `max`.
async fn queue(addr: &str, group: &str, topic: &str, max: usize) -> QueueConsumer {
    let config = client_config_for(addr)
        .with("group.id", group)
        .with("max.poll.records", max.to_string());
    let queue = QueueConsumer::from_config(&config).await.unwrap();
    queue.subscribe(&[topic]);
    queue
}

/// The values of the first `want` deliveries (implicit acknowledgements: each receive accepts
/// the records before it), in the order received; at most 60 s.
async fn receive(queue: &QueueConsumer, want: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < deadline {
        for d in queue.receive(Duration::from_millis(500)).await.unwrap() {
            got.push(String::from_utf8(d.value.clone().unwrap().to_vec()).unwrap());
        }
    }
    got.truncate(want);
    got
}

/// A share group reading `topic` from the start, with `configs` set as a user would (an
/// IncrementalAlterConfigs on the group, what `kafka-configs --entity-type groups` sends).
fn group(addr: &str, group: &str, configs: &[(&str, &str)]) {
    let mut all = vec![("share.auto.offset.reset", "earliest")];
    all.extend_from_slice(configs);
    set_configs(addr, GROUP_RESOURCE, group, &all);
}

/// Where among the deliveries the last record of `tenant` came (its index), if it came.
fn last_of(deliveries: &[String], tenant: &str) -> Option<usize> {
    deliveries.iter().rposition(|v| tenant_of(v) == tenant)
}

#[test]
fn quiet_tenants_are_served_in_turn_with_a_flooding_one_and_fifo_makes_them_wait() {
    let broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    for (topic, fairness) in [("flood-fair", "key"), ("flood-fifo", "none")] {
        create_topic(&addr, topic, 1);
        let mut records = tenant_records("A", 2000);
        records.extend(tenant_records("B", 5));
        records.extend(tenant_records("C", 5));
        produce(&addr, topic, records);
        let g = format!("{topic}-workers");
        group(&addr, &g, &[("lograil.share.fairness.key", fairness)]);
    }
    let rt = runtime();
    rt.block_on(async {
        let q = queue(&addr, "flood-fair-workers", "flood-fair", 10).await;
        let fair = receive(&q, 60).await;
        q.close().await.unwrap();
        let q = queue(&addr, "flood-fifo-workers", "flood-fifo", 10).await;
        let fifo = receive(&q, 60).await;
        q.close().await.unwrap();
        assert_eq!((fair.len(), fifo.len()), (60, 60));
        // Fair turns: B's and C's ten records come within the first three fetches' worth
        // (A, B, C take turns), not after A's 2,000.
        for tenant in ["B", "C"] {
            let n = fair.iter().filter(|v| tenant_of(v) == tenant).count();
            assert_eq!(n, 5, "all of {tenant}'s records early: {fair:?}");
            assert!(last_of(&fair, tenant).unwrap() < 30, "{fair:?}");
        }
        // Within a tenant: offset order.
        let a: Vec<&String> = fair.iter().filter(|v| tenant_of(v) == "A").collect();
        let expected: Vec<String> = (0..a.len()).map(|i| format!("A-{i}")).collect();
        assert_eq!(a, expected.iter().collect::<Vec<_>>());
        // Offset order: B and C wait behind all of A.
        assert!(
            fifo.iter().all(|v| tenant_of(v) == "A"),
            "FIFO serves A's flood first: {fifo:?}"
        );
    });
}

#[test]
fn fair_turns_by_a_header_and_by_weight() {
    let broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    // Tenants named by the header `tenant`; the keys are all different (one per record).
    create_topic(&addr, "by-header", 1);
    let mut records = Vec::new();
    for (tenant, count) in [("A", 500), ("B", 5), ("C", 5)] {
        for i in 0..count {
            let key = format!("k{}", records.len());
            records.push(
                Record::new(format!("{tenant}-{i}"))
                    .key(key)
                    .header("tenant", tenant),
            );
        }
    }
    produce(&addr, "by-header", records);
    group(
        &addr,
        "by-header-workers",
        &[("lograil.share.fairness.key", "header:tenant")],
    );
    // Weights: X weighs 3, Y (unlisted) 1, both with a backlog throughout.
    create_topic(&addr, "weighted", 1);
    let mut records = tenant_records("X", 400);
    records.extend(tenant_records("Y", 400));
    produce(&addr, "weighted", records);
    group(
        &addr,
        "weighted-workers",
        &[
            ("lograil.share.fairness.key", "key"),
            ("lograil.share.fairness.weights", "X=3"),
        ],
    );
    let rt = runtime();
    rt.block_on(async {
        let q = queue(&addr, "by-header-workers", "by-header", 10).await;
        let got = receive(&q, 40).await;
        q.close().await.unwrap();
        for tenant in ["B", "C"] {
            let n = got.iter().filter(|v| tenant_of(v) == tenant).count();
            assert_eq!(n, 5, "{tenant} served in turn by its header: {got:?}");
            assert!(last_of(&got, tenant).unwrap() < 30, "{got:?}");
        }

        let q = queue(&addr, "weighted-workers", "weighted", 10).await;
        let got = receive(&q, 200).await;
        q.close().await.unwrap();
        let x = got.iter().filter(|v| tenant_of(v) == "X").count() as f64;
        let y = got.iter().filter(|v| tenant_of(v) == "Y").count() as f64;
        assert_eq!(x + y, 200.0);
        let ratio = x / y;
        assert!(
            (2.4..=3.6).contains(&ratio),
            "X (weight 3) got {x}, Y (weight 1) {y}: ratio {ratio:.2}"
        );
    });
}

/// Fetches (each fetch accepting what the previous one got) until `want` records came or
/// nothing more comes; (offset, value, delivery count) in order. The last fetch's records
/// are accepted by one more acknowledgement unless `hold_last`.
fn drain(member: &mut Member, want: usize, hold_last: bool) -> Vec<(i64, String, i16)> {
    let mut got: Vec<(i64, String, i16)> = Vec::new();
    let mut acks: Vec<(i64, i64, i8)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < want && Instant::now() < deadline {
        let batch = member.fetch(&acks, 500);
        acks = batch.iter().map(|(o, _, _)| (*o, *o, 1)).collect();
        got.extend(batch);
    }
    if !hold_last && !acks.is_empty() {
        let acks: Vec<(i64, i64, Vec<i8>)> =
            acks.iter().map(|(f, l, t)| (*f, *l, vec![*t])).collect();
        assert_eq!(member.acknowledge(&acks), (0, 0));
    }
    got
}

#[test]
fn fair_turns_keep_every_record_and_acknowledgement_across_a_restart_and_a_kill_9() {
    let mut broker = TestBroker::start_temp(&[]);
    create_topic(&broker.addr, "durable-fair", 1);
    let mut records = tenant_records("A", 300);
    records.extend(tenant_records("B", 30));
    produce(&broker.addr, "durable-fair", records);
    group(
        &broker.addr,
        "durable-workers",
        &[("lograil.share.fairness.key", "key")],
    );
    let mut accepted: BTreeSet<String> = BTreeSet::new();
    let mut deliveries: BTreeMap<String, i16> = BTreeMap::new();
    // Phase 1: 20 records accepted, then 10 held when the broker stops gracefully; phase 2
    // the same before a kill -9; phase 3 the rest.
    for (phase, stop) in [(0, "graceful"), (1, "kill -9")] {
        let mut member = Member::join(
            &broker.addr,
            "durable-workers",
            &format!("worker-{phase}"),
            "durable-fair",
        );
        member.max_records = 10;
        let done = drain(&mut member, 20, false);
        let held = drain(&mut member, 10, true);
        assert_eq!((done.len(), held.len()), (20, 10), "phase {phase}");
        // Fair turns: A and B alternate (B's 30 come after A's 300 in the log).
        let b = done.iter().filter(|(_, v, _)| tenant_of(v) == "B").count();
        assert!((8..=12).contains(&b), "B in turn with A ({stop}): {done:?}");
        for (_, value, count) in done.iter().chain(&held) {
            assert!(
                !accepted.contains(value),
                "{value} accepted, yet delivered again"
            );
            let before = deliveries.insert(value.clone(), *count).unwrap_or(0);
            assert_eq!(*count, before + 1, "{value}'s delivery count kept");
        }
        accepted.extend(done.into_iter().map(|(_, v, _)| v));
        drop(member);
        if phase == 0 {
            broker.stop();
        } else {
            broker.kill9();
        }
        broker.restart();
    }
    // After both stops: everything not accepted comes, each once more, B's in turn first.
    let mut member = Member::join(
        &broker.addr,
        "durable-workers",
        "worker-last",
        "durable-fair",
    );
    member.max_records = 10;
    let rest = drain(&mut member, 330 - accepted.len(), false);
    assert_eq!(rest.len(), 330 - accepted.len(), "{rest:?}");
    for (_, value, count) in &rest {
        assert!(
            !accepted.contains(value),
            "{value} accepted, yet delivered again"
        );
        let before = deliveries.get(value).copied().unwrap_or(0);
        assert_eq!(*count, before + 1, "{value}'s delivery count kept");
        accepted.insert(value.clone());
    }
    assert_eq!(accepted.len(), 330, "every record delivered");
    let b_left = rest.iter().filter(|(_, v, _)| tenant_of(v) == "B").count();
    let first = &rest[..(2 * b_left).min(rest.len())];
    assert!(
        b_left > 0
            && first.iter().filter(|(_, v, _)| tenant_of(v) == "B").count() * 10 >= b_left * 8,
        "fair turns resume after the restarts: B's {b_left} left come in turn: {first:?}"
    );
    assert!(member.fetch(&[], 200).is_empty(), "nothing left");
}

/// The headers of every dead letter in partition 0 of `topic` (written without the records'
/// keys and values, Kafka's default).
fn dead_letters(addr: &str, topic: &str) -> Vec<Vec<(String, String)>> {
    crate::shares::read_all(addr, topic)
        .into_iter()
        .map(|(_, headers)| headers)
        .collect()
}

/// The group's partition entry and tenant entries from DescribeConfigs.
fn described(addr: &str, group: &str) -> (String, Vec<String>) {
    let entries = kafka::describe_configs(addr, GROUP_RESOURCE, group);
    let partition = entries
        .iter()
        .find(|(k, ..)| k.starts_with("lograil.share.partition."))
        .map(|(_, v, _)| v.clone())
        .unwrap_or_default();
    let tenants = entries
        .iter()
        .filter(|(k, ..)| k.starts_with("lograil.share.tenant."))
        .map(|(_, v, _)| v.clone())
        .collect();
    (partition, tenants)
}

#[test]
fn the_overload_mode_archives_expired_records_serves_the_newest_first_and_switches_back() {
    let broker = TestBroker::start_temp(&["--metrics-listen", "127.0.0.1:0"]);
    let (addr, metrics) = (broker.addr.clone(), broker.metrics_addr.clone().unwrap());
    create_topic(&addr, "spiky", 1);
    create_dlq(&addr, "dlq.spiky");
    // 40 records produced 10 s ago (so the oldest waits past the target at once); the odd
    // ones' deadlines have passed, the even ones' are an hour away.
    let now = log_core::now_ms();
    let records = (0..40)
        .map(|i| {
            let deadline = if i % 2 == 1 {
                now - 1000
            } else {
                now + 3_600_000
            };
            Record::new(format!("task-{i}"))
                .header("deadline", deadline.to_string())
                .timestamp(now - 10_000)
        })
        .collect();
    produce(&addr, "spiky", records);
    group(
        &addr,
        "spiky-workers",
        &[
            ("lograil.share.overload.target.ms", "100"),
            ("lograil.share.overload.interval.ms", "300"),
            ("errors.deadletterqueue.topic.name", "dlq.spiky"),
        ],
    );
    let labels = [
        ("group", "spiky-workers"),
        ("topic", "spiky"),
        ("partition", "0"),
    ];
    let mut member = Member::join(&addr, "spiky-workers", "worker", "spiky");
    member.max_records = 1;
    // One record at a time, accepted, until the mode is on (a whole interval above target).
    let mut before: Vec<(i64, String, i16)> = Vec::new();
    let mut acks: Vec<(i64, i64, i8)> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let first_on = loop {
        let got = member.fetch(&acks, 100);
        acks = got.iter().map(|(o, _, _)| (*o, *o, 1)).collect();
        if described(&addr, "spiky-workers").0.contains("overloaded=1") {
            break got;
        }
        before.extend(got);
        assert!(
            Instant::now() < deadline,
            "the overload mode never came on: {before:?}"
        );
        std::thread::sleep(Duration::from_millis(150));
    };
    assert!(before.len() <= 4, "on after one interval: {before:?}");
    let samples = scrape(&metrics);
    assert_eq!(must(&samples, "lograil_share_overloaded", &labels), 1.0);
    let on = [labels[0], labels[1], labels[2], ("to", "on")];
    assert_eq!(
        must(&samples, "lograil_share_overload_switches_total", &on),
        1.0
    );
    // Every expired record of the window went to the dead letters at once, as expired,
    // however few records were delivered so far.
    let dead = dead_letters(&addr, "dlq.spiky");
    assert_eq!(dead.len(), 20, "{dead:?}");
    assert!(dead.iter().all(|h| {
        header(h, "__dlq.errors.message") == Some("Offset deadline passed before delivery.")
    }));
    let dead_offsets: BTreeSet<i64> = dead
        .iter()
        .map(|h| header(h, "__dlq.errors.offset").unwrap().parse().unwrap())
        .collect();
    assert_eq!(dead_offsets, (0..40).filter(|o| o % 2 == 1).collect());
    // Newest first while on.
    let mut while_on = first_on;
    for _ in 0..4 {
        let got = member.fetch(&acks, 100);
        acks = got.iter().map(|(o, _, _)| (*o, *o, 1)).collect();
        while_on.extend(got);
    }
    let offsets: Vec<i64> = while_on.iter().map(|(o, _, _)| *o).collect();
    assert_eq!(
        offsets,
        vec![38, 36, 34, 32, 30],
        "newest first: {while_on:?}"
    );
    // Drained: off again.
    member.max_records = 100;
    let rest = drain(&mut member, 15 - before.len(), false);
    let delivered: Vec<i64> = before
        .iter()
        .chain(&while_on)
        .chain(&rest)
        .map(|(o, _, _)| *o)
        .collect();
    assert!(
        delivered.iter().all(|o| o % 2 == 0),
        "an expired record was delivered: {delivered:?}"
    );
    assert_eq!(
        delivered.iter().collect::<BTreeSet<_>>().len(),
        20,
        "{delivered:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !described(&addr, "spiky-workers").0.contains("overloaded=0") {
        assert!(
            Instant::now() < deadline,
            "the overload mode stayed on when drained"
        );
        assert!(member.fetch(&[], 100).is_empty());
    }
    let samples = scrape(&metrics);
    assert_eq!(must(&samples, "lograil_share_overloaded", &labels), 0.0);
    let off = [labels[0], labels[1], labels[2], ("to", "off")];
    assert_eq!(
        must(&samples, "lograil_share_overload_switches_total", &off),
        1.0
    );
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    assert!(log.contains("share partition overloaded"), "logged");
    assert!(log.contains("no longer overloaded"), "logged");
}

#[test]
fn tenants_show_in_the_metrics_and_queue_describe_with_the_rest_as_other() {
    let broker = TestBroker::start_temp(&["--metrics-listen", "127.0.0.1:0"]);
    let (addr, metrics) = (broker.addr.clone(), broker.metrics_addr.clone().unwrap());
    create_topic(&addr, "many", 1);
    // 13 tenants: one named with a control character (40 records), then t00 with 26 records
    // … t11 with 4 (two fewer each).
    const BAD: &str = "bad\u{1b}name";
    let mut sizes: Vec<(String, usize)> = vec![(BAD.to_string(), 40)];
    sizes.extend((0..12).map(|t| (format!("t{t:02}"), 26 - 2 * t)));
    let mut records = Vec::new();
    for (tenant, count) in &sizes {
        records.extend(tenant_records(tenant, *count));
    }
    produce(&addr, "many", records);
    group(
        &addr,
        "many-workers",
        &[("lograil.share.fairness.key", "key")],
    );
    // Three records in flight, of three tenants (one turn each).
    let mut member = Member::join(&addr, "many-workers", "worker", "many");
    member.max_records = 3;
    let held = member.fetch(&[], 2000);
    let held_by = |t: &str| held.iter().filter(|(_, v, _)| tenant_of(v) == t).count();
    assert_eq!(held.len(), 3);
    assert!(
        sizes.iter().all(|(t, _)| held_by(t) <= 1),
        "one turn each: {held:?}"
    );
    let available = |t: &str| sizes.iter().find(|(n, _)| n == t).unwrap().1 - held_by(t);
    // The top ten by available records: BAD, t00 … t08 (t08: at least 9, t09: at most 8).
    let other: usize = ["t09", "t10", "t11"].iter().map(|t| available(t)).sum();

    let samples = scrape(&metrics);
    let labels = |t: &'static str| {
        vec![
            ("group", "many-workers"),
            ("topic", "many"),
            ("partition", "0"),
            ("tenant", t),
        ]
    };
    for t in ["t00", "t05", "t08"] {
        let l = labels(t);
        assert_eq!(
            must(&samples, "lograil_share_tenant_available", &l),
            available(t) as f64
        );
        assert_eq!(
            must(&samples, "lograil_share_tenant_in_flight", &l),
            held_by(t) as f64
        );
        assert!(
            must(
                &samples,
                "lograil_share_tenant_oldest_available_age_seconds",
                &l
            ) >= 0.0
        );
    }
    // Escaped as `bad\u{1b}name`; the exposition escapes that backslash again, which the
    // suite's parser keeps.
    let bad = labels("bad\\\\u{1b}name");
    assert_eq!(
        must(&samples, "lograil_share_tenant_available", &bad),
        available(BAD) as f64
    );
    assert_eq!(
        value(&samples, "lograil_share_tenant_available", &labels("t09")),
        None
    );
    assert_eq!(
        must(&samples, "lograil_share_tenant_available", &labels("other")),
        other as f64
    );
    let series = samples
        .iter()
        .filter(|(n, l, _)| n == "lograil_share_tenant_available" && l["group"] == "many-workers")
        .count();
    assert_eq!(series, 11, "ten tenants and other");

    let out = lograil_stdout(&[
        "queue",
        "describe",
        "many-workers",
        "--bootstrap-server",
        &addr,
    ]);
    println!("{out}");
    let row = |t: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(t))
            .unwrap_or_else(|| panic!("no row of {t}: {out}"))
            .split_whitespace()
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    for t in ["t00", "t08"] {
        assert_eq!(
            row(t)[2..4],
            [available(t).to_string(), held_by(t).to_string()],
            "{out}"
        );
    }
    assert_eq!(
        row("(other)")[2..4],
        [other.to_string(), "0".to_string()],
        "{out}"
    );
    assert_eq!(
        row("bad\\u{1b}name")[2],
        available(BAD).to_string(),
        "{out}"
    );
    assert!(!out.contains('\u{1b}'), "control characters escaped: {out}");
    assert!(out.contains("OVERLOADED"), "{out}");

    let json = lograil_stdout(&[
        "queue",
        "describe",
        "many-workers",
        "--bootstrap-server",
        &addr,
        "--json",
    ]);
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    let tenants = json["tenants"].as_array().unwrap();
    assert_eq!(tenants.len(), 11, "{tenants:?}");
    let t00 = tenants.iter().find(|t| t["tenant"] == "t00").unwrap();
    assert_eq!(t00["available"], available("t00"));
    assert_eq!(t00["partition"], "many-0");
    assert!(tenants
        .iter()
        .any(|t| t["other"] == true && t["available"] == other));
    assert_eq!(json["partitions"][0]["overloaded"], false);
}

#[test]
fn bad_fairness_configs_are_refused_with_invalid_config() {
    let broker = TestBroker::start_temp(&[]);
    for (name, value, says) in [
        ("lograil.share.fairness.key", "header:", "header:<name>"),
        ("lograil.share.fairness.key", "partition", "header:<name>"),
        ("lograil.share.fairness.weights", "A=x", "tenant=weight"),
        ("lograil.share.fairness.weights", "A", "tenant=weight"),
        ("lograil.share.fairness.window", "10", "100"),
        ("lograil.share.fairness.window", "999999999", "100"),
        ("lograil.share.overload.target.ms", "-5", "3600000"),
    ] {
        for validate_only in [true, false] {
            let (code, message) = alter_configs(
                &broker.addr,
                GROUP_RESOURCE,
                "strict",
                &[(name, 0, Some(value))],
                validate_only,
            );
            assert_eq!(code, INVALID_CONFIG, "{name}={value}");
            let message = message.unwrap_or_default();
            assert!(
                message.contains(name) && message.contains(says),
                "{name}={value}: {message}"
            );
        }
    }
    // Nothing changed; a good one is taken.
    let configs = kafka::describe_configs(&broker.addr, GROUP_RESOURCE, "strict");
    let get = |n: &str| {
        configs
            .iter()
            .find(|(k, ..)| k == n)
            .map(|(_, v, _)| v.clone())
    };
    assert_eq!(get("lograil.share.fairness.key").as_deref(), Some("none"));
    assert_eq!(
        get("lograil.share.fairness.window").as_deref(),
        Some("20000")
    );
    set_configs(
        &broker.addr,
        GROUP_RESOURCE,
        "strict",
        &[
            ("lograil.share.fairness.key", "header:tenant"),
            ("lograil.share.fairness.weights", "A=3,B=2"),
        ],
    );
}

/// The client a share worker of `tests/share` (same options, same JSON lines, whichever
/// client) says it is, and the values it received, in order.
fn worker_values(
    mut command: Command,
    addr: &str,
    group: &str,
    topic: &str,
) -> (String, Vec<String>) {
    let out = command
        .env_remove("LD_LIBRARY_PATH")
        .args(["--bootstrap", addr, "--group", group, "--topics", topic])
        .args(["--max-poll-records", "10", "--max-records", "40"])
        .args(["--idle-ms", "5000", "--timeout-ms", "90000"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let client = events
        .iter()
        .find(|v| v["ev"] == "start")
        .map(|v| format!("{} {}", v["client"], v["client_version"]))
        .unwrap_or_default();
    let values = events
        .iter()
        .filter(|v| v["ev"] == "record")
        .map(|v| v["value"].as_str().unwrap_or_default().to_string())
        .collect();
    (client, values)
}

#[test]
fn fair_turns_reach_unmodified_share_consumers() {
    let broker = TestBroker::start_temp(&[]);
    let addr = broker.addr.clone();
    let share = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/share");
    let built = Command::new(share.join("build.sh")).status().unwrap();
    assert!(built.success(), "building the Java share worker");
    let python = {
        let mut c = Command::new("python3");
        c.arg(share.join("python/share_worker.py"));
        c
    };
    let java = {
        let mut c = Command::new("java");
        c.arg("-jar")
            .arg(share.join("java/target/share-worker.jar"));
        c
    };
    for (client, command) in [("python", python), ("java", java)] {
        let topic = format!("flood-{client}");
        create_topic(&addr, &topic, 1);
        let mut records = tenant_records("A", 500);
        records.extend(tenant_records("B", 5));
        records.extend(tenant_records("C", 5));
        produce(&addr, &topic, records);
        let g = format!("{topic}-workers");
        group(
            &addr,
            &g,
            &[
                ("lograil.share.fairness.key", "key"),
                ("share.heartbeat.interval.ms", "1000"),
            ],
        );
        let (said, got) = worker_values(command, &addr, &g, &topic);
        println!(
            "{said}: {} records, the first 30: {:?}",
            got.len(),
            &got[..30.min(got.len())]
        );
        assert!(said.starts_with(&format!("\"{client}\"")), "{said}");
        assert!(got.len() >= 30, "{client}: {got:?}");
        for tenant in ["B", "C"] {
            let n = got[..30].iter().filter(|v| tenant_of(v) == tenant).count();
            assert_eq!(
                n, 5,
                "{client}: {tenant} served in turn with A's flood: {got:?}"
            );
        }
    }
}
