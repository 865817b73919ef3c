//! Kafka behaviours real clients rely on, each with the client that trips on it and on the
//! wire: manual replica assignments in CreateTopics (librdkafka's admin API), APPEND and
//! SUBTRACT of a list config, an emptied group's protocol type and generation (kept while it
//! is empty and across restarts), the leader epoch of committed offsets, ApiVersions v4
//! (Kafka 4.x's Java clients ask it first), and a DELETE of a topic config lograil does not
//! know (MirrorMaker 2's config sync).

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::describe_groups_request::DescribeGroupsRequest;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use serde_json::Value;

use test_support::kafka::{
    alter_configs, create_topic, describe_configs, name, text, BROKER_RESOURCE, TOPIC_RESOURCE,
};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const INVALID_CONFIG: i16 = 40;
const INVALID_REQUEST: i16 = 42;
const APPEND: i8 = 2;
const SUBTRACT: i8 = 3;

fn broker() -> TestBroker {
    TestBroker::start_temp(&["--group-initial-rebalance-delay-ms", "0"])
}

/// Runs `tests/clients/confluent_behaviours.py` (confluent-kafka, installed by `.ci/run`) and
/// returns its JSON line.
fn confluent(addr: &str, args: &[&str]) -> Value {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/clients/confluent_behaviours.py");
    let out = Command::new("python3")
        .env_remove("LD_LIBRARY_PATH")
        .arg(&script)
        .arg(addr)
        .args(args)
        .output()
        .expect("python3 (confluent-kafka is installed by .ci/run)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stdout}\n{stderr}");
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"))
}

