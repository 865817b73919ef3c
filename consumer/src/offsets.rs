//! Offset calls shared by the admin client and the group consumer, each routed where Kafka
//! wants it: ListOffsets to each partition's leader, OffsetFetch and OffsetCommit to the group
//! coordinator. Retriable failures (a moved leader or coordinator, a coordinator still loading)
//! are retried with backoff until the deadline.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, GroupId, ListOffsetsRequest, OffsetCommitRequest, OffsetFetchRequest,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::cluster::Cluster;
use crate::config::IsolationLevel;
use crate::connection::BrokerConnection;
use crate::error::{check, CallError, ErrorCode, NetError};
use crate::util::{backoff, text};
use crate::TopicPartition;

/// ListOffsets special timestamps.
pub(crate) const EARLIEST: i64 = -2;
pub(crate) const LATEST: i64 = -1;

/// Errors after which the group's coordinator must be looked up again.
fn coordinator_moved(e: &CallError) -> bool {
    match e {
        CallError::Net(_) => true,
        CallError::Broker { code, .. } => {
            matches!(
                code,
                ErrorCode::NotCoordinator | ErrorCode::CoordinatorNotAvailable
            )
        }
    }
}

/// Runs `call` against the coordinator of `group`, looking the coordinator up again and
/// retrying (with backoff) while the failure is retriable and the deadline allows.
pub(crate) async fn with_coordinator<T, F, Fut>(
    cluster: &Cluster,
    group: &str,
    deadline: Instant,
    mut call: F,
) -> Result<T, CallError>
where
    F: FnMut(Arc<BrokerConnection>) -> Fut,
    Fut: Future<Output = Result<T, CallError>>,
{
    let mut attempt = 0;
    loop {
        let result = match cluster.coordinator(group).await {
            Ok((_, connection)) => call(connection).await,
            Err(e) => Err(e),
        };
        let e = match result {
            Ok(v) => return Ok(v),
            Err(e) => e,
        };
        if coordinator_moved(&e) {
            cluster.forget_coordinator(group);
        }
        let pause = backoff(
            cluster.net.retry_backoff,
            cluster.net.retry_backoff_max,
            attempt,
        );
        attempt += 1;
        if !e.is_retriable() || Instant::now() + pause >= deadline {
            return Err(e);
        }
        tokio::time::sleep(pause).await;
    }
}

/// The offset (and its timestamp) ListOffsets finds for each partition at its timestamp
/// (`EARLIEST`, `LATEST`, or milliseconds: the first record at or after it; offset -1 when
/// there is none).
pub(crate) async fn list_offsets(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
    deadline: Instant,
) -> Result<HashMap<TopicPartition, (i64, i64)>, CallError> {
    list_offsets_at(cluster, wanted, deadline, IsolationLevel::ReadUncommitted).await
}

/// As [`list_offsets`], under `isolation`: with `read_committed`, `LATEST` is the last stable
/// offset (before the first open transaction), not the high watermark.
pub(crate) async fn list_offsets_at(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
    deadline: Instant,
    isolation: IsolationLevel,
) -> Result<HashMap<TopicPartition, (i64, i64)>, CallError> {
    let mut remaining: Vec<(TopicPartition, i64)> = wanted.to_vec();
    let mut found = HashMap::new();
    let mut attempt = 0;
    loop {
        let metadata = cluster.metadata();
        let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, i64)>> = BTreeMap::new();
        let mut retry: Vec<(TopicPartition, i64)> = Vec::new();
        let mut last_error: Option<CallError> = None;
        for (tp, ts) in remaining.drain(..) {
            match metadata.leader(&tp.topic, tp.partition) {
                Some(leader) => by_leader.entry(leader).or_default().push((tp, ts)),
                None => {
                    let code = metadata
                        .topics
                        .get(&tp.topic)
                        .and_then(|t| t.error)
                        .unwrap_or(ErrorCode::LeaderNotAvailable);
                    if !code.is_retriable() {
                        return Err(CallError::broker(ApiKey::ListOffsets, tp.to_string(), code));
                    }
                    last_error = Some(CallError::broker(ApiKey::ListOffsets, tp.to_string(), code));
                    retry.push((tp, ts));
                }
            }
        }
        for (leader, partitions) in by_leader {
            match list_on(cluster, leader, &partitions, isolation).await {
                Ok(answers) => {
                    for (tp, ts) in partitions {
                        match answers.get(&tp) {
                            Some(Ok(v)) => {
                                found.insert(tp, *v);
                            }
                            Some(Err(code)) if !code.is_retriable() => {
                                return Err(CallError::broker(
                                    ApiKey::ListOffsets,
                                    tp.to_string(),
                                    *code,
                                ))
                            }
                            Some(Err(code)) => {
                                last_error = Some(CallError::broker(
                                    ApiKey::ListOffsets,
                                    tp.to_string(),
                                    *code,
                                ));
                                retry.push((tp, ts));
                            }
                            None => retry.push((tp, ts)),
                        }
                    }
                }
                Err(e) if e.is_retriable() => {
                    last_error = Some(e);
                    retry.extend(partitions);
                }
                Err(e) => return Err(e),
            }
        }
        if retry.is_empty() {
            return Ok(found);
        }
        remaining = retry;
        let pause = backoff(
            cluster.net.retry_backoff,
            cluster.net.retry_backoff_max,
            attempt,
        );
        attempt += 1;
        if Instant::now() + pause >= deadline {
            return Err(last_error.unwrap_or(CallError::Net(NetError::NoBroker {
                bootstrap: cluster.net.bootstrap_servers.join(","),
            })));
        }
        tokio::time::sleep(pause).await;
        let _ = cluster.refresh(metadata.version).await;
    }
}

