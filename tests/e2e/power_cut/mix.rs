//! Power cuts under everything at once, on the broker's defaults (issue 36): while an
//! idempotent and a plain producer write with acks=all, librdkafka's transactional producer
//! commits (and every third time aborts) transactions, a keyed producer writes to a compacted
//! topic the cleaner keeps swapping, a share consumer acknowledges records, and an admin
//! creates and deletes topics, adds SCRAM users and ACLs and commits group offsets, the power
//! is cut at a seeded random moment. After every start (which must succeed):
//! - every acknowledged record of both producers is at its offset, and no offset holds another;
//! - `read_committed` serves every committed transaction whole, once, and no aborted one;
//! - each key of the compacted topic serves its last acknowledged value or a later one;
//! - every topic whose creation was acknowledged is there unless its deletion was, and no topic
//!   whose deletion was acknowledged is; every SCRAM user, ACL and group commit acknowledged is
//!   there;
//! - no share record whose acknowledgement was committed is delivered again.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use consumer::QueueConsumer;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ApiKey, CreateAclsRequest,
    CreateAclsResponse, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, DescribeAclsRequest, DescribeAclsResponse,
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, GroupId,
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
};
use log_core::batch;
use rdkafka::consumer::BaseConsumer;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::Message;
use test_support::cluster::client_config_for;
use test_support::kafka::{
    name, produce, rdkafka_reader, set_configs, text, try_create_topic, wait_until, GROUP_RESOURCE,
};
use test_support::wire::{call, connect, try_call};
use test_support::{PowerCutFs, TestBroker};

use super::{cuts, next, producer, settle, survivors, Acked, Figures, Producing};

const IDEM: &str = "idem";
const PLAIN: &str = "plain";
const TXN: &str = "txn";
const COMPACTED: &str = "compacted";
const TASKS: &str = "tasks";
const SHARE_GROUP: &str = "cut-share";
const OFFSETS_GROUP: &str = "cut-offsets";
const KEYS: usize = 20;

/// What the admin worker was answered with success.
#[derive(Debug, Default)]
struct Admin {
    created: BTreeSet<String>,
    deleted: BTreeSet<String>,
    /// A deletion or a group commit sent whose answer the cut took: it may have been done.
    deleting: Option<String>,
    committing: Option<i64>,
    users: BTreeSet<String>,
    acls: BTreeSet<String>,
    /// The last group commit acknowledged.
    commit: Option<i64>,
}

/// What was acknowledged, across rounds.
#[derive(Debug, Default)]
struct Acknowledged {
    idem: Arc<Mutex<Acked>>,
    plain: Arc<Mutex<Acked>>,
    /// Committed transactions' values, and aborted ones'.
    committed: Mutex<BTreeSet<String>>,
    aborted: Mutex<BTreeSet<String>>,
    /// Per key of the compacted topic, the sequence number of its last acknowledged value.
    latest: Mutex<BTreeMap<usize, u64>>,
    admin: Mutex<Admin>,
    /// Share records (offsets of `tasks`) whose acknowledgement was committed.
    shared: Mutex<BTreeSet<i64>>,
}

