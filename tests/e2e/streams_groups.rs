//! Streams groups (KIP-1071) on the wire, with an authorizer: a member needs READ on the group
//! and DESCRIBE on every topic of its topology; the internal topics are created only where
//! its principal may CREATE (the others are named in the status, never created); refused
//! heartbeats carry Kafka's errors and messages; a heartbeat once the topics exist gets every
//! task; StreamsGroupDescribe shows the group only to a principal that may see its topics.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::streams_group_heartbeat_request::{
    KeyValue, Subtopology, TaskIds, TopicInfo, Topology,
};
use kafka_protocol::messages::streams_group_heartbeat_response::TaskIds as AnsweredTasks;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse, TopicName,
};
use test_support::kafka::{create_topic, describe_configs, text};
use test_support::wire::{call, connect};
use test_support::TestBroker;

const ALLOW: i8 = 3;
const DENY: i8 = 2;

/// An ACL for ANONYMOUS: `permission` (ALLOW or DENY) of `operation` (Kafka's code) on a
/// resource (type, name).
fn acl(addr: &str, (resource_type, name): (i8, &str), operation: i8, permission: i8) {
    let creation = AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(text(name))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(text("User:ANONYMOUS"))
        .with_host(text("*"))
        .with_operation(operation)
        .with_permission_type(permission);
    let created: CreateAclsResponse = call(
        &mut connect(addr),
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(vec![creation]),
    );
    assert_eq!(created.results[0].error_code, 0);
}

fn info(name: &str) -> TopicInfo {
    TopicInfo::default()
        .with_name(TopicName(text(name)))
        .with_topic_configs(vec![KeyValue::default()
            .with_key(text("cleanup.policy"))
            .with_value(text("compact"))])
}

/// A word count's topology over `input`: its repartition topic and a changelog.
fn topology(input: &str) -> Topology {
    let first = Subtopology::default()
        .with_subtopology_id(text("0"))
        .with_source_topics(vec![TopicName(text(input))])
        .with_repartition_sink_topics(vec![TopicName(text("app-words-repartition"))]);
    let second = Subtopology::default()
        .with_subtopology_id(text("1"))
        .with_source_topics(vec![TopicName(text("app-words-repartition"))])
        .with_repartition_source_topics(vec![info("app-words-repartition")])
        .with_state_changelog_topics(vec![info("app-counts-changelog")]);
    Topology::default().with_subtopologies(vec![first, second])
}

fn join(group: &str, member: &str, topology: Topology) -> StreamsGroupHeartbeatRequest {
    StreamsGroupHeartbeatRequest::default()
        .with_group_id(text(group).into())
        .with_member_id(text(member))
        .with_rebalance_timeout_ms(30_000)
        .with_topology(Some(topology))
        .with_active_tasks(Some(vec![]))
        .with_standby_tasks(Some(vec![]))
        .with_warmup_tasks(Some(vec![]))
        .with_process_id(Some(text("process-1")))
}

fn heartbeat(addr: &str, request: &StreamsGroupHeartbeatRequest) -> StreamsGroupHeartbeatResponse {
    call(
        &mut connect(addr),
        ApiKey::StreamsGroupHeartbeat,
        0,
        request,
    )
}

fn statuses(r: &StreamsGroupHeartbeatResponse) -> Vec<(i8, String)> {
    r.status
        .iter()
        .flatten()
        .map(|s| (s.status_code, s.status_detail.to_string()))
        .collect()
}

fn tasks(list: &Option<Vec<AnsweredTasks>>) -> Vec<(String, Vec<i32>)> {
    list.iter()
        .flatten()
        .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
        .collect()
}

