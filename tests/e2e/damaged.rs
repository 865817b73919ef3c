//! Damaged data on disk, as an operator would meet it: a corrupt batch in a closed segment is
//! refused to librdkafka with an error the application sees (never a silent skip, never a
//! silent stall), everything around it is served, the CLI and dump-log name it; a topic whose
//! files cannot be read stays offline while the rest of the broker serves.

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};

use test_support::kafka::{rdkafka_produce, rdkafka_reader, Record};
use test_support::wire::claiming;
use test_support::TestBroker;

/// 1 KiB values: 3,000 of them fill more than two 1 MiB segments.
const RECORDS: i64 = 3000;

fn lograil(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lograil"))
        .args(args)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().unwrap_or(-1), text)
}

/// `topic describe` names the damaged offsets `first..end`, their file and byte `position`.
fn assert_describes_damage(addr: &str, topic: &str, first: i64, end: i64, position: u64) {
    let (code, out) = lograil(&["topic", "describe", topic, "--bootstrap-server", addr]);
    assert_eq!(code, 0, "{out}");
    let expected = format!(
        "DAMAGED: offsets {first}..{end} in 00000000000000000000.log at bytes {position}.."
    );
    assert!(out.contains(&expected), "{out}");
}

/// Creates `topic` (one partition) and fills it with [`RECORDS`] records.
fn create_and_fill(addr: &str, topic: &str) {
    let (code, out) = lograil(&[
        "topic",
        "create",
        topic,
        "--partitions",
        "1",
        "--bootstrap-server",
        addr,
    ]);
    assert_eq!(code, 0, "{out}");
    produce(addr, topic);
}

fn produce(addr: &str, topic: &str) {
    let props = [("linger.ms", "2"), ("batch.size", "16384")];
    let records = (0..RECORDS).map(|i| Record::new(format!("{i:08}{}", "v".repeat(1016))));
    rdkafka_produce(addr, &props, topic, records);
}

/// What a consumer sees reading partition 0 from offset 0 until it got `wanted` records: the
/// offsets it got, and where it got a corrupt-message error (after each, it seeks to
/// `skip_to`, past the damage the CLI names).
fn consume_everything(
    addr: &str,
    topic: &str,
    skip_to: i64,
    wanted: usize,
) -> (Vec<i64>, Vec<i64>) {
    let consumer = rdkafka_reader(
        addr,
        "damage-reader",
        topic,
        0,
        &[("fetch.error.backoff.ms", "100")],
    );
    let (mut got, mut errors) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + Duration::from_secs(60);
    while got.len() < wanted && Instant::now() < deadline {
        match consumer.poll(Duration::from_millis(200)) {
            Some(Ok(message)) => {
                let value = message.payload().unwrap();
                let id: i64 = std::str::from_utf8(&value[..8]).unwrap().parse().unwrap();
                assert_eq!(id, message.offset(), "offset and content agree");
                got.push(message.offset());
            }
            Some(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::InvalidMessage))) => {
                let at = got.last().map_or(0, |o| o + 1);
                errors.push(at);
                // The application decides to move on: past the damaged offsets.
                consumer
                    .seek(topic, 0, Offset::Offset(skip_to), Duration::from_secs(5))
                    .unwrap();
            }
            Some(Err(e)) => panic!("unexpected consumer error: {e}"),
            None => {}
        }
    }
    (got, errors)
}

fn batch_starts(segment: &Path) -> Vec<(u64, i64)> {
    log_core::dump::dump_segment(segment)
        .unwrap()
        .batches
        .iter()
        .map(|b| (b.position, b.header.base_offset))
        .collect()
}

#[test]
fn a_corrupt_closed_segment_is_refused_visibly_and_everything_else_is_served() {
    let mut broker = TestBroker::start_temp(&["--segment-bytes", "1048576"]);
    let data = broker.data_dir.clone();
    create_and_fill(&broker.addr, "damaged");
    broker.stop();

    // A batch in the middle of the first (closed) segment gets a 2 GiB length.
    let segment = data.join("damaged-0/00000000000000000000.log");
    let starts = batch_starts(&segment);
    assert!(starts.len() > 10, "{} batches", starts.len());
    let (position, first_damaged) = starts[starts.len() / 2];
    let end_damaged = starts[starts.len() / 2 + 1].1;
    let mut bytes = fs::read(&segment).unwrap();
    bytes[position as usize + 8..position as usize + 12]
        .copy_from_slice(&0x7fff_0000i32.to_be_bytes());
    fs::write(&segment, bytes).unwrap();

    let (code, out) = lograil(&["dump-log", segment.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!("offsets {first_damaged}..{end_damaged} damaged")),
        "{out}"
    );

    broker.restart();
    let expected: Vec<i64> = (0..first_damaged).chain(end_damaged..RECORDS).collect();
    let (got, errors) = consume_everything(&broker.addr, "damaged", end_damaged, expected.len());
    // The consumer was told, at the first damaged offset, and got every other record once.
    assert_eq!(errors, vec![first_damaged], "errors at {errors:?}");
    assert_eq!(got, expected);

    // The operator sees which offsets, in which file, at which byte.
    assert_describes_damage(
        &broker.addr,
        "damaged",
        first_damaged,
        end_damaged,
        position,
    );
    let log = std::fs::read_to_string(data.with_extension("broker.log")).unwrap();
    assert!(
        log.contains("damaged segment") && log.contains(&format!("position={position}")),
        "{log}"
    );
}

