//! Authorization (`--authorizer-class-name`): ACLs managed with confluent-kafka's AdminClient
//! and enforced on its producer, consumer and admin calls (librdkafka), against the real
//! binary. Every connection is `User:ANONYMOUS` (no authentication yet), so a test that needs
//! ANONYMOUS restricted first sets things up as a super user, then restarts the broker on the
//! same data dir without `--super-users`.

use std::path::{Path, PathBuf};
use std::process::Command;

use kafka_protocol::messages::{
    ApiKey, DescribeAclsRequest, DescribeAclsResponse, DescribeClusterRequest,
    DescribeClusterResponse, FindCoordinatorRequest, FindCoordinatorResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::{json, Value};
use test_support::kafka::list_offset;
use test_support::wire::{call, connect};
use test_support::TestBroker;

const ANONYMOUS: &str = "User:ANONYMOUS";
/// An authorizer, ANONYMOUS a super user.
const AS_SUPER_USER: &[&str] = &[
    "--authorizer-class-name",
    "acl",
    "--super-users",
    "User:ANONYMOUS",
];
/// An authorizer, no super user (Kafka's class name, to check it is taken).
const ENFORCED: &[&str] = &[
    "--authorizer-class-name",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
];

/// Runs one client action of `tests/clients/confluent_acls.py`; its JSON outcome.
fn client(addr: &str, command: &str, argument: Value) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/clients/confluent_acls.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(addr)
        .arg(command)
        .arg(argument.to_string())
        .output()
        .expect("python3 (confluent-kafka is installed by .ci/run)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{command} {argument}: {stdout}\n{stderr}"
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{command}: {e}: {stdout}\n{stderr}"))
}

/// An ACL binding or filter as the script takes it.
fn acl(
    rt: &str,
    name: &str,
    pattern: &str,
    principal: &str,
    host: &str,
    op: &str,
    perm: &str,
) -> Value {
    json!([rt, name, pattern, principal, host, op, perm])
}

/// A filter: `None` fields match anything.
fn filter(
    rt: &str,
    name: Option<&str>,
    pattern: &str,
    principal: Option<&str>,
    host: Option<&str>,
    op: &str,
) -> Value {
    json!([rt, name, pattern, principal, host, op, "ANY"])
}

/// What DescribeAcls lists for `filter`, sorted.
fn described(addr: &str, filter: Value) -> Vec<Value> {
    let out = client(addr, "describe", filter.clone());
    let acls = out["acls"]
        .as_array()
        .unwrap_or_else(|| panic!("describe {filter}: {out}"));
    let mut acls = acls.clone();
    acls.sort_by_key(|a| a.to_string());
    acls
}

fn sorted(mut acls: Vec<Value>) -> Vec<Value> {
    acls.sort_by_key(|a| a.to_string());
    acls
}

/// DescribeAcls (v1) of every ACL, on the wire: (error code, resources). librdkafka drops the
/// response's top-level error, so SECURITY_DISABLED and CLUSTER_AUTHORIZATION_FAILED are
/// checked here.
fn describe_all_raw(addr: &str) -> (i16, usize) {
    let any = DescribeAclsRequest::default()
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1);
    let response: DescribeAclsResponse = call(&mut connect(addr), ApiKey::DescribeAcls, 1, &any);
    (response.error_code, response.resources.len())
}

/// DescribeCluster's `cluster_authorized_operations`, asked for, on the wire (librdkafka shows
/// none for 0).
fn cluster_operations_raw(addr: &str) -> i32 {
    let request =
        DescribeClusterRequest::default().with_include_cluster_authorized_operations(true);
    let response: DescribeClusterResponse =
        call(&mut connect(addr), ApiKey::DescribeCluster, 1, &request);
    response.cluster_authorized_operations
}

/// A data dir that outlives brokers started on it with different flags.
struct DataDir {
    _tmp: tempfile::TempDir,
    path: PathBuf,
}

impl DataDir {
    fn new() -> DataDir {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("data");
        DataDir { _tmp: tmp, path }
    }

    fn broker(&self, args: &[&str]) -> TestBroker {
        TestBroker::start(&self.path, args)
    }
}