#[test]
fn on_the_defaults_a_power_cut_under_a_mixed_load_loses_nothing_acknowledged() {
    let n = cuts(6);
    let tmp = tempfile::tempdir().unwrap();
    let mount = tmp.path().join("mnt");
    std::fs::create_dir(&mount).unwrap();
    let mut fs = PowerCutFs::mount(&mount).expect("a FUSE mount (/dev/fuse, as root)");
    let flags = [
        "--authorizer-class-name",
        "acl",
        "--super-users",
        "User:ANONYMOUS",
        "--log-cleaner-backoff-ms",
        "50",
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "200",
        "--group-share-record-lock-duration-ms",
        "1000",
    ];
    let log = tmp.path().join("broker.log");
    let mut broker = TestBroker::start_logging_to(&mount.join("data"), &log, &flags);
    set_up(&broker.addr);
    let acked = Acknowledged::default();
    let mut figures = Figures::default();
    let mut seed = 0x3c0_ffee;
    let mut transactions = 0;
    for round in 0..n {
        add_tasks(&broker.addr, round);
        let stop = Arc::new(AtomicBool::new(false));
        let cut_at = std::thread::scope(|s| {
            spawn_workers(s, &broker.addr, round, &acked, &stop);
            std::thread::sleep(Duration::from_millis(400 + next(&mut seed) % 600));
            broker.kill9();
            let cut_at = Instant::now();
            stop.store(true, Ordering::Relaxed);
            cut_at
        });
        fs.cut().unwrap();
        broker.restart();

        let addr = &broker.addr;
        for (topic, partitions, acked) in [(IDEM, 3, &acked.idem), (PLAIN, 1, &acked.plain)] {
            let mut acked = acked.lock().unwrap();
            settle(
                &mut acked,
                survivors(addr, topic, partitions),
                cut_at,
                &mut figures,
            );
        }
        transactions = check_transactions(addr, &acked);
        check_compacted(addr, &acked.latest.lock().unwrap());
        check_admin(addr, &mut acked.admin.lock().unwrap());
        check_shares(addr, &acked.shared.lock().unwrap());
    }
    let admin = acked.admin.lock().unwrap();
    eprintln!(
        "mixed load, {n} cuts: {figures:?}; {transactions} transactions committed, {} share \
         acknowledgements, {} topics created and {} deleted, {} SCRAM users, {} ACLs, last \
         group commit {:?}",
        acked.shared.lock().unwrap().len(),
        admin.created.len(),
        admin.deleted.len(),
        admin.users.len(),
        admin.acls.len(),
        admin.commit,
    );
    assert!(figures.acknowledged > 100, "{figures:?}");
    assert_eq!((figures.lost, figures.reused), (0, 0), "{figures:?}");
    assert!(transactions > 0, "no transaction was committed");
    let log = std::fs::read_to_string(&log).unwrap();
    assert!(!log.contains("panicked"), "{log}");
}

fn set_up(addr: &str) {
    assert_eq!(try_create_topic(addr, IDEM, 3, &[]), 0);
    assert_eq!(try_create_topic(addr, PLAIN, 1, &[]), 0);
    assert_eq!(try_create_topic(addr, TXN, 1, &[]), 0);
    let compacted = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "100"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(try_create_topic(addr, COMPACTED, 1, &compacted), 0);
    assert_eq!(try_create_topic(addr, TASKS, 1, &[]), 0);
    set_configs(
        addr,
        GROUP_RESOURCE,
        SHARE_GROUP,
        &[("share.auto.offset.reset", "earliest")],
    );
}

/// 5,000 records more for the share group to work through.
fn add_tasks(addr: &str, round: usize) {
    for chunk in 0..10 {
        let values: Vec<String> = (0..500)
            .map(|i| format!("task-{round}-{chunk}-{i}"))
            .collect();
        let records: Vec<batch::NewRecord> = values
            .iter()
            .map(|v| (None, Some(v.as_bytes()), 1))
            .collect();
        assert_eq!(produce(addr, TASKS, 0, batch::build(&records)).0, 0);
    }
}

fn spawn_workers<'s>(
    s: &'s std::thread::Scope<'s, '_>,
    addr: &str,
    round: usize,
    acked: &'s Acknowledged,
    stop: &'s Arc<AtomicBool>,
) {
    for (topic, partitions, idempotent, acked) in [
        (IDEM, 3, true, &acked.idem),
        (PLAIN, 1, false, &acked.plain),
    ] {
        let how = Producing {
            addr: addr.to_string(),
            topic,
            partitions,
            idempotent,
            acks: -1,
            round,
        };
        let (acked, stop) = (acked.clone(), stop.clone());
        s.spawn(move || producer(how, acked, stop));
    }
    let addr = addr.to_string();
    let a = addr.clone();
    s.spawn(move || transact(&a, round, acked, stop));
    let a = addr.clone();
    s.spawn(move || compacting(&a, round, acked, stop));
    let a = addr.clone();
    s.spawn(move || administer(&a, round, acked, stop));
    s.spawn(move || share(&addr, acked, stop));
}

/// librdkafka's transactional producer: 5 records a transaction, every third aborted.
fn transact(addr: &str, round: usize, acked: &Acknowledged, stop: &AtomicBool) {
    let timeout = Duration::from_secs(3);
    let producer: ThreadedProducer<_> = rdkafka::ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("transactional.id", "cut-txn")
        .set("transaction.timeout.ms", "2000")
        .set("message.timeout.ms", "2000")
        .create()
        .unwrap();
    if producer.init_transactions(timeout).is_err() {
        return;
    }
    for t in 0.. {
        if stop.load(Ordering::Relaxed) || producer.begin_transaction().is_err() {
            return;
        }
        let values: Vec<String> = (0..5).map(|i| format!("r{round}-t{t}-{i}")).collect();
        let sent = values.iter().all(|v| {
            producer
                .send(BaseRecord::<(), _>::to(TXN).payload(v))
                .is_ok()
        });
        // Never committed (an abort, or a commit never asked for): never to be served. A
        // commit asked for but not answered is in doubt: it is in neither set, and the
        // check still holds it to all or nothing.
        let commit = t % 3 != 2 && sent;
        if !commit {
            acked.aborted.lock().unwrap().extend(values.iter().cloned());
        }
        if !sent {
            return;
        }
        if !commit {
            if producer.abort_transaction(timeout).is_err() {
                return;
            }
            continue;
        }
        if producer.commit_transaction(timeout).is_err() {
            return;
        }
        acked.committed.lock().unwrap().extend(values);
    }
}