/// Runs a Kafka tool (a Java main class, `tests/kafka/kafka.sh tool`; `.ci/run` fetches the
/// jars) with `stdin`; its output, once it succeeded.
fn kafka_tool(args: &[&str], stdin: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka/kafka.sh");
    let mut child = Command::new(&script)
        .env_remove("LD_LIBRARY_PATH")
        .args(["tool", "-"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tests/kafka/kafka.sh (java)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn partition_count(addr: &str, topic: &str) -> Option<usize> {
    let request = MetadataRequest::default()
        .with_topics(Some(vec![
            MetadataRequestTopic::default().with_name(Some(name(topic)))
        ]))
        .with_allow_auto_topic_creation(false);
    let response: MetadataResponse = call(&mut connect(addr), ApiKey::Metadata, 12, &request);
    let t = &response.topics[0];
    (t.error_code == 0).then_some(t.partitions.len())
}

/// Manual replica assignments: (partition, broker ids).
type Assignments<'a> = &'a [(i32, &'a [i32])];

/// CreateTopics v5 of one topic: (error code, message).
fn create(
    addr: &str,
    topic: &str,
    partitions: i32,
    replication: i16,
    assignments: Assignments,
    validate_only: bool,
) -> (i16, String) {
    let request = CreateTopicsRequest::default()
        .with_topics(vec![CreatableTopic::default()
            .with_name(name(topic))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
            .with_assignments(
                assignments
                    .iter()
                    .map(|(index, brokers)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(*index)
                            .with_broker_ids(brokers.iter().map(|b| BrokerId(*b)).collect())
                    })
                    .collect(),
            )])
        .with_timeout_ms(5000)
        .with_validate_only(validate_only);
    let response: CreateTopicsResponse =
        call(&mut connect(addr), ApiKey::CreateTopics, 5, &request);
    let t = &response.topics[0];
    let message = t.error_message.as_ref().map_or("", |m| m.as_str());
    (t.error_code, message.to_string())
}

#[test]
fn create_topics_takes_replica_assignments_onto_this_broker_and_refuses_others_as_kafka() {
    let broker = broker();
    let addr = &broker.addr;

    // librdkafka's admin API (NewTopic with a replica assignment).
    let created = confluent(addr, &["create-assigned", "assigned", "[[1],[1],[1]]"]);
    assert_eq!(created["error"], Value::Null, "{created}");
    assert_eq!(
        created["partitions"],
        serde_json::json!({"0": [1], "1": [1], "2": [1]})
    );
    assert_eq!(partition_count(addr, "assigned"), Some(3));
    let refused = confluent(addr, &["create-assigned", "elsewhere", "[[1],[2]]"]);
    assert_eq!(refused["error"], "INVALID_REPLICA_ASSIGNMENT", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("includes broker 2, but no such broker is registered"),
        "{refused}"
    );
    assert_eq!(partition_count(addr, "elsewhere"), None);

    // On the wire: Kafka's controller's checks, codes and messages.
    assert_eq!(
        create(addr, "wire", -1, -1, &[(1, &[1]), (0, &[1])], false),
        (0, String::new())
    );
    assert_eq!(partition_count(addr, "wire"), Some(2));
    assert_eq!(
        create(addr, "checked", -1, -1, &[(0, &[1])], true).0,
        0,
        "validate_only"
    );
    assert_eq!(
        partition_count(addr, "checked"),
        None,
        "validate_only creates nothing"
    );
    let refusals: [(i32, i16, Assignments, i16, &str); 8] = [
        (
            -1,
            1,
            &[(0, &[1])],
            INVALID_REQUEST,
            "A manual partition assignment was specified, but replication factor was not set to -1.",
        ),
        (
            1,
            -1,
            &[(0, &[1])],
            INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        ),
        (
            -1,
            -1,
            &[(0, &[2])],
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 2, but no such broker is registered.",
        ),
        (
            -1,
            -1,
            &[(0, &[1, 1])],
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 1 more than once.",
        ),
        (
            -1,
            -1,
            &[(0, &[])],
            INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            -1,
            -1,
            &[(0, &[1]), (2, &[1])],
            INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            -1,
            -1,
            &[(-1, &[1])],
            INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        ),
        (
            -1,
            -1,
            &[(0, &[1]), (0, &[1])],
            INVALID_REPLICA_ASSIGNMENT,
            "Found multiple manual partition assignments for partition 0",
        ),
    ];
    for (partitions, replication, assignments, code, message) in refusals {
        assert_eq!(
            create(addr, "refused", partitions, replication, assignments, false),
            (code, message.to_string()),
            "{assignments:?}"
        );
        assert_eq!(partition_count(addr, "refused"), None);
    }
}

#[test]
fn append_and_subtract_apply_to_cleanup_policy_as_in_kafka() {
    let broker = broker();
    let addr = &broker.addr;
    create_topic(addr, "listed", 1);

    let policy = || {
        describe_configs(addr, TOPIC_RESOURCE, "listed")
            .into_iter()
            .find(|(name, _, _)| name == "cleanup.policy")
            .map(|(_, value, _)| value)
            .unwrap()
    };

    // confluent-kafka's incremental_alter_configs.
    let appended = confluent(addr, &["alter-list", "listed", "APPEND", "delete"]);
    assert_eq!(appended["error"], Value::Null, "{appended}");
    assert_eq!(policy(), "delete");
    let compact = confluent(addr, &["alter-list", "listed", "APPEND", "compact"]);
    assert_eq!(compact["error"], Value::Null, "{compact}");
    assert_eq!(policy(), "compact,delete");
    let subtracted = confluent(addr, &["alter-list", "listed", "SUBTRACT", "compact"]);
    assert_eq!(subtracted["error"], Value::Null, "{subtracted}");
    assert_eq!(policy(), "delete");
    let absent = confluent(addr, &["alter-list", "listed", "SUBTRACT", "compact"]);
    assert_eq!(absent["error"], Value::Null, "{absent}");

    // On the wire.
    let alter = |resource_type, resource, changes: &[(&str, i8, Option<&str>)]| {
        alter_configs(addr, resource_type, resource, changes, false)
    };
    let topic = |changes: &[(&str, i8, Option<&str>)]| alter(TOPIC_RESOURCE, "listed", changes);
    assert_eq!(
        topic(&[("cleanup.policy", APPEND, Some("delete,delete"))]).0,
        0
    );
    assert_eq!(policy(), "delete");
    assert_eq!(
        topic(&[("cleanup.policy", SUBTRACT, Some(",compact,"))]).0,
        0
    );
    // An empty list is Kafka's "no cleanup": segments are kept forever.
    assert_eq!(topic(&[("cleanup.policy", SUBTRACT, Some("delete"))]).0, 0);
    assert_eq!(policy(), "");
    assert_eq!(topic(&[("cleanup.policy", APPEND, Some("compact"))]).0, 0);
    assert_eq!(policy(), "compact");
    let (code, message) = topic(&[("cleanup.policy", APPEND, Some("shred"))]);
    assert_eq!(code, INVALID_CONFIG, "{message:?}");
    assert_eq!(policy(), "compact", "a refused list changes nothing");
    let (code, message) = topic(&[("cleanup.policy", APPEND, None)]);
    assert_eq!(code, INVALID_REQUEST, "{message:?}");
    assert_eq!(
        topic(&[("retention.ms", APPEND, Some("5"))]),
        (
            INVALID_CONFIG,
            Some("Can't APPEND to key retention.ms because its type is not LIST.".into())
        )
    );
    assert_eq!(
        topic(&[("retention.ms", SUBTRACT, Some("5"))]).1.as_deref(),
        Some("Can't SUBTRACT to key retention.ms because its type is not LIST.")
    );
    assert_eq!(
        topic(&[
            ("cleanup.policy", APPEND, Some("delete")),
            ("cleanup.policy", SUBTRACT, Some("delete")),
        ]),
        (
            INVALID_REQUEST,
            Some("Error due to duplicate config keys".into())
        )
    );
    // lograil's dynamic broker defaults have no list config.
    assert_eq!(
        alter(
            BROKER_RESOURCE,
            "",
            &[("log.retention.ms", APPEND, Some("5"))]
        )
        .0,
        INVALID_CONFIG
    );
    // What was refused changed nothing: the topic still takes a SET.
    assert_eq!(topic(&[("cleanup.policy", 0, Some("delete"))]).0, 0);
}

/// A classic group member's requests on the wire (JoinGroup v5, SyncGroup v3, LeaveGroup v3).
struct Member<'a> {
    addr: &'a str,
    group: &'a str,
}

impl Member<'_> {
    /// Joins (twice: v4+ hands out the member id first), syncs as the leader; (member id,
    /// generation).
    fn join(&self) -> (String, i32) {
        let join = |member: &str| {
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(text(self.group)))
                .with_session_timeout_ms(10_000)
                .with_rebalance_timeout_ms(10_000)
                .with_member_id(text(member))
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(Bytes::from_static(b"m"))]);
            let response: JoinGroupResponse =
                call(&mut connect(self.addr), ApiKey::JoinGroup, 5, &request);
            response
        };
        let first = join("");
        let member = first.member_id.to_string();
        let joined = if first.error_code == 0 {
            first
        } else {
            join(&member)
        };
        assert_eq!(joined.error_code, 0);
        assert_eq!(joined.leader.as_str(), member, "the only member leads");
        let request = SyncGroupRequest::default()
            .with_group_id(GroupId(text(self.group)))
            .with_generation_id(joined.generation_id)
            .with_member_id(text(&member))
            .with_assignments(vec![SyncGroupRequestAssignment::default()
                .with_member_id(text(&member))
                .with_assignment(Bytes::from_static(b"a"))]);
        let synced: SyncGroupResponse =
            call(&mut connect(self.addr), ApiKey::SyncGroup, 3, &request);
        assert_eq!(synced.error_code, 0);
        (member, joined.generation_id)
    }

    fn commit(&self, member: &str, generation: i32, topic: &str) {
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(self.group)))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(text(member))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(name(topic))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(1)
                    .with_committed_leader_epoch(-1)])]);
        let response: OffsetCommitResponse =
            call(&mut connect(self.addr), ApiKey::OffsetCommit, 8, &request);
        assert_eq!(response.topics[0].partitions[0].error_code, 0);
    }

    fn leave(&self, member: &str) {
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(self.group)))
            .with_members(vec![MemberIdentity::default().with_member_id(text(member))]);
        let response: LeaveGroupResponse =
            call(&mut connect(self.addr), ApiKey::LeaveGroup, 3, &request);
        assert_eq!(response.error_code, 0);
    }

    /// (protocol type, state) as ListGroups v4 and DescribeGroups v5 both answer them.
    fn listed(&self) -> (String, String) {
        let listed: ListGroupsResponse = call(
            &mut connect(self.addr),
            ApiKey::ListGroups,
            4,
            &ListGroupsRequest::default(),
        );
        let group = listed
            .groups
            .iter()
            .find(|g| g.group_id.as_str() == self.group)
            .expect("listed");
        let described: DescribeGroupsResponse = call(
            &mut connect(self.addr),
            ApiKey::DescribeGroups,
            5,
            &DescribeGroupsRequest::default().with_groups(vec![GroupId(text(self.group))]),
        );
        let d = &described.groups[0];
        assert_eq!(
            (d.protocol_type.as_str(), d.group_state.as_str()),
            (group.protocol_type.as_str(), group.group_state.as_str()),
            "DescribeGroups and ListGroups agree"
        );
        (
            group.protocol_type.to_string(),
            group.group_state.to_string(),
        )
    }
}