fn some_acls() -> Vec<Value> {
    vec![
        acl(
            "TOPIC",
            "orders",
            "LITERAL",
            "User:alice",
            "*",
            "READ",
            "ALLOW",
        ),
        acl(
            "TOPIC",
            "ord",
            "PREFIXED",
            "User:alice",
            "*",
            "WRITE",
            "ALLOW",
        ),
        acl("TOPIC", "*", "LITERAL", "User:bob", "*", "READ", "DENY"),
        acl("GROUP", "g1", "LITERAL", "User:alice", "*", "READ", "ALLOW"),
        acl(
            "TOPIC",
            "orders-eu",
            "LITERAL",
            "User:carol",
            "10.0.0.1",
            "DESCRIBE",
            "ALLOW",
        ),
    ]
}

#[test]
fn acls_are_created_listed_by_kafkas_filters_and_deleted() {
    let broker = TestBroker::start_temp(AS_SUPER_USER);
    let addr = &broker.addr;
    let mut creations = some_acls();
    creations.push(acl(
        "BROKER",
        "my-cluster",
        "LITERAL",
        "User:alice",
        "*",
        "ALTER",
        "ALLOW",
    ));
    creations.push(acl(
        "TOPIC", "orders", "LITERAL", "alice", "*", "READ", "ALLOW",
    ));
    let created = client(addr, "create", json!(creations));
    assert_eq!(
        created,
        json!([
            "OK",
            "OK",
            "OK",
            "OK",
            "OK",
            "INVALID_REQUEST",
            "INVALID_REQUEST"
        ]),
        "a CLUSTER resource is named kafka-cluster, a principal is Type:name"
    );
    // Creating one again succeeds and keeps it once.
    assert_eq!(
        client(addr, "create", json!([some_acls()[0]])),
        json!(["OK"])
    );
    let [orders, ord, bob_star, g1, carol] = some_acls().try_into().unwrap();

    // What Kafka's ResourcePatternFilter selects, filter by filter.
    let cases = [
        (
            filter("TOPIC", Some("orders"), "LITERAL", None, None, "ANY"),
            vec![orders.clone()],
        ),
        (
            filter("TOPIC", Some("ord"), "PREFIXED", None, None, "ANY"),
            vec![ord.clone()],
        ),
        (
            filter("TOPIC", Some("orders"), "PREFIXED", None, None, "ANY"),
            vec![],
        ),
        // ANY: the exact name, any pattern type.
        (
            filter("TOPIC", Some("orders"), "ANY", None, None, "ANY"),
            vec![orders.clone()],
        ),
        // MATCH: every ACL that applies to the name: literal, literal `*`, prefixes.
        (
            filter("TOPIC", Some("orders"), "MATCH", None, None, "ANY"),
            vec![orders.clone(), ord.clone(), bob_star.clone()],
        ),
        (
            filter("TOPIC", Some("orders-eu"), "MATCH", None, None, "ANY"),
            vec![ord.clone(), bob_star.clone(), carol.clone()],
        ),
        (
            filter("GROUP", Some("orders"), "MATCH", None, None, "ANY"),
            vec![],
        ),
        (
            filter("ANY", None, "ANY", None, None, "ANY"),
            vec![
                orders.clone(),
                ord.clone(),
                bob_star.clone(),
                g1.clone(),
                carol.clone(),
            ],
        ),
        (
            filter("ANY", None, "ANY", Some("User:bob"), None, "ANY"),
            vec![bob_star.clone()],
        ),
        (
            filter("ANY", None, "ANY", None, Some("10.0.0.1"), "ANY"),
            vec![carol.clone()],
        ),
        (
            filter("ANY", None, "ANY", None, None, "READ"),
            vec![orders.clone(), bob_star.clone(), g1.clone()],
        ),
        (
            filter("ANY", None, "PREFIXED", None, None, "ANY"),
            vec![ord.clone()],
        ),
    ];
    for (f, expected) in cases {
        assert_eq!(described(addr, f.clone()), sorted(expected), "filter {f}");
    }

    // Each filter deletes what it matches; the answer lists it.
    let deleted = client(
        addr,
        "delete",
        json!([
            filter(
                "TOPIC",
                Some("orders"),
                "MATCH",
                Some("User:alice"),
                None,
                "ANY"
            ),
            filter("GROUP", None, "ANY", None, None, "WRITE"),
        ]),
    );
    assert_eq!(deleted, json!([sorted(vec![orders, ord]), []]));
    assert_eq!(
        described(addr, filter("ANY", None, "ANY", None, None, "ANY")),
        sorted(vec![bob_star, g1, carol])
    );
}

