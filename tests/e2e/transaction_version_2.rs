//! Transaction version 2 (KIP-890 part 2) on the wire: Produce v12 adds its partitions to the
//! transaction itself, only those AddPartitionsToTxn would take (not a topic the principal
//! may not WRITE, nor an internal or missing one); EndTxn v5 bumps the epoch and answers it,
//! and the old epoch is fenced after it. TxnOffsetCommit v6 (KIP-1319) names topics by id.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse, GroupId, OffsetFetchRequest,
    OffsetFetchResponse, ProduceResponse, TransactionalId, TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
};
use test_support::kafka::{create_topic, produce_request, text};
use test_support::wire::{call, connect};
use test_support::TestBroker;

use crate::transaction_coordinator::{init_raw, transactional_batch};

const ID: &str = "tv2";

/// Produce v12 of one transactional record of `pid` at `epoch` to `topic`-0: its error code.
fn produce(addr: &str, topic: &str, pid: i64, epoch: i16) -> i16 {
    let request = produce_request(topic, 0, Some(transactional_batch(pid, epoch)))
        .with_transactional_id(Some(TransactionalId(text(ID))));
    let response: ProduceResponse = call(&mut connect(addr), ApiKey::Produce, 12, &request);
    response.responses[0].partition_responses[0].error_code
}

/// The transaction's state, epoch and topics, as DescribeTransactions tells them.
fn described(addr: &str) -> (String, i16, Vec<String>) {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(text(ID))]);
    let response: DescribeTransactionsResponse = call(
        &mut connect(addr),
        ApiKey::DescribeTransactions,
        0,
        &request,
    );
    let s = &response.transaction_states[0];
    let mut topics: Vec<String> = s.topics.iter().map(|t| t.topic.to_string()).collect();
    topics.sort();
    (s.transaction_state.to_string(), s.producer_epoch, topics)
}

#[test]
fn produce_v12_adds_only_what_addpartitionstotxn_would_and_endtxn_v5_bumps_the_epoch() {
    // Everything allowed where no ACL speaks, and a DENY of WRITE on `theirs`.
    let broker = TestBroker::start_temp(&[
        "--authorizer-class-name",
        "acl",
        "--allow-everyone-if-no-acl-found",
        "true",
    ]);
    let addr = &broker.addr;
    create_topic(addr, "mine", 1);
    create_topic(addr, "theirs", 1);
    let deny = AclCreation::default()
        .with_resource_type(2) // TOPIC
        .with_resource_name(text("theirs"))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(text("User:ANONYMOUS"))
        .with_host(text("*"))
        .with_operation(4) // WRITE
        .with_permission_type(2); // DENY
    let created: CreateAclsResponse = call(
        &mut connect(addr),
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(vec![deny]),
    );
    assert_eq!(created.results[0].error_code, 0);

    let (error, pid, epoch) = init_raw(&mut connect(addr), ID, 60_000);
    assert_eq!((error, epoch), (0, 0));
    assert_eq!(produce(addr, "mine", pid, 0), 0);
    assert_eq!(
        produce(addr, "theirs", pid, 0),
        29,
        "TOPIC_AUTHORIZATION_FAILED"
    );
    assert_ne!(produce(addr, "__consumer_offsets", pid, 0), 0);
    assert_ne!(produce(addr, "missing", pid, 0), 0);
    assert_eq!(
        described(addr),
        ("Ongoing".to_string(), 0, vec!["mine".to_string()]),
        "only the partition the produce may write joined the transaction"
    );

    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(ID)))
        .with_producer_id(pid.into())
        .with_producer_epoch(0)
        .with_committed(true);
    let ended: EndTxnResponse = call(&mut connect(addr), ApiKey::EndTxn, 5, &end);
    assert_eq!(
        (ended.error_code, ended.producer_id.0, ended.producer_epoch),
        (0, pid, 1)
    );
    // A retry of the same EndTxn is told the same; the old epoch may write no more.
    let again: EndTxnResponse = call(&mut connect(addr), ApiKey::EndTxn, 5, &end);
    assert_eq!((again.error_code, again.producer_epoch), (0, 1));
    assert_eq!(described(addr), ("CompleteCommit".to_string(), 1, vec![]));
    assert_ne!(produce(addr, "mine", pid, 0), 0, "the old epoch is fenced");
    assert_eq!(
        produce(addr, "mine", pid, 1),
        0,
        "the bumped epoch opens the next"
    );
}

/// TxnOffsetCommit v6 names its topics by id: a known id's offset joins the transaction (and
/// the group, implicitly, as in v5) and reaches the group with the commit; an unknown id is
/// UNKNOWN_TOPIC_ID; the answer names topics by id.
#[test]
fn txn_offset_commit_v6_commits_by_topic_id() {
    let broker = TestBroker::start_temp(&[]);
    let addr = &broker.addr;
    create_topic(addr, "input", 1);
    let input = crate::shares::topic_id(addr, "input");
    let (error, pid, epoch) = init_raw(&mut connect(addr), ID, 60_000);
    assert_eq!((error, epoch), (0, 0));
    let partition = TxnOffsetCommitRequestPartition::default()
        .with_partition_index(0)
        .with_committed_offset(42)
        .with_committed_leader_epoch(-1);
    let unknown = log_core::Uuid::new_v4();
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(TransactionalId(text(ID)))
        .with_group_id(GroupId(text("readers")))
        .with_producer_id(pid.into())
        .with_producer_epoch(0)
        .with_generation_id_or_member_epoch(-1)
        .with_topics(
            [input, unknown]
                .into_iter()
                .map(|id| {
                    TxnOffsetCommitRequestTopic::default()
                        .with_topic_id(id)
                        .with_partitions(vec![partition.clone()])
                })
                .collect(),
        );
    let response: TxnOffsetCommitResponse =
        call(&mut connect(addr), ApiKey::TxnOffsetCommit, 6, &request);
    let answers: Vec<(log_core::Uuid, i16)> = response
        .topics
        .iter()
        .map(|t| (t.topic_id, t.partitions[0].error_code))
        .collect();
    assert_eq!(answers, [(input, 0), (unknown, 100)], "UNKNOWN_TOPIC_ID");

    let end = EndTxnRequest::default()
        .with_transactional_id(TransactionalId(text(ID)))
        .with_producer_id(pid.into())
        .with_producer_epoch(0)
        .with_committed(true);
    let ended: EndTxnResponse = call(&mut connect(addr), ApiKey::EndTxn, 5, &end);
    assert_eq!(ended.error_code, 0);
    let fetch = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(text("readers")))
        .with_topics(None)]);
    let fetched: OffsetFetchResponse = call(&mut connect(addr), ApiKey::OffsetFetch, 9, &fetch);
    let group = &fetched.groups[0];
    let committed: Vec<(String, i64)> = group
        .topics
        .iter()
        .map(|t| (t.name.to_string(), t.partitions[0].committed_offset))
        .collect();
    assert_eq!(committed, [("input".to_string(), 42)]);
}