#[test]
fn an_emptied_group_keeps_its_protocol_type_and_generation_across_restarts() {
    let mut broker = broker();
    let addr = broker.addr.clone();
    create_topic(&addr, "read", 1);
    let member = Member {
        addr: &addr,
        group: "billing",
    };
    let (id, generation) = member.join();
    assert_eq!(generation, 1);
    member.commit(&id, generation, "read");
    member.leave(&id);
    // Kafka: the last member out makes the next generation, Empty, of type "consumer".
    assert_eq!(member.listed(), ("consumer".into(), "Empty".into()));
    // The coordinator's timer (which forgot empty groups) has run a few times since.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(member.listed(), ("consumer".into(), "Empty".into()));
    let (id, generation) = member.join();
    assert_eq!(
        generation, 3,
        "generations keep counting after an empty period"
    );
    // The group's record (generation 4, Empty) is durable once LeaveGroup is answered.
    member.leave(&id);
    broker.kill9();
    broker.restart();
    let addr = broker.addr.clone();
    let member = Member {
        addr: &addr,
        group: "billing",
    };
    assert_eq!(member.listed(), ("consumer".into(), "Empty".into()));
    let (_, generation) = member.join();
    assert_eq!(generation, 5, "and across restarts");
}

#[test]
fn librdkafka_lists_an_emptied_consumer_group_as_a_consumer_group_and_sees_epoch_0() {
    let mut broker = broker();
    let addr = broker.addr.clone();
    create_topic(&addr, "orders", 3);
    // The Java producer's batches carry no leader epoch (-1; librdkafka's carry 0).
    let lines: String = (0..30).map(|i| format!("k{i}:v{i}\n")).collect();
    kafka_tool(
        &[
            "org.apache.kafka.tools.ConsoleProducer",
            "--bootstrap-server",
            &addr,
            "--topic",
            "orders",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
        ],
        &lines,
    );

    let run = confluent(&addr, &["consume-commit", "orders", "payments", "30"]);
    assert_eq!(run["consumed"], 30, "{run}");
    // librdkafka commits the epoch of the batches it read, here none (-1); OffsetFetch answers
    // with the partition's, 0, as a Kafka cluster (whose batches carry it) does.
    let committed: Vec<&Value> = run["committed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["offset"].as_i64().unwrap() >= 0)
        .collect();
    let total: i64 = committed
        .iter()
        .map(|c| c["offset"].as_i64().unwrap())
        .sum();
    assert_eq!(total, 30, "{run}");
    for c in committed {
        assert_eq!(c["leader_epoch"], 0, "{run}");
    }
    let expected = serde_json::json!({"simple": false, "state": "EMPTY"});
    let groups = confluent(&addr, &["list-groups"]);
    assert_eq!(groups["listed"]["payments"], expected, "{groups}");
    assert_eq!(groups["described"]["payments"], expected, "{groups}");
    broker.stop();
    broker.restart();
    let groups = confluent(&broker.addr, &["list-groups"]);
    assert_eq!(
        groups["listed"]["payments"], expected,
        "after a restart: {groups}"
    );
}

/// OffsetFetch v7 of partitions 0 and 1 of `topic`: their (offset, leader epoch).
fn fetch_committed(addr: &str, group: &str, topic: &str) -> Vec<(i64, i32)> {
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(name(topic))
            .with_partition_indexes(vec![0, 1])]));
    let response: OffsetFetchResponse = call(&mut connect(addr), ApiKey::OffsetFetch, 7, &request);
    response.topics[0]
        .partitions
        .iter()
        .map(|p| (p.committed_offset, p.committed_leader_epoch))
        .collect()
}