#[test]
fn without_an_authorizer_the_acl_apis_are_disabled_and_every_operation_is_authorized() {
    let broker = TestBroker::start_temp(&[]);
    let addr = &broker.addr;
    let created = client(addr, "create", json!([some_acls()[0]]));
    assert_eq!(created, json!(["SECURITY_DISABLED"]));
    assert_eq!(describe_all_raw(addr), (54, 0), "SECURITY_DISABLED");
    let deleted = client(
        addr,
        "delete",
        json!([filter("ANY", None, "ANY", None, None, "ANY")]),
    );
    assert_eq!(deleted, json!(["SECURITY_DISABLED"]));
    // KIP-430 without an authorizer: every cluster operation, as Kafka answers.
    let ops = client(addr, "cluster_operations", json!({}));
    assert_eq!(
        ops["operations"],
        json!([
            "ALTER",
            "ALTER_CONFIGS",
            "CLUSTER_ACTION",
            "CREATE",
            "DESCRIBE",
            "DESCRIBE_CONFIGS",
            "IDEMPOTENT_WRITE"
        ])
    );
}

#[test]
fn acls_survive_a_restart_and_a_kill() {
    let dir = DataDir::new();
    let mut broker = dir.broker(AS_SUPER_USER);
    assert_eq!(
        client(&broker.addr, "create", json!(some_acls())),
        json!(vec!["OK"; 5])
    );
    let everything = filter("ANY", None, "ANY", None, None, "ANY");
    broker.stop();
    broker.restart();
    assert_eq!(
        described(&broker.addr, everything.clone()),
        sorted(some_acls())
    );
    let deleted = client(
        &broker.addr,
        "delete",
        json!([filter("TOPIC", None, "ANY", Some("User:bob"), None, "ANY")]),
    );
    assert_eq!(deleted[0].as_array().map(Vec::len), Some(1));
    broker.kill9();
    broker.restart();
    let mut left = some_acls();
    left.remove(2);
    assert_eq!(described(&broker.addr, everything), sorted(left));
}

#[test]
fn the_cluster_operations_follow_the_acls() {
    let dir = DataDir::new();
    let mut broker = dir.broker(AS_SUPER_USER);
    let ops = client(&broker.addr, "cluster_operations", json!({}));
    assert_eq!(
        ops["operations"].as_array().map(Vec::len),
        Some(7),
        "a super user: {ops}"
    );
    let grant = |op: &str| {
        acl(
            "BROKER",
            "kafka-cluster",
            "LITERAL",
            ANONYMOUS,
            "*",
            op,
            "ALLOW",
        )
    };
    let created = client(
        &broker.addr,
        "create",
        json!([grant("ALTER"), grant("ALTER_CONFIGS")]),
    );
    assert_eq!(created, json!(["OK", "OK"]));
    broker.stop();
    let broker = dir.broker(ENFORCED);
    // What is allowed, and what that implies: nothing else.
    let ops = client(&broker.addr, "cluster_operations", json!({}));
    assert_eq!(
        ops["operations"],
        json!(["ALTER", "ALTER_CONFIGS", "DESCRIBE", "DESCRIBE_CONFIGS"])
    );
    // Without DESCRIBE on the cluster, none at all (as Kafka: the operations are described
    // only to who may describe the cluster).
    let alter = json!([
        "BROKER",
        "kafka-cluster",
        "LITERAL",
        null,
        null,
        "ALTER",
        "ANY"
    ]);
    let deleted = client(&broker.addr, "delete", json!([alter]));
    assert_eq!(deleted[0].as_array().map(Vec::len), Some(1), "{deleted}");
    assert_eq!(cluster_operations_raw(&broker.addr), 0);
}