/// acks=all keyed writes to the compacted topic, each value `<key>:<sequence>`.
fn compacting(addr: &str, round: usize, acked: &Acknowledged, stop: &AtomicBool) {
    let mut stream = connect(addr);
    for n in 0u64.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let sequence = (round as u64) << 32 | n;
        let keys: Vec<String> = (0..KEYS).map(|k| format!("k{k}")).collect();
        let values: Vec<String> = (0..KEYS).map(|k| format!("{k}:{sequence}")).collect();
        let records: Vec<batch::NewRecord> = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (Some(k.as_bytes()), Some(v.as_bytes()), 1))
            .collect();
        match super::try_produce(&mut stream, COMPACTED, 0, batch::build(&records), -1) {
            Some((0, _)) => {
                let mut latest = acked.latest.lock().unwrap();
                for k in 0..KEYS {
                    latest.insert(k, sequence);
                }
            }
            _ => return,
        }
    }
}

/// Topic creations and deletions, SCRAM users, ACLs and group commits, in turn.
fn administer(addr: &str, round: usize, acked: &Acknowledged, stop: &AtomicBool) {
    let mut stream = connect(addr);
    for n in 0.. {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let id = format!("{round}-{n}");
        let done = match n % 5 {
            0 => create(&mut stream, &format!("t-{id}")).map(|name| {
                acked.admin.lock().unwrap().created.insert(name);
            }),
            1 => {
                let victim = {
                    let admin = acked.admin.lock().unwrap();
                    admin.created.difference(&admin.deleted).next().cloned()
                };
                match victim {
                    Some(victim) => {
                        acked.admin.lock().unwrap().deleting = Some(victim.clone());
                        delete(&mut stream, &victim).map(|()| {
                            let mut admin = acked.admin.lock().unwrap();
                            admin.deleting = None;
                            admin.deleted.insert(victim);
                        })
                    }
                    None => Some(()),
                }
            }
            2 => add_user(&mut stream, &format!("u-{id}")).map(|user| {
                acked.admin.lock().unwrap().users.insert(user);
            }),
            3 => add_acl(&mut stream, &format!("User:p-{id}")).map(|principal| {
                acked.admin.lock().unwrap().acls.insert(principal);
            }),
            _ => {
                let offset = ((round as i64) << 20) + n;
                acked.admin.lock().unwrap().committing = Some(offset);
                commit_offset(&mut stream, offset).map(|()| {
                    let mut admin = acked.admin.lock().unwrap();
                    admin.committing = None;
                    admin.commit = Some(offset);
                })
            }
        };
        if done.is_none() {
            return;
        }
    }
}

/// Some(name) once the creation of topic `name` is acknowledged; `None` once the broker is gone.
fn create(stream: &mut std::net::TcpStream, topic: &str) -> Option<String> {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(1)
            .with_replication_factor(-1)])
        .with_timeout_ms(30_000);
    let r: CreateTopicsResponse = try_call(stream, ApiKey::CreateTopics, 5, &request)?;
    assert_eq!(r.topics[0].error_code, 0, "{r:?}");
    Some(topic.to_string())
}

fn delete(stream: &mut std::net::TcpStream, topic: &str) -> Option<()> {
    let request = DeleteTopicsRequest::default()
        .with_topic_names(vec![name(topic)])
        .with_timeout_ms(30_000);
    let r: DeleteTopicsResponse = try_call(stream, ApiKey::DeleteTopics, 5, &request)?;
    assert_eq!(r.responses[0].error_code, 0, "{r:?}");
    Some(())
}