#[test]
fn offset_fetch_answers_the_committed_leader_epoch_or_the_partitions() {
    let broker = broker();
    let addr = &broker.addr;
    create_topic(addr, "epochs", 2);
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text("simple")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(name("epochs"))
            .with_partitions(vec![
                OffsetCommitRequestPartition::default()
                    .with_partition_index(0)
                    .with_committed_offset(3)
                    .with_committed_leader_epoch(-1),
                OffsetCommitRequestPartition::default()
                    .with_partition_index(1)
                    .with_committed_offset(4)
                    .with_committed_leader_epoch(7),
            ])]);
    let response: OffsetCommitResponse =
        call(&mut connect(addr), ApiKey::OffsetCommit, 8, &request);
    assert!(response.topics[0]
        .partitions
        .iter()
        .all(|p| p.error_code == 0));
    assert_eq!(
        fetch_committed(addr, "simple", "epochs"),
        vec![(3, 0), (4, 7)]
    );
    // Nothing committed: offset and epoch unknown.
    assert_eq!(
        fetch_committed(addr, "nobody", "epochs"),
        vec![(-1, -1), (-1, -1)]
    );
}

#[test]
fn api_versions_v4_is_served_and_the_java_client_needs_no_fallback() {
    let broker = TestBroker::start_temp(&["--metrics-listen", "127.0.0.1:0"]);
    let addr = &broker.addr;
    let response: ApiVersionsResponse = call(
        &mut connect(addr),
        ApiKey::ApiVersions,
        4,
        &ApiVersionsRequest::default()
            .with_client_software_name(text("test"))
            .with_client_software_version(text("1")),
    );
    assert_eq!(response.error_code, 0);
    let own = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .unwrap();
    assert_eq!((own.min_version, own.max_version), (0, 4));

    // A Kafka tool (the Java admin client): every connection's first request is ApiVersions
    // v4, answered, with no v3 retry after an UNSUPPORTED_VERSION.
    let listed = kafka_tool(
        &[
            "org.apache.kafka.tools.TopicCommand",
            "--bootstrap-server",
            addr,
            "--list",
        ],
        "",
    );
    assert!(listed.contains("__consumer_offsets"), "{listed}");
    let samples = crate::metrics::scrape(broker.metrics_addr.as_deref().unwrap());
    let requests = |version| {
        crate::metrics::value(
            &samples,
            "lograil_requests_total",
            &[("api", "ApiVersions"), ("version", version)],
        )
        .unwrap_or(0.0)
    };
    assert!(requests("4") >= 1.0, "the Java client asks v4");
    assert_eq!(requests("3"), 0.0, "and does not fall back to v3");
    let errors = crate::metrics::value(
        &samples,
        "lograil_response_errors_total",
        &[("api", "ApiVersions"), ("version", "4")],
    );
    assert_eq!(errors, None, "no UNSUPPORTED_VERSION");
}