/// Sets up as a super user: topics, records, committed offsets and ACLs; then restarts without
/// super users, ANONYMOUS allowed to manage ACLs (ALTER on the cluster) and what `acls` say.
fn restricted(dir: &DataDir, topics: &[&str], acls: Vec<Value>, commits: &[Value]) -> TestBroker {
    let mut broker = dir.broker(AS_SUPER_USER);
    for topic in topics {
        assert_eq!(
            client(&broker.addr, "create_topic", json!({"topic": topic})),
            json!("OK")
        );
        let sent = client(&broker.addr, "produce", json!({"topic": topic, "count": 3}));
        assert_eq!(sent, json!({"delivered": 3}), "{topic}");
    }
    for commit in commits {
        let committed = client(&broker.addr, "commit", commit.clone());
        assert!(
            committed.as_object().unwrap().values().all(|v| v == "OK"),
            "{commit}: {committed}"
        );
    }
    let mut acls = acls;
    acls.push(acl(
        "BROKER",
        "kafka-cluster",
        "LITERAL",
        ANONYMOUS,
        "*",
        "ALTER",
        "ALLOW",
    ));
    let created = client(&broker.addr, "create", json!(acls));
    assert!(
        created.as_array().unwrap().iter().all(|c| c == "OK"),
        "{created}"
    );
    broker.stop();
    dir.broker(ENFORCED)
}

#[test]
fn a_producer_is_denied_then_allowed_once_an_acl_is_added() {
    let dir = DataDir::new();
    let broker = restricted(&dir, &["orders", "other"], vec![], &[]);
    let addr = &broker.addr;
    let plain = json!({"topic": "orders", "count": 5});
    let idempotent = json!({"topic": "orders", "count": 5, "idempotent": true});
    assert_eq!(
        client(addr, "produce", plain.clone())["error"],
        "TOPIC_AUTHORIZATION_FAILED"
    );
    // InitProducerId: IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679); its
    // refusal is fatal to librdkafka's idempotent producer.
    let refused = client(addr, "produce", idempotent.clone());
    assert_eq!(
        refused["error"], "CLUSTER_AUTHORIZATION_FAILED",
        "{refused}"
    );
    assert_eq!(refused["fatal"], true, "{refused}");

    // WRITE on another topic: InitProducerId passes, the produce to `orders` does not.
    let other = acl(
        "TOPIC", "other", "LITERAL", ANONYMOUS, "*", "WRITE", "ALLOW",
    );
    assert_eq!(client(addr, "create", json!([other])), json!(["OK"]));
    assert_eq!(
        client(addr, "produce", idempotent.clone())["error"],
        "TOPIC_AUTHORIZATION_FAILED"
    );

    let write = acl("TOPIC", "ord", "PREFIXED", ANONYMOUS, "*", "WRITE", "ALLOW");
    assert_eq!(client(addr, "create", json!([write])), json!(["OK"]));
    assert_eq!(client(addr, "produce", plain), json!({"delivered": 5}));
    assert_eq!(client(addr, "produce", idempotent), json!({"delivered": 5}));

    // A DENY wins over the ALLOW.
    let deny = acl("TOPIC", "orders", "LITERAL", "User:*", "*", "WRITE", "DENY");
    assert_eq!(client(addr, "create", json!([deny])), json!(["OK"]));
    let denied = client(addr, "produce", json!({"topic": "orders", "count": 1}));
    assert_eq!(denied["error"], "TOPIC_AUTHORIZATION_FAILED");
}