fn add_user(stream: &mut std::net::TcpStream, user: &str) -> Option<String> {
    let upsertion = ScramCredentialUpsertion::default()
        .with_name(text(user))
        .with_mechanism(1)
        .with_iterations(4096)
        .with_salt(bytes::Bytes::from_static(b"0123456789abcdef"))
        .with_salted_password(bytes::Bytes::from(vec![7u8; 32]));
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsertion]);
    let r: AlterUserScramCredentialsResponse =
        try_call(stream, ApiKey::AlterUserScramCredentials, 0, &request)?;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    Some(user.to_string())
}

/// An ACL allowing `principal` to read topic `idem`.
fn add_acl(stream: &mut std::net::TcpStream, principal: &str) -> Option<String> {
    let creation = AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(text(IDEM))
        .with_resource_pattern_type(3)
        .with_principal(text(principal))
        .with_host(text("*"))
        .with_operation(3)
        .with_permission_type(3);
    let request = CreateAclsRequest::default().with_creations(vec![creation]);
    let r: CreateAclsResponse = try_call(stream, ApiKey::CreateAcls, 3, &request)?;
    assert_eq!(r.results[0].error_code, 0, "{r:?}");
    Some(principal.to_string())
}

fn commit_offset(stream: &mut std::net::TcpStream, offset: i64) -> Option<()> {
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(OFFSETS_GROUP)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name(PLAIN))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let r: OffsetCommitResponse = try_call(stream, ApiKey::OffsetCommit, 8, &request)?;
    assert_eq!(r.topics[0].partitions[0].error_code, 0, "{r:?}");
    Some(())
}

/// lograil's share consumer: receives, acknowledges and commits; what a commit answered
/// without a failure is acknowledged.
fn share(addr: &str, acked: &Acknowledged, stop: &AtomicBool) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let bounded = Duration::from_secs(2);
        let config = client_config_for(addr).with("group.id", SHARE_GROUP);
        let Ok(Ok(queue)) =
            tokio::time::timeout(bounded, QueueConsumer::from_config(&config)).await
        else {
            return;
        };
        queue.subscribe(&[TASKS]);
        while !stop.load(Ordering::Relaxed) {
            let Ok(Ok(deliveries)) =
                tokio::time::timeout(bounded, queue.receive(Duration::from_millis(200))).await
            else {
                return;
            };
            let offsets: Vec<i64> = deliveries.iter().map(|d| d.record().offset).collect();
            for d in &deliveries {
                d.ack();
            }
            match tokio::time::timeout(bounded, queue.commit()).await {
                Ok(Ok(failures)) if failures.is_empty() => {
                    acked.shared.lock().unwrap().extend(offsets)
                }
                _ => return,
            }
        }
    });
}

/// Waits until no transaction is open on `txn`, then reads it `read_committed`: every
/// committed transaction whole and once, no aborted one. Returns how many were committed.
fn check_transactions(addr: &str, acked: &Acknowledged) -> usize {
    let latest = |isolation| {
        let request = kafka_protocol::messages::ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_isolation_level(isolation)
            .with_topics(vec![
                kafka_protocol::messages::list_offsets_request::ListOffsetsTopic::default()
                    .with_name(name(TXN))
                    .with_partitions(vec![
                        kafka_protocol::messages::list_offsets_request::ListOffsetsPartition::default()
                            .with_timestamp(-1),
                    ]),
            ]);
        let r: kafka_protocol::messages::ListOffsetsResponse =
            call(&mut connect(addr), ApiKey::ListOffsets, 5, &request);
        r.topics[0].partitions[0].offset
    };
    // The coordinator aborts a transaction the cut left open once its 2 s timeout passes.
    wait_until("no open transaction", Duration::from_secs(30), || {
        latest(1) == latest(0)
    });
    let reader = rdkafka_reader(
        addr,
        "cut-txn-reader",
        TXN,
        0,
        &[
            ("isolation.level", "read_committed"),
            ("enable.partition.eof", "true"),
        ],
    );
    let values = read_to_end(&reader);
    let committed = acked.committed.lock().unwrap();
    let aborted = acked.aborted.lock().unwrap();
    let mut seen = BTreeSet::new();
    for v in &values {
        assert!(seen.insert(v.clone()), "{v} served twice");
        assert!(!aborted.contains(v), "{v} of an aborted transaction served");
    }
    let missing: Vec<&String> = committed.difference(&seen).collect();
    assert!(missing.is_empty(), "committed but not served: {missing:?}");
    // Each transaction is whole: all five of its records, or none.
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for v in &seen {
        *per.entry(v.rsplit_once('-').unwrap().0).or_default() += 1;
    }
    assert!(
        per.values().all(|n| *n == 5),
        "a partial transaction: {per:?}"
    );
    committed.len() / 5
}