/// MirrorMaker 2 syncs a topic's configs with one IncrementalAlterConfigs per topic: a SET of
/// each config the source sets, a DELETE of each of the source's configs at their default,
/// every name the source's Kafka version has. Kafka takes a DELETE of a config that is not set,
/// whatever its name, so one name lograil does not know must not refuse the whole sync.
#[test]
fn a_delete_of_a_topic_config_lograil_does_not_know_is_no_error_as_in_kafka() {
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    let broker = broker();
    let addr = &broker.addr;
    create_topic(addr, "synced", 1);
    let retention = || {
        describe_configs(addr, TOPIC_RESOURCE, "synced")
            .into_iter()
            .find(|(name, _, _)| name == "retention.ms")
            .map(|(_, value, _)| value)
    };

    // What MirrorMaker sends for a source topic with retention.ms set (names from Kafka
    // versions lograil may not know among the defaults).
    let sync = [
        ("retention.ms", SET, Some("3600000")),
        ("segment.bytes", DELETE, None),
        ("a.topic.config.of.a.later.kafka", DELETE, None),
        ("lograil.no.such.config", DELETE, None),
    ];
    let (code, message) = alter_configs(addr, TOPIC_RESOURCE, "synced", &sync, false);
    assert_eq!(code, 0, "{message:?}");
    assert_eq!(
        retention().as_deref(),
        Some("3600000"),
        "the SET took effect"
    );
    assert!(
        describe_configs(addr, TOPIC_RESOURCE, "synced")
            .iter()
            .all(|(name, _, _)| !name.contains("no.such") && !name.contains("later.kafka")),
        "a deleted unknown name is not described afterwards"
    );

    // A SET of an unknown name is still refused (Kafka: "Unknown topic config name"), and
    // refuses the whole resource's changes.
    let (code, message) = alter_configs(
        addr,
        TOPIC_RESOURCE,
        "synced",
        &[
            ("retention.ms", SET, Some("7200000")),
            ("a.topic.config.of.a.later.kafka", SET, Some("1")),
        ],
        false,
    );
    assert_eq!(code, INVALID_CONFIG, "{message:?}");
    assert_eq!(retention().as_deref(), Some("3600000"), "nothing changed");
}