#[test]
fn a_consumer_is_denied_its_group_then_its_topic_then_allowed() {
    let dir = DataDir::new();
    let broker = restricted(&dir, &["orders"], vec![], &[]);
    let addr = &broker.addr;
    let consume = json!({"topic": "orders", "group": "readers", "count": 3, "timeout": 10});
    let refused = client(addr, "consume", consume.clone());
    assert_eq!(
        refused,
        json!({"error": "GROUP_AUTHORIZATION_FAILED", "consumed": 0})
    );
    // The refusal carries Kafka's reason, which clients print after the code.
    let find: FindCoordinatorResponse = call(
        &mut connect(addr),
        ApiKey::FindCoordinator,
        3,
        &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("readers")),
    );
    assert_eq!(find.error_code, 30);
    assert_eq!(
        find.error_message.as_deref(),
        Some("Group authorization failed.")
    );

    // The group (READ implies the DESCRIBE FindCoordinator needs) and the topic's DESCRIBE
    // (its metadata), but not READ on the topic: the fetch is refused.
    let group = acl(
        "GROUP", "readers", "LITERAL", ANONYMOUS, "*", "READ", "ALLOW",
    );
    let describe = acl(
        "TOPIC", "orders", "LITERAL", ANONYMOUS, "*", "DESCRIBE", "ALLOW",
    );
    assert_eq!(
        client(addr, "create", json!([group, describe])),
        json!(["OK", "OK"])
    );
    let refused = client(addr, "consume", consume.clone());
    assert_eq!(
        refused,
        json!({"error": "TOPIC_AUTHORIZATION_FAILED", "consumed": 0})
    );

    let read = acl(
        "TOPIC", "orders", "LITERAL", ANONYMOUS, "*", "READ", "ALLOW",
    );
    assert_eq!(client(addr, "create", json!([read])), json!(["OK"]));
    assert_eq!(client(addr, "consume", consume), json!({"consumed": 3}));
    // KIP-430: READ on the group, and the DESCRIBE it implies.
    let ops = client(addr, "group_operations", json!({"group": "readers"}));
    assert_eq!(ops, json!({"operations": ["DESCRIBE", "READ"]}));
}

#[test]
fn auto_creation_needs_create_on_the_cluster_or_the_topic() {
    let dir = DataDir::new();
    let acls = vec![acl(
        "TOPIC", "auto-", "PREFIXED", ANONYMOUS, "*", "WRITE", "ALLOW",
    )];
    let broker = restricted(&dir, &[], acls, &[]);
    let addr = &broker.addr;
    // WRITE (and the DESCRIBE it implies) is not CREATE: Metadata does not create the topic.
    let produce = json!({"topic": "auto-orders", "count": 2, "timeout_ms": 5000});
    let refused = client(addr, "produce", produce.clone());
    assert_eq!(refused["error"], "TOPIC_AUTHORIZATION_FAILED", "{refused}");
    let listed = client(addr, "topics", json!({}));
    assert_eq!(listed["topics"], json!([]), "nothing was created: {listed}");

    let create = acl(
        "TOPIC", "auto-", "PREFIXED", ANONYMOUS, "*", "CREATE", "ALLOW",
    );
    assert_eq!(client(addr, "create", json!([create])), json!(["OK"]));
    assert_eq!(client(addr, "produce", produce), json!({"delivered": 2}));
    let listed = client(addr, "topics", json!({}));
    assert_eq!(listed["topics"], json!(["auto-orders"]));
}

#[test]
fn metadata_lists_only_the_topics_the_principal_may_describe() {
    let dir = DataDir::new();
    let acls = vec![
        acl(
            "TOPIC", "visible", "LITERAL", ANONYMOUS, "*", "DESCRIBE", "ALLOW",
        ),
        // READ implies DESCRIBE.
        acl("TOPIC", "read", "PREFIXED", ANONYMOUS, "*", "READ", "ALLOW"),
    ];
    let broker = restricted(&dir, &["visible", "readable", "hidden"], acls, &[]);
    let addr = &broker.addr;
    let all = client(addr, "topics", json!({}));
    assert_eq!(
        all,
        json!({"topics": ["readable", "visible"], "errors": {}})
    );
    // Named: refused whether it exists or not, so nothing is learnt of its existence.
    for topic in ["hidden", "no-such-topic"] {
        let named = client(addr, "topics", json!({"topic": topic}));
        assert_eq!(
            named["errors"][topic], "TOPIC_AUTHORIZATION_FAILED",
            "{topic}: {named}"
        );
    }
}