#[test]
fn a_streams_member_gets_what_its_principal_may_have_and_kafkas_errors() {
    // Everything allowed where no ACL speaks: DESCRIBE denied on `hidden`, READ on the group
    // `secret`, CREATE on the cluster; the changelog has an ACL (DESCRIBE allowed) but none
    // that allows CREATE. ALTER on the cluster is allowed so that ACLs can still be added.
    let broker = TestBroker::start_temp(&[
        "--authorizer-class-name",
        "acl",
        "--allow-everyone-if-no-acl-found",
        "true",
        "--group-streams-initial-rebalance-delay-ms",
        "0",
        "--group-streams-assignment-interval-ms",
        "0",
    ]);
    let addr = &broker.addr;
    create_topic(addr, "lines", 2);
    create_topic(addr, "hidden", 2);
    let (cluster, changelog) = ((4, "kafka-cluster"), (2, "app-counts-changelog"));
    let (read, alter, create, describe) = (3, 7, 5, 8);
    acl(addr, cluster, alter, ALLOW);
    acl(addr, (2, "hidden"), describe, DENY);
    acl(addr, (3, "secret"), read, DENY);
    acl(addr, changelog, describe, ALLOW);
    acl(addr, changelog, 10, ALLOW); // DESCRIBE_CONFIGS
    acl(addr, cluster, create, DENY);

    // Refusals, each with Kafka's code and message.
    let refused = heartbeat(addr, &join("secret", "m", topology("lines")));
    assert_eq!(refused.error_code, 30, "GROUP_AUTHORIZATION_FAILED");
    let refused = heartbeat(addr, &join("app", "m", topology("hidden")));
    assert_eq!(refused.error_code, 29, "TOPIC_AUTHORIZATION_FAILED");
    let refused = heartbeat(addr, &join("app", "m", topology("__consumer_offsets")));
    assert_eq!(refused.error_code, 130, "STREAMS_INVALID_TOPOLOGY");
    assert!(refused
        .error_message
        .as_deref()
        .is_some_and(|m| m.contains("internal topics __consumer_offsets")));
    let no_topology = join("app", "m", topology("lines")).with_topology(None);
    let refused = heartbeat(addr, &no_topology);
    assert_eq!(
        (refused.error_code, refused.error_message.as_deref()),
        (42, Some("Topology must be non-null when (re-)joining.")),
        "INVALID_REQUEST"
    );
    let static_member =
        join("app", "m", topology("lines")).with_instance_id(Some(text("instance-1")));
    assert_eq!(heartbeat(addr, &static_member).error_code, 42);

    // The join: the repartition topic is created (compacted, as the topology asks), the
    // changelog is not: the status says why, and nothing is assigned yet.
    let joined = heartbeat(addr, &join("app", "m", topology("lines")));
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(joined.member_epoch, 2);
    let status = statuses(&joined);
    assert_eq!(status.len(), 1, "{status:?}");
    assert_eq!(status[0].0, 3, "MISSING_INTERNAL_TOPICS: {status:?}");
    assert!(
        status[0]
            .1
            .contains("Unauthorized to CREATE on topics app-counts-changelog."),
        "{status:?}"
    );
    assert!(tasks(&joined.active_tasks).is_empty());
    let configs = describe_configs(addr, 2, "app-words-repartition");
    assert!(configs
        .iter()
        .any(|(name, value, _)| name == "cleanup.policy" && value == "compact"));

    // Once the member may create the changelog, its next heartbeat creates it; the one after
    // gets every task of both subtopologies.
    acl(addr, changelog, create, ALLOW);
    let next = StreamsGroupHeartbeatRequest::default()
        .with_group_id(text("app").into())
        .with_member_id(text("m"))
        .with_member_epoch(joined.member_epoch)
        .with_rebalance_timeout_ms(-1);
    let created = heartbeat(addr, &next);
    assert_eq!(created.error_code, 0, "{created:?}");
    let configs = describe_configs(addr, 2, "app-counts-changelog");
    assert!(configs
        .iter()
        .any(|(name, value, _)| name == "cleanup.policy" && value == "compact"));
    let next = next.with_member_epoch(created.member_epoch);
    let ready = heartbeat(addr, &next);
    assert_eq!(ready.error_code, 0, "{ready:?}");
    assert!(statuses(&ready).is_empty(), "{:?}", statuses(&ready));
    assert_eq!(
        tasks(&ready.active_tasks),
        [("0".to_string(), vec![0, 1]), ("1".to_string(), vec![0, 1])]
    );
    let group = test_support::kafka::describe_streams_group(addr, "app");
    assert_eq!(group.group_state.as_str(), "Stable", "{group:?}");
    // A stale epoch is fenced; a leave frees the group.
    let stale = next.clone().with_member_epoch(ready.member_epoch + 1);
    assert_eq!(
        heartbeat(addr, &stale).error_code,
        110,
        "FENCED_MEMBER_EPOCH"
    );
    let leave = next.with_member_epoch(-1);
    assert_eq!(heartbeat(addr, &leave).error_code, 0);
    let group = test_support::kafka::describe_streams_group(addr, "app");
    assert_eq!(group.group_state.as_str(), "Empty", "{group:?}");
}

/// A member as its client knows itself: id, process, epoch, active and standby tasks.
type Client = (String, String, i32, Vec<TaskIds>, Vec<TaskIds>);

/// Answered tasks as the member reports them back.
fn sent(answered: Vec<AnsweredTasks>) -> Vec<TaskIds> {
    answered
        .into_iter()
        .map(|t| {
            TaskIds::default()
                .with_subtopology_id(t.subtopology_id)
                .with_partitions(t.partitions)
        })
        .collect()
}