type Answers = HashMap<TopicPartition, Result<(i64, i64), ErrorCode>>;

async fn list_on(
    cluster: &Cluster,
    leader: i32,
    partitions: &[(TopicPartition, i64)],
    isolation: IsolationLevel,
) -> Result<Answers, CallError> {
    let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
    for (tp, ts) in partitions {
        topics.entry(&tp.topic).or_default().push(
            ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(*ts),
        );
    }
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation.wire())
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    ListOffsetsTopic::default()
                        .with_name(TopicName(text(t)))
                        .with_partitions(ps)
                })
                .collect(),
        );
    let connection = cluster.connection(leader).await?;
    let response = connection.call(&request, 7).await?;
    let mut out = HashMap::new();
    for t in response.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.0.as_str(), p.partition_index);
            let answer = match ErrorCode::try_from_code(p.error_code) {
                None => Ok((p.offset, p.timestamp)),
                Some(code) => Err(code),
            };
            out.insert(tp, answer);
        }
    }
    Ok(out)
}

/// A group's committed offsets for `partitions` (`None`: every partition it committed), by
/// partition; partitions without a commit are left out.
pub(crate) async fn fetch_committed(
    cluster: &Cluster,
    group: &str,
    partitions: Option<&[TopicPartition]>,
    deadline: Instant,
) -> Result<BTreeMap<TopicPartition, i64>, CallError> {
    fetch_committed_as(cluster, group, partitions, deadline, false).await
}

/// As [`fetch_committed`]; `require_stable` (a `read_committed` consumer, as the Java client
/// asks): offsets a transaction still holds are waited for (`UNSTABLE_OFFSET_COMMIT`,
/// retried) instead of answered as the last stable commit.
pub(crate) async fn fetch_committed_as(
    cluster: &Cluster,
    group: &str,
    partitions: Option<&[TopicPartition]>,
    deadline: Instant,
    require_stable: bool,
) -> Result<BTreeMap<TopicPartition, i64>, CallError> {
    let topics = partitions.map(|ps| {
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in ps {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        by_topic
            .into_iter()
            .map(|(t, ps)| {
                OffsetFetchRequestTopic::default()
                    .with_name(TopicName(text(t)))
                    .with_partition_indexes(ps)
            })
            .collect::<Vec<_>>()
    });
    let request = OffsetFetchRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(topics)
        .with_require_stable(require_stable);
    with_coordinator(cluster, group, deadline, |connection| {
        let request = &request;
        async move {
            let response = connection.call(request, 7).await?;
            check(response.error_code, ApiKey::OffsetFetch, || {
                format!("group {group}")
            })?;
            let mut out = BTreeMap::new();
            for topic in response.topics {
                for p in topic.partitions {
                    let tp = TopicPartition::new(topic.name.0.as_str(), p.partition_index);
                    check(p.error_code, ApiKey::OffsetFetch, || tp.to_string())?;
                    if p.committed_offset >= 0 {
                        out.insert(tp, p.committed_offset);
                    }
                }
            }
            Ok(out)
        }
    })
    .await
}

/// Who commits: a group member (its generation, member id and instance id), or nobody
/// (generation -1: only allowed while the group has no members).
#[derive(Debug, Clone, Default)]
pub(crate) struct Committer {
    pub generation: i32,
    pub member_id: String,
    pub instance_id: Option<String>,
}

impl Committer {
    pub(crate) fn outsider() -> Committer {
        Committer {
            generation: -1,
            member_id: String::new(),
            instance_id: None,
        }
    }
}

/// OffsetCommit. Generation and membership errors are not retried: they mean a rebalance took
/// the partitions away, and the caller decides.
pub(crate) async fn commit(
    cluster: &Cluster,
    group: &str,
    committer: &Committer,
    offsets: &BTreeMap<TopicPartition, i64>,
    deadline: Instant,
) -> Result<(), CallError> {
    let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
    for (tp, offset) in offsets {
        topics.entry(&tp.topic).or_default().push(
            OffsetCommitRequestPartition::default()
                .with_partition_index(tp.partition)
                .with_committed_offset(*offset)
                .with_committed_leader_epoch(-1)
                .with_committed_metadata(Some(StrBytes::default())),
        );
    }
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_generation_id_or_member_epoch(committer.generation)
        .with_member_id(text(&committer.member_id))
        .with_group_instance_id(committer.instance_id.as_deref().map(text))
        .with_retention_time_ms(-1)
        .with_topics(
            topics
                .into_iter()
                .map(|(t, ps)| {
                    OffsetCommitRequestTopic::default()
                        .with_name(TopicName(text(t)))
                        .with_partitions(ps)
                })
                .collect(),
        );
    with_coordinator(cluster, group, deadline, |connection| {
        let request = &request;
        async move {
            let response = connection.call(request, 8).await?;
            for t in response.topics {
                for p in t.partitions {
                    check(p.error_code, ApiKey::OffsetCommit, || {
                        format!("{}-{}", t.name.0.as_str(), p.partition_index)
                    })?;
                }
            }
            Ok(())
        }
    })
    .await
}