#[test]
fn a_topic_that_cannot_be_opened_stays_offline_and_the_broker_serves_the_others() {
    let mut broker = TestBroker::start_temp(&[]);
    let data = broker.data_dir.clone();
    for topic in ["healthy", "broken"] {
        let (code, out) = lograil(&["topic", "create", topic, "--bootstrap-server", &broker.addr]);
        assert_eq!(code, 0, "{out}");
    }
    broker.stop();
    // The topic's file is unreadable garbage.
    fs::write(data.join("broken.topic"), "partitions=banana\n").unwrap();
    broker.restart();

    let (code, out) = lograil(&[
        "topic",
        "describe",
        "broken",
        "--bootstrap-server",
        &broker.addr,
    ]);
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("KafkaStorageError"), "{out}");
    // Auto-creation must not take the name over (it would wipe the partition's data).
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", &broker.addr)
        .set("message.timeout.ms", "3000")
        .create()
        .unwrap();
    producer
        .send(BaseRecord::<(), _>::to("healthy").payload("fine"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer
        .send(BaseRecord::<(), _>::to("broken").payload("refused"))
        .map_err(|(e, _)| e)
        .unwrap();
    producer.flush(Duration::from_secs(10)).unwrap();
    assert!(
        data.join("broken-0").exists(),
        "the offline topic's data is kept"
    );
    // A consumer of the offline topic is told at once, whether it assigns the partition or
    // subscribes (KAFKA_STORAGE_ERROR alone is retried silently by librdkafka).
    for subscribe in [false, true] {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &broker.addr)
            .set("group.id", format!("offline-reader-{subscribe}"))
            .set("auto.offset.reset", "earliest")
            .create()
            .unwrap();
        let metadata = consumer
            .fetch_metadata(Some("broken"), Duration::from_secs(5))
            .unwrap();
        let topic = &metadata.topics()[0];
        assert_eq!(
            topic.partitions().len(),
            1,
            "partitions from its directories"
        );
        assert_eq!(
            topic.partitions()[0].error(),
            Some(rdkafka::types::RDKafkaRespErr::RD_KAFKA_RESP_ERR_KAFKA_STORAGE_ERROR)
        );
        if subscribe {
            consumer.subscribe(&["broken"]).unwrap();
        } else {
            let mut tpl = TopicPartitionList::new();
            tpl.add_partition_offset("broken", 0, Offset::Beginning)
                .unwrap();
            consumer.assign(&tpl).unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(15);
        let error = loop {
            match consumer.poll(Duration::from_millis(200)) {
                Some(Err(e)) => break Some(e),
                Some(Ok(m)) => panic!("served offset {} of an offline topic", m.offset()),
                None if Instant::now() > deadline => break None,
                None => {}
            }
        };
        assert!(error.is_some(), "subscribe={subscribe}: no error in 15 s");
    }
    let (code, out) = lograil(&[
        "topic",
        "describe",
        "healthy",
        "--bootstrap-server",
        &broker.addr,
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("LogEndOffset: 1"), "{out}");
}

#[test]
fn a_batch_whose_count_lies_in_an_existing_log_is_reported_and_never_served() {
    let mut broker = TestBroker::start_temp(&[]);
    let data = broker.data_dir.clone();
    let (code, out) = lograil(&[
        "topic",
        "create",
        "liar",
        "--bootstrap-server",
        &broker.addr,
    ]);
    assert_eq!(code, 0, "{out}");
    broker.stop();
    // As an older broker stored it: 3 good records, then a batch whose header says 5 records
    // over the 10 it holds (offsets 3..8), then 2 good records at offsets 8 and 9.
    let at = |offset: i64, batch: bytes::Bytes| {
        let mut batch = batch.to_vec();
        batch[..8].copy_from_slice(&offset.to_be_bytes());
        batch
    };
    let values: Vec<String> = (0..13).map(|i| format!("{i:08}")).collect();
    let records = |from: usize, n: usize| -> Vec<log_core::batch::NewRecord> {
        values[from..from + n]
            .iter()
            .map(|v| (None, Some(v.as_bytes()), 1_000))
            .collect()
    };
    let lying = claiming(&log_core::batch::build(&records(3, 10)), 5);
    let mut segment = at(0, log_core::batch::build(&records(0, 3)));
    let lying_at = segment.len();
    segment.extend(at(3, lying));
    segment.extend(at(8, log_core::batch::build(&records(8, 2))));
    let dir = data.join("liar-0");
    for entry in fs::read_dir(&dir).unwrap() {
        fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let log = dir.join("00000000000000000000.log");
    fs::write(&log, &segment).unwrap();

    let (code, out) = lograil(&["dump-log", log.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("offsets 3..8 damaged"), "{out}");

    broker.restart();
    // The intact records on either side, and an error at the lying batch: never two records
    // at one offset, never a silent skip.
    let (got, errors) = consume_everything(&broker.addr, "liar", 8, 5);
    assert_eq!(got, vec![0, 1, 2, 8, 9]);
    assert_eq!(errors, vec![3]);
    assert_describes_damage(&broker.addr, "liar", 3, 8, lying_at as u64);
}

#[test]
fn damage_in_a_closed_segment_is_found_at_start_up_after_a_crash_before_any_read() {
    let mut broker = TestBroker::start_temp(&[
        "--segment-bytes",
        "1048576",
        "--metrics-listen",
        "127.0.0.1:0",
    ]);
    let data = broker.data_dir.clone();
    create_and_fill(&broker.addr, "rot");
    // Bit rot in a record of a closed segment: only the batch's CRC tells.
    broker.kill9();
    let segment = data.join("rot-0/00000000000000000000.log");
    let starts = batch_starts(&segment);
    let (position, first_damaged) = starts[starts.len() / 2];
    let end_damaged = starts[starts.len() / 2 + 1].1;
    let mut bytes = fs::read(&segment).unwrap();
    bytes[position as usize + 200] ^= 0x01;
    fs::write(&segment, bytes).unwrap();

    // On its defaults, after the crash, the broker scrubs its closed segments at start-up:
    // the damage is in the log, `topic describe` and /metrics with nobody reading the topic.
    broker.restart();
    let metrics = broker.metrics_addr.clone().unwrap();
    let damaged = format!("{}", end_damaged - first_damaged);
    let deadline = Instant::now() + Duration::from_secs(30);
    let found = loop {
        let scrape = crate::metrics::get(&metrics, "/metrics").unwrap_or_default();
        let line = scrape
            .lines()
            .find(|l| l.starts_with("lograil_partition_damaged_offsets{topic=\"rot\""))
            .map(str::to_string);
        if line
            .as_deref()
            .is_some_and(|l| l.ends_with(&format!(" {damaged}")))
            || Instant::now() > deadline
        {
            break line;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        found
            .as_deref()
            .is_some_and(|l| l.contains("topic=\"rot\"") && l.ends_with(&format!(" {damaged}"))),
        "{found:?}"
    );
    assert_describes_damage(&broker.addr, "rot", first_damaged, end_damaged, position);
    let log = fs::read_to_string(broker.log_path()).unwrap();
    assert!(
        log.contains("damaged segment") && log.contains(&format!("position={position}")),
        "{log}"
    );
}

/// `lograil dump-log --records seg | head -1` and `lograil consume ... | head -1`: the reader
/// closes the pipe early; the tool ends quietly with status 0, as `cat` would, not with a
/// panic's message and status 101.
#[test]
fn a_tool_whose_reader_goes_away_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;

    let mut broker = TestBroker::start_temp(&["--segment-bytes", "1048576"]);
    create_and_fill(&broker.addr, "piped");
    // The segment is read with the broker stopped; the console consumer runs against it after.
    broker.stop();
    let segment = broker.data_dir.join("piped-0/00000000000000000000.log");
    let dump = ["dump-log", "--records", segment.to_str().unwrap()];
    broker.restart();
    let consume = [
        "consume",
        "--topic",
        "piped",
        "--from-beginning",
        "--max-messages",
        "3000",
        "--bootstrap-server",
        broker.addr.as_str(),
    ];
    // Both write far more than a pipe holds (3,000 lines of 1 KiB values, 3,000 record lines).
    for args in [&consume[..], &dump[..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lograil"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        // The reader is dropped here: the tool's next writes fail with EPIPE.
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
}