/// Converges `members` (member id, process id, epoch, active, standby) by heartbeating each
/// in turn, as a client would: it reports what it was last told to run.
fn converge(addr: &str, group: &str, members: &mut [Client]) {
    for _ in 0..6 {
        for (id, _, epoch, active, standby) in members.iter_mut() {
            let beat = StreamsGroupHeartbeatRequest::default()
                .with_group_id(text(group).into())
                .with_member_id(text(id))
                .with_member_epoch(*epoch)
                .with_rebalance_timeout_ms(-1)
                .with_active_tasks(Some(active.clone()))
                .with_standby_tasks(Some(standby.clone()))
                .with_warmup_tasks(Some(vec![]));
            let answer = heartbeat(addr, &beat);
            assert_eq!(answer.error_code, 0, "{answer:?}");
            *epoch = answer.member_epoch;
            if let Some(a) = answer.active_tasks {
                *active = sent(a);
            }
            if let Some(s) = answer.standby_tasks {
                *standby = sent(s);
            }
        }
    }
}

/// `streams.num.standby.replicas`, set on the group as `kafka-configs --entity-type groups`
/// does (Kafka Streams' own setting is ignored under the streams protocol): checked, listed by
/// DescribeConfigs, kept across a restart, and it gives each stateful task a standby in the
/// other process; the group itself, members and tasks, survives the broker's SIGKILL.
#[test]
fn a_groups_standby_replicas_config_gives_standby_tasks_and_survives_a_restart() {
    use test_support::kafka::{alter_configs, GROUP_RESOURCE};
    let mut broker = TestBroker::start_temp(&[
        "--group-streams-initial-rebalance-delay-ms",
        "0",
        "--group-streams-assignment-interval-ms",
        "0",
    ]);
    let addr = broker.addr.clone();
    create_topic(&addr, "lines", 2);
    let bad = alter_configs(
        &addr,
        GROUP_RESOURCE,
        "app",
        &[("streams.num.standby.replicas", 0, Some("5"))],
        false,
    );
    assert_eq!(bad.0, 40, "INVALID_CONFIG: {bad:?}");
    let set = alter_configs(
        &addr,
        GROUP_RESOURCE,
        "app",
        &[("streams.num.standby.replicas", 0, Some("1"))],
        false,
    );
    assert_eq!(set.0, 0, "{set:?}");
    let listed = |addr: &str| {
        describe_configs(addr, GROUP_RESOURCE, "app")
            .into_iter()
            .find(|(name, _, _)| name == "streams.num.standby.replicas")
            .map(|(_, value, source)| (value, source))
    };
    assert_eq!(
        listed(&addr),
        Some(("1".to_string(), 8)),
        "DYNAMIC_GROUP_CONFIG"
    );

    let mut members = Vec::new();
    for (id, process) in [("m1", "p1"), ("m2", "p2")] {
        let request = join("app", id, topology("lines")).with_process_id(Some(text(process)));
        let answer = heartbeat(&addr, &request);
        assert_eq!(answer.error_code, 0, "{answer:?}");
        let active = sent(answer.active_tasks.unwrap_or_default());
        let standby = sent(answer.standby_tasks.unwrap_or_default());
        members.push((
            id.to_string(),
            process.to_string(),
            answer.member_epoch,
            active,
            standby,
        ));
    }
    converge(&addr, "app", &mut members);
    let flat = |t: &[TaskIds]| -> std::collections::BTreeSet<(String, i32)> {
        t.iter()
            .flat_map(|x| {
                x.partitions
                    .iter()
                    .map(|p| (x.subtopology_id.to_string(), *p))
            })
            .collect()
    };
    let mut standbys = 0;
    for (id, _, _, active, standby) in &members {
        let (active, standby) = (flat(active), flat(standby));
        assert!(!active.is_empty(), "{id}: {members:?}");
        // Standbys only of the stateful subtopology, never a task it runs itself.
        assert!(standby.iter().all(|(sub, _)| sub == "1"), "{members:?}");
        assert!(active.is_disjoint(&standby), "{members:?}");
        standbys += standby.len();
    }
    assert_eq!(standbys, 2, "one standby per stateful task: {members:?}");

    broker.kill9();
    broker.restart();
    assert_eq!(
        listed(&broker.addr),
        Some(("1".to_string(), 8)),
        "kept across a restart"
    );
    // The group came back from its record: each member goes on at its epoch with its tasks.
    let before = members.clone();
    converge(&broker.addr, "app", &mut members);
    assert_eq!(members, before, "no member moved or was told to rejoin");
}