/// The values of `reader`'s partition up to its end.
fn read_to_end(reader: &BaseConsumer) -> Vec<String> {
    let mut values = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(Instant::now() < deadline, "no end of partition in 30 s");
        match reader.poll(Duration::from_millis(200)) {
            Some(Ok(m)) => values.push(String::from_utf8(m.payload().unwrap().to_vec()).unwrap()),
            Some(Err(rdkafka::error::KafkaError::PartitionEOF(_))) => return values,
            Some(Err(e)) => panic!("read_committed: {e}"),
            None => {}
        }
    }
}

/// Each key's served value is its last acknowledged one, or a later one.
fn check_compacted(addr: &str, latest: &BTreeMap<usize, u64>) {
    let reader = rdkafka_reader(
        addr,
        "cut-compacted-reader",
        COMPACTED,
        0,
        &[("enable.partition.eof", "true")],
    );
    let mut served: BTreeMap<usize, u64> = BTreeMap::new();
    for v in read_to_end(&reader) {
        let (k, sequence) = v.split_once(':').unwrap();
        served.insert(k.parse().unwrap(), sequence.parse().unwrap());
    }
    for (k, acked) in latest {
        let got = served.get(k).copied();
        assert!(
            got >= Some(*acked),
            "key {k}: served {got:?}, acknowledged {acked}"
        );
    }
}

fn check_admin(addr: &str, admin: &mut Admin) {
    let topics = test_support::lograil_stdout(&["topic", "list", "--bootstrap-server", addr]);
    let listed: BTreeSet<&str> = topics.split_whitespace().collect();
    for t in admin.created.difference(&admin.deleted) {
        let maybe_deleted = admin.deleting.as_ref() == Some(t);
        assert!(
            listed.contains(t.as_str()) || maybe_deleted,
            "created topic {t} lost"
        );
    }
    for t in &admin.deleted {
        assert!(!listed.contains(t.as_str()), "deleted topic {t} is back");
    }
    let users: DescribeUserScramCredentialsResponse = call(
        &mut connect(addr),
        ApiKey::DescribeUserScramCredentials,
        0,
        &DescribeUserScramCredentialsRequest::default(),
    );
    let described: BTreeSet<String> = users.results.iter().map(|r| r.user.to_string()).collect();
    let lost: Vec<&String> = admin.users.difference(&described).collect();
    assert!(lost.is_empty(), "SCRAM users lost: {lost:?}");
    let filter = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let acls: DescribeAclsResponse = call(&mut connect(addr), ApiKey::DescribeAcls, 3, &filter);
    let principals: BTreeSet<String> = acls
        .resources
        .iter()
        .flat_map(|r| r.acls.iter().map(|a| a.principal.to_string()))
        .collect();
    let lost: Vec<&String> = admin.acls.difference(&principals).collect();
    assert!(lost.is_empty(), "ACLs lost: {lost:?}");
    if let Some(offset) = admin.commit {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(OFFSETS_GROUP)))
            .with_topics(Some(vec![
                kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic::default()
                    .with_name(name(PLAIN))
                    .with_partition_indexes(vec![0]),
            ]));
        let r: OffsetFetchResponse = call(&mut connect(addr), ApiKey::OffsetFetch, 7, &request);
        let got = r.topics[0].partitions[0].committed_offset;
        assert!(
            got == offset || Some(got) == admin.committing,
            "group commit: {got}, acknowledged {offset}"
        );
        admin.commit = Some(got);
    }
    // What the cut left undecided is settled by what the broker has now.
    if let Some(t) = admin.deleting.take() {
        if !listed.contains(t.as_str()) {
            admin.deleted.insert(t);
        }
    }
    admin.committing = None;
}

/// A new member of the share group gets no record whose acknowledgement was committed.
fn check_shares(addr: &str, shared: &BTreeSet<i64>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let redelivered = rt.block_on(async {
        let config = client_config_for(addr).with("group.id", SHARE_GROUP);
        let queue = QueueConsumer::from_config(&config).await.unwrap();
        queue.subscribe(&[TASKS]);
        let mut redelivered = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            for d in queue.receive(Duration::from_millis(200)).await.unwrap() {
                if shared.contains(&d.record().offset) {
                    redelivered.push(d.record().offset);
                }
                d.release(Duration::ZERO);
            }
        }
        let _ = queue.close().await;
        redelivered
    });
    assert!(
        redelivered.is_empty(),
        "acknowledged, then delivered again: {redelivered:?}"
    );
}