#[test]
fn offsets_and_configs_are_refused_without_telling_what_exists() {
    let dir = DataDir::new();
    let acls = vec![
        acl("GROUP", "g", "LITERAL", ANONYMOUS, "*", "DESCRIBE", "ALLOW"),
        acl(
            "TOPIC", "public", "LITERAL", ANONYMOUS, "*", "DESCRIBE", "ALLOW",
        ),
    ];
    let commits = [
        json!({"group": "g", "offsets": [["secret", 0, 2], ["public", 0, 1]]}),
        json!({"group": "h", "offsets": [["public", 0, 1]]}),
    ];
    let broker = restricted(&dir, &["secret", "public"], acls, &commits);
    let addr = &broker.addr;

    let committed = client(
        addr,
        "committed",
        json!({"group": "g", "partitions": [["secret", 0], ["public", 0]]}),
    );
    assert_eq!(
        committed,
        json!({"secret-0": "TOPIC_AUTHORIZATION_FAILED", "public-0": 1})
    );
    // Every offset of the group: the topic it may not describe is left out.
    let listed = client(addr, "group_offsets", json!({"group": "g"}));
    assert_eq!(listed, json!({"partitions": ["public-0"]}));
    let other_group = client(addr, "group_offsets", json!({"group": "h"}));
    assert_eq!(other_group, json!({"error": "GROUP_AUTHORIZATION_FAILED"}));
    // ListGroups: every group with DESCRIBE on the cluster (implied by ALTER); without it, the
    // groups one may describe.
    assert_eq!(
        client(addr, "groups", json!({})),
        json!({"groups": ["g", "h"]})
    );
    let alter = json!([
        "BROKER",
        "kafka-cluster",
        "LITERAL",
        null,
        null,
        "ALTER",
        "ANY"
    ]);
    let deleted = client(addr, "delete", json!([alter]));
    assert_eq!(deleted[0].as_array().map(Vec::len), Some(1), "{deleted}");
    assert_eq!(client(addr, "groups", json!({})), json!({"groups": ["g"]}));

    // A topic it may not describe and one that does not exist answer alike: to librdkafka
    // (whose ListOffsets first asks Metadata) and on the wire.
    let refused = client(addr, "list_offsets", json!({"topic": "secret"}));
    assert!(refused["error"].is_string(), "{refused}");
    assert_eq!(
        client(addr, "list_offsets", json!({"topic": "no-such-topic"})),
        refused
    );
    for topic in ["secret", "no-such-topic"] {
        assert_eq!(list_offset(addr, topic, -1), (29, -1, -1), "{topic}");
        let configs = client(addr, "describe_configs", json!({"name": topic}));
        assert_eq!(
            configs,
            json!({"error": "TOPIC_AUTHORIZATION_FAILED"}),
            "{topic}"
        );
    }
    assert_eq!(
        client(addr, "list_offsets", json!({"topic": "public"})),
        json!({"offset": 3})
    );
    // DESCRIBE is not DESCRIBE_CONFIGS; the broker's configs need it on the cluster.
    let configs = client(addr, "describe_configs", json!({"name": "public"}));
    assert_eq!(configs, json!({"error": "TOPIC_AUTHORIZATION_FAILED"}));
    let broker_configs = client(
        addr,
        "describe_configs",
        json!({"type": "BROKER", "name": "1"}),
    );
    assert_eq!(
        broker_configs,
        json!({"error": "CLUSTER_AUTHORIZATION_FAILED"})
    );
}

#[test]
fn allow_everyone_if_no_acl_found_allows_what_no_acl_speaks_of() {
    let everyone = TestBroker::start_temp(&[
        "--authorizer-class-name",
        "acl",
        "--allow-everyone-if-no-acl-found",
        "true",
    ]);
    let addr = &everyone.addr;
    assert_eq!(
        client(addr, "create_topic", json!({"topic": "free"})),
        json!("OK")
    );
    let produce = json!({"topic": "free", "count": 2});
    assert_eq!(
        client(addr, "produce", produce.clone()),
        json!({"delivered": 2})
    );
    // An ACL on the topic, for someone else: the topic is no longer one no ACL speaks of.
    let alice = acl(
        "TOPIC",
        "free",
        "LITERAL",
        "User:alice",
        "*",
        "WRITE",
        "ALLOW",
    );
    assert_eq!(client(addr, "create", json!([alice])), json!(["OK"]));
    assert_eq!(
        client(addr, "produce", produce)["error"],
        "TOPIC_AUTHORIZATION_FAILED"
    );

    // The default (false): with no ACL at all, nothing is allowed.
    let strict = TestBroker::start_temp(&["--authorizer-class-name", "acl"]);
    let created = client(&strict.addr, "create_topic", json!({"topic": "t"}));
    assert_eq!(created, json!("TOPIC_AUTHORIZATION_FAILED"));
    assert_eq!(
        describe_all_raw(&strict.addr),
        (31, 0),
        "CLUSTER_AUTHORIZATION_FAILED"
    );
}
