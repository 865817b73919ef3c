//! Admin calls: topics, consumer groups, committed offsets and lag, routed as Kafka requires
//! (topic changes to the controller, group calls to the group's coordinator, offsets to each
//! partition's leader), so they work on a cluster as on lograil.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Buf;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::Decodable;
use kafka_protocol::records::RecordBatchDecoder;

use crate::cluster::Cluster;
use crate::config::{AdminConfig, ClientConfig, ConfigError};
use crate::error::{check, CallError, ErrorCode, NetError};
use crate::offsets::{self, Committer, EARLIEST, LATEST};
use crate::util::text;
use crate::TopicPartition;

/// A topic as Metadata and DescribeConfigs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    /// The topic's name.
    pub name: String,
    /// How many partitions the metadata lists.
    pub partitions: i32,
    /// One of Kafka's own topics (`__consumer_offsets`, `__transaction_state`, …).
    pub internal: bool,
    /// Replicas of partition 0 (the replication factor is its length).
    pub replicas: Vec<i32>,
    /// The leader of each partition (-1: none).
    pub leaders: Vec<i32>,
    /// Kafka config names and values, a null value as `""` (only from
    /// [`Admin::describe_topic`]; empty from [`Admin::list_topics`]).
    pub configs: Vec<(String, String)>,
}

/// A member of a classic group, as DescribeGroups shows it.
#[derive(Debug, Clone)]
pub struct MemberDescription {
    /// The member id the coordinator gave it.
    pub member_id: String,
    /// Its `group.instance.id`; None for a dynamic member.
    pub instance_id: Option<String>,
    /// Its `client.id`.
    pub client_id: String,
    /// The address it connects from, as the broker writes it (`/` and the IP: `/127.0.0.1`).
    pub host: String,
    /// (topic, partitions) from the consumer-protocol assignment; empty when the group is not
    /// a `consumer` group or the assignment does not decode.
    pub assignment: Vec<(String, Vec<i32>)>,
}

/// A group, as DescribeGroups shows a classic one, or ConsumerGroupDescribe a KIP-848
/// consumer-protocol one ([`Admin::describe_group`]).
#[derive(Debug, Clone)]
pub struct GroupDescription {
    /// The group asked about.
    pub group_id: String,
    /// The coordinator's state name: `Stable`, `PreparingRebalance`, `CompletingRebalance`,
    /// `Empty` or `Dead` (an unknown group is `Dead` with no members).
    pub state: String,
    /// `consumer` for consumer groups (Kafka Connect workers say `connect`); empty for an
    /// unknown group.
    pub protocol_type: String,
    /// The protocol the group chose: for a consumer group, the assignor (`range`,
    /// `cooperative-sticky`; for a consumer-protocol group the broker's, `uniform` or
    /// `range`); empty until a generation has chosen one.
    pub protocol: String,
    /// `Classic`, or `Consumer` for a KIP-848 consumer-protocol group (`group.protocol=consumer`),
    /// whose states are `Empty`, `Assigning`, `Reconciling` and `Stable`.
    pub group_type: String,
    /// The members of the current generation.
    pub members: Vec<MemberDescription>,
}

/// Where a group stands on one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionLag {
    /// The topic.
    pub topic: String,
    /// The partition within `topic`.
    pub partition: i32,
    /// The next offset the group will read; `None` if it never committed.
    pub committed: Option<i64>,
    /// The partition's first offset (ListOffsets earliest; -1 if its leader gave none).
    pub log_start: i64,
    /// The partition's log end offset, the offset the next record gets (ListOffsets latest;
    /// -1 if its leader gave none).
    pub log_end: i64,
    /// Records between the committed offset (or the log start, if later) and the log end;
    /// `None` if the group never committed.
    pub lag_records: Option<i64>,
    /// Now minus the timestamp of the oldest unconsumed record, in seconds (0 when caught up);
    /// `None` if the group never committed or that record could not be read.
    pub lag_seconds: Option<f64>,
}

/// A topic to create.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTopic {
    /// The topic's name.
    pub name: String,
    /// -1: the broker's default.
    pub partitions: i32,
    /// -1: the broker's default (`default.replication.factor`).
    pub replication_factor: i16,
    /// Topic configs to set (`retention.ms`, `cleanup.policy`, …); the rest keep the broker's
    /// defaults.
    pub configs: Vec<(String, String)>,
}

/// Why an admin call failed.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum AdminError {
    /// The properties were refused ([`Admin::from_config`]).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A request failed: no connection, or the broker answered with an error code.
    #[error(transparent)]
    Call(#[from] CallError),
    /// The response had no entry for what was asked (the topic, config resource or quota
    /// entity).
    #[error("empty {0:?} response")]
    EmptyResponse(ApiKey),
    /// A fetched record batch did not decode ([`Admin::timestamp_at`], [`Admin::lag`]).
    #[error("undecodable batch in {partition}: {reason}")]
    Undecodable {
        /// The partition fetched.
        partition: TopicPartition,
        /// The decoder's error.
        reason: String,
    },
}

impl From<NetError> for AdminError {
    fn from(e: NetError) -> AdminError {
        AdminError::Call(CallError::Net(e))
    }
}

/// How long an admin call keeps retrying (the Java client's `default.api.timeout.ms`).
const API_TIMEOUT: Duration = Duration::from_secs(60);

/// Admin operations on a cluster (or one lograil). Methods take `&mut self` for the CLI's
/// sake; the client is cheap to clone.
#[derive(Debug, Clone)]
pub struct Admin {
    cluster: Arc<Cluster>,
}

impl Admin {
    /// Connects with default settings to `bootstrap` (`host:port[,host:port…]`).
    pub async fn connect(bootstrap: &str) -> Result<Admin, AdminError> {
        Admin::new(AdminConfig::new(bootstrap)).await
    }

    /// Connects with the Java client's admin properties (`bootstrap.servers`, `client.id`,
    /// timeouts, …).
    pub async fn from_config(config: &ClientConfig) -> Result<Admin, AdminError> {
        Admin::new(AdminConfig::from_config(config)?).await
    }

    /// Connects with typed settings. Its metadata requests never create topics, whatever
    /// `allow.auto.create.topics` says.
    pub async fn new(config: AdminConfig) -> Result<Admin, AdminError> {
        let mut net = config.net;
        net.allow_auto_create_topics = false;
        Ok(Admin {
            cluster: Cluster::connect(net).await?,
        })
    }

    fn deadline() -> Instant {
        Instant::now() + API_TIMEOUT
    }

    /// Every topic, by name.
    pub async fn list_topics(&mut self) -> Result<Vec<TopicDescription>, AdminError> {
        let (_, response) = self.cluster.fetch_metadata(None, false).await?;
        let mut topics: Vec<TopicDescription> = response
            .topics
            .into_iter()
            .filter(|t| t.error_code == 0)
            .map(|t| describe_partitions(t, Vec::new()))
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// A topic's metadata; an error if the cluster does not know it.
    async fn topic_metadata(
        &mut self,
        name: &str,
    ) -> Result<metadata_response::MetadataResponseTopic, AdminError> {
        let (_, response) = self
            .cluster
            .fetch_metadata(Some(vec![name.to_string()]), false)
            .await?;
        let topic = response
            .topics
            .into_iter()
            .next()
            .ok_or(AdminError::EmptyResponse(ApiKey::Metadata))?;
        check(topic.error_code, ApiKey::Metadata, || {
            format!("topic {name}")
        })?;
        Ok(topic)
    }

    /// One topic with its configs.
    pub async fn describe_topic(&mut self, name: &str) -> Result<TopicDescription, AdminError> {
        let topic = self.topic_metadata(name).await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(text(name))
                .with_configuration_keys(None),
        ]);
        let connection = self.cluster.any_connection().await?;
        let described = connection.call(&request, 4).await?;
        let result = described
            .results
            .into_iter()
            .next()
            .ok_or(AdminError::EmptyResponse(ApiKey::DescribeConfigs))?;
        check(result.error_code, ApiKey::DescribeConfigs, || {
            format!("configs of {name}")
        })?;
        let configs = result
            .configs
            .into_iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.map(|v| v.to_string()).unwrap_or_default(),
                )
            })
            .collect();
        Ok(describe_partitions(topic, configs))
    }

    /// Creates a topic with the broker's default replication factor.
    pub async fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<(), AdminError> {
        self.create(&NewTopic {
            name: name.to_string(),
            partitions,
            replication_factor: -1,
            configs: configs.to_vec(),
        })
        .await
    }

    /// Creates a topic (CreateTopics to the controller) and waits until its metadata shows a
    /// leader for every partition, so producers and consumers can use it at once.
    pub async fn create(&mut self, topic: &NewTopic) -> Result<(), AdminError> {
        let request = CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(text(&topic.name)))
                .with_num_partitions(topic.partitions)
                .with_replication_factor(topic.replication_factor)
                .with_configs(
                    topic
                        .configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(text(k))
                                .with_value(Some(text(v)))
                        })
                        .collect(),
                )])
            .with_timeout_ms(30_000);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 5).await?;
        let result = response
            .topics
            .into_iter()
            .next()
            .ok_or(AdminError::EmptyResponse(ApiKey::CreateTopics))?;
        if let Some(code) = ErrorCode::try_from_code(result.error_code) {
            return Err(CallError::Broker {
                api: ApiKey::CreateTopics,
                resource: format!("topic {}", topic.name),
                code,
                message: result.error_message.map(|m| m.to_string()),
            }
            .into());
        }
        self.wait_for_leaders(&topic.name).await
    }

    /// Waits until every broker's metadata shows a leader for every partition of `name`: on a
    /// cluster, brokers learn of a new topic one by one, and a request for it to one that has
    /// not yet answers UNKNOWN_TOPIC_OR_PARTITION.
    async fn wait_for_leaders(&mut self, name: &str) -> Result<(), AdminError> {
        let deadline = Self::deadline();
        let request = MetadataRequest::default()
            .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
            )
            .with_name(Some(TopicName(text(name))))]))
            .with_allow_auto_topic_creation(false);
        let mut attempt = 0;
        loop {
            let (metadata, response) = self
                .cluster
                .fetch_metadata(Some(vec![name.to_string()]), false)
                .await?;
            let mut ready = leaders_everywhere(&response, name);
            let nodes: Vec<i32> = metadata.brokers.keys().copied().collect();
            for node in nodes {
                if !ready {
                    break;
                }
                let connection = self.cluster.connection(node).await?;
                let answer: MetadataResponse = connection.call(&request, 12).await?;
                ready = leaders_everywhere(&answer, name);
            }
            if ready {
                return Ok(());
            }
            let pause = crate::util::backoff(
                self.cluster.net.retry_backoff,
                self.cluster.net.retry_backoff_max,
                attempt,
            );
            attempt += 1;
            if Instant::now() + pause >= deadline {
                return Err(CallError::broker(
                    ApiKey::Metadata,
                    format!("topic {name}"),
                    ErrorCode::LeaderNotAvailable,
                )
                .into());
            }
            tokio::time::sleep(pause).await;
        }
    }

    /// Deletes a topic (DeleteTopics to the controller, not retried).
    pub async fn delete_topic(&mut self, name: &str) -> Result<(), AdminError> {
        let request = DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(text(name))])
            .with_timeout_ms(30_000);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 5).await?;
        let code = response.responses.first().map_or(0, |r| r.error_code);
        Ok(check(code, ApiKey::DeleteTopics, || {
            format!("topic {name}")
        })?)
    }

    /// Sets group configs (IncrementalAlterConfigs on the group; Kafka's share-group configs
    /// such as `share.auto.offset.reset`, `share.record.lock.duration.ms`,
    /// `share.delivery.count.limit` and, with Kafka 4.4's share.version=2, KIP-1191's
    /// `errors.deadletterqueue.topic.name` and `errors.deadletterqueue.copy.record.enable`).
    pub async fn alter_group_configs(
        &mut self,
        group: &str,
        configs: &[(&str, &str)],
    ) -> Result<(), AdminError> {
        use kafka_protocol::messages::incremental_alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        const GROUP: i8 = 32;
        const SET: i8 = 0;
        let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(GROUP)
                .with_resource_name(text(group))
                .with_configs(
                    configs
                        .iter()
                        .map(|(name, value)| {
                            AlterableConfig::default()
                                .with_name(text(name))
                                .with_config_operation(SET)
                                .with_value(Some(text(value)))
                        })
                        .collect(),
                ),
        ]);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 1).await?;
        let code = response.responses.first().map_or(0, |r| r.error_code);
        Ok(check(code, ApiKey::IncrementalAlterConfigs, || {
            format!("group {group}")
        })?)
    }

    /// (group id, state, protocol type, group type: `Classic`, `Consumer` for KIP-848
    /// consumer-protocol groups, `Share`) of every group, from every broker (each lists the
    /// groups it coordinates; ListGroups v5, Kafka 3.8 and later).
    pub async fn list_groups(
        &mut self,
    ) -> Result<Vec<(String, String, String, String)>, AdminError> {
        let (metadata, _) = self.cluster.fetch_metadata(Some(Vec::new()), false).await?;
        let mut brokers: Vec<i32> = metadata.brokers.keys().copied().collect();
        brokers.sort_unstable();
        let mut out = BTreeMap::new();
        for broker in brokers {
            let connection = self.cluster.connection(broker).await?;
            let response = connection.call(&ListGroupsRequest::default(), 5).await?;
            check(response.error_code, ApiKey::ListGroups, || {
                format!("broker {broker}")
            })?;
            for g in response.groups {
                out.insert(
                    g.group_id.to_string(),
                    (
                        g.group_state.to_string(),
                        g.protocol_type.to_string(),
                        g.group_type.to_string(),
                    ),
                );
            }
        }
        Ok(out
            .into_iter()
            .map(|(id, (state, kind, group_type))| (id, state, kind, group_type))
            .collect())
    }

    /// The broker (node id) coordinating `group` (FindCoordinator).
    pub async fn group_coordinator(&mut self, group: &str) -> Result<i32, AdminError> {
        self.cluster.forget_coordinator(group);
        let deadline = Self::deadline();
        let mut attempt = 0;
        loop {
            match self.cluster.coordinator(group).await {
                Ok((node, _)) => return Ok(node),
                Err(e) => {
                    let pause = crate::util::backoff(
                        self.cluster.net.retry_backoff,
                        self.cluster.net.retry_backoff_max,
                        attempt,
                    );
                    attempt += 1;
                    if !e.is_retriable() || Instant::now() + pause >= deadline {
                        return Err(e.into());
                    }
                    self.cluster.forget_coordinator(group);
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    /// A group's state and members (DescribeGroups to its coordinator, retried while the
    /// coordinator moves, for up to 60 s; a group DescribeGroups calls Dead is asked again with
    /// ConsumerGroupDescribe, which describes KIP-848 consumer-protocol groups).
    pub async fn describe_group(&mut self, group: &str) -> Result<GroupDescription, AdminError> {
        let classic = self.describe_classic_group(group).await?;
        if classic.state != "Dead" {
            return Ok(classic);
        }
        Ok(self
            .describe_consumer_group(group)
            .await?
            .unwrap_or(classic))
    }

    /// A KIP-848 consumer-protocol group (ConsumerGroupDescribe); `None` if it is not one.
    async fn describe_consumer_group(
        &mut self,
        group: &str,
    ) -> Result<Option<GroupDescription>, AdminError> {
        let request =
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
        let node = self.group_coordinator(group).await?;
        let connection = self.cluster.connection(node).await?;
        let Ok(response) = connection.call(&request, 0).await else {
            // A broker without the API has no such group.
            return Ok(None);
        };
        let Some(described) = response.groups.into_iter().next() else {
            return Ok(None);
        };
        if described.error_code == ErrorCode::GroupIdNotFound.code() {
            return Ok(None);
        }
        check(described.error_code, ApiKey::ConsumerGroupDescribe, || {
            format!("group {group}")
        })?;
        Ok(Some(GroupDescription {
            group_id: group.to_string(),
            state: described.group_state.to_string(),
            protocol_type: "consumer".to_string(),
            protocol: described.assignor_name.to_string(),
            group_type: "Consumer".to_string(),
            members: described
                .members
                .into_iter()
                .map(|m| MemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: m.instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: m
                        .assignment
                        .topic_partitions
                        .into_iter()
                        .map(|t| (t.topic_name.to_string(), t.partitions))
                        .collect(),
                })
                .collect(),
        }))
    }

    async fn describe_classic_group(
        &mut self,
        group: &str,
    ) -> Result<GroupDescription, AdminError> {
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let described = offsets::with_coordinator(&self.cluster, group, Self::deadline(), |c| {
            let request = &request;
            async move {
                let response = c.call(request, 5).await?;
                let described = response.groups.into_iter().next().ok_or_else(|| {
                    CallError::broker(
                        ApiKey::DescribeGroups,
                        format!("group {group}"),
                        ErrorCode::UnknownServerError,
                    )
                })?;
                check(described.error_code, ApiKey::DescribeGroups, || {
                    format!("group {group}")
                })?;
                Ok(described)
            }
        })
        .await?;
        let consumer = described.protocol_type.as_str() == "consumer";
        Ok(GroupDescription {
            group_id: group.to_string(),
            state: described.group_state.to_string(),
            protocol_type: described.protocol_type.to_string(),
            protocol: described.protocol_data.to_string(),
            group_type: "Classic".to_string(),
            members: described
                .members
                .into_iter()
                .map(|m| MemberDescription {
                    member_id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: if consumer {
                        decode_assignment(&m.member_assignment)
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        })
    }

    /// The group's committed offsets, by (topic, partition).
    pub async fn committed_offsets(
        &mut self,
        group: &str,
    ) -> Result<BTreeMap<(String, i32), i64>, AdminError> {
        let committed =
            offsets::fetch_committed(&self.cluster, group, None, Self::deadline()).await?;
        Ok(committed
            .into_iter()
            .map(|(tp, o)| ((tp.topic, tp.partition), o))
            .collect())
    }

    /// ListOffsets for every partition of `topic` at `timestamp` (-2 earliest, -1 latest, else
    /// the first record at or after it; -1 when there is none), each asked of its leader.
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partitions: i32,
        timestamp: i64,
    ) -> Result<Vec<i64>, AdminError> {
        self.cluster.add_interest([topic]);
        if self.cluster.metadata().partition_count(topic).is_none() {
            self.topic_metadata(topic).await?;
        }
        let wanted: Vec<(TopicPartition, i64)> = (0..partitions)
            .map(|p| (TopicPartition::new(topic, p), timestamp))
            .collect();
        let found = offsets::list_offsets(&self.cluster, &wanted, Self::deadline()).await?;
        Ok(wanted
            .iter()
            .map(|(tp, _)| found.get(tp).map_or(-1, |(offset, _)| *offset))
            .collect())
    }

    /// Timestamp of the record at `offset` (the first record at or after it), if there is one.
    pub async fn timestamp_at(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Option<i64>, AdminError> {
        let tp = TopicPartition::new(topic, partition);
        let request = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(text(topic)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(1)])]);
        let leader = match self.cluster.metadata().leader(topic, partition) {
            Some(l) => l,
            None => {
                let seen = self.cluster.metadata().version;
                self.cluster.add_interest([topic]);
                self.cluster
                    .refresh(seen)
                    .await?
                    .leader(topic, partition)
                    .ok_or_else(|| {
                        CallError::broker(
                            ApiKey::Fetch,
                            tp.to_string(),
                            ErrorCode::LeaderNotAvailable,
                        )
                    })?
            }
        };
        let connection = self.cluster.connection(leader).await?;
        let response = connection.call(&request, 12).await?;
        let Some(data) = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
        else {
            return Ok(None);
        };
        check(data.error_code, ApiKey::Fetch, || tp.to_string())?;
        let Some(mut records) = data.records.filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        while records.remaining() >= 12 {
            let set =
                RecordBatchDecoder::decode(&mut records).map_err(|e| AdminError::Undecodable {
                    partition: tp.clone(),
                    reason: e.to_string(),
                })?;
            if let Some(r) = set.records.iter().find(|r| r.offset >= offset) {
                return Ok(Some(r.timestamp));
            }
        }
        Ok(None)
    }

    /// Records behind and seconds behind, per partition, for every topic the group committed to.
    ///
    /// `also` adds topics the group has not committed to yet (those its members are assigned),
    /// so their partitions show up with no committed offset.
    pub async fn lag(
        &mut self,
        group: &str,
        also: &[String],
        now_ms: i64,
    ) -> Result<Vec<PartitionLag>, AdminError> {
        let committed = self.committed_offsets(group).await?;
        let topics: BTreeSet<String> = committed
            .keys()
            .map(|(topic, _)| topic.clone())
            .chain(also.iter().cloned())
            .collect();
        let mut out = Vec::new();
        for topic in topics {
            let partitions = self.partition_count(&topic).await?;
            let starts = self.list_offsets(&topic, partitions, EARLIEST).await?;
            let ends = self.list_offsets(&topic, partitions, LATEST).await?;
            for ((p, log_start), log_end) in (0..partitions).zip(starts).zip(ends) {
                let committed = committed.get(&(topic.clone(), p)).copied();
                let lag_records = committed.map(|c| (log_end - c.max(log_start)).max(0));
                let lag_seconds = match (committed, lag_records) {
                    (Some(c), Some(lag)) if lag > 0 => self
                        .timestamp_at(&topic, p, c.max(log_start))
                        .await?
                        .map(|ts| ((now_ms - ts).max(0)) as f64 / 1000.0),
                    (Some(_), _) => Some(0.0),
                    _ => None,
                };
                out.push(PartitionLag {
                    topic: topic.clone(),
                    partition: p,
                    committed,
                    log_start,
                    log_end,
                    lag_records,
                    lag_seconds,
                });
            }
        }
        Ok(out)
    }

    async fn partition_count(&mut self, topic: &str) -> Result<i32, AdminError> {
        let t = self.topic_metadata(topic).await?;
        Ok(i32::try_from(t.partitions.len()).unwrap_or(i32::MAX))
    }

    /// Commits offsets for a group without joining it (generation -1), as Kafka's
    /// `kafka-consumer-groups --reset-offsets` does. The broker refuses it while the group has
    /// members.
    pub async fn commit_offsets(
        &mut self,
        group: &str,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Result<(), AdminError> {
        let offsets: BTreeMap<TopicPartition, i64> = offsets
            .iter()
            .map(|((t, p), o)| (TopicPartition::new(t, *p), *o))
            .collect();
        Ok(offsets::commit(
            &self.cluster,
            group,
            &Committer::outsider(),
            &offsets,
            Self::deadline(),
        )
        .await?)
    }
}

fn describe_partitions(
    t: metadata_response::MetadataResponseTopic,
    configs: Vec<(String, String)>,
) -> TopicDescription {
    let replicas = t
        .partitions
        .iter()
        .find(|p| p.partition_index == 0)
        .map(|p| p.replica_nodes.iter().map(|b| b.0).collect())
        .unwrap_or_default();
    let mut by_index: Vec<(i32, i32)> = t
        .partitions
        .iter()
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect();
    by_index.sort_unstable();
    TopicDescription {
        name: t.name.map(|n| n.to_string()).unwrap_or_default(),
        partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
        internal: t.is_internal,
        replicas,
        leaders: by_index.into_iter().map(|(_, l)| l).collect(),
        configs,
    }
}

/// (topic, partitions) from a consumer-protocol assignment; empty if it does not decode.
fn decode_assignment(bytes: &[u8]) -> Vec<(String, Vec<i32>)> {
    let mut buf = bytes;
    if buf.remaining() < 2 {
        return Vec::new();
    }
    let version = buf.get_i16();
    ConsumerProtocolAssignment::decode(&mut buf, version)
        .map(|a| {
            a.assigned_partitions
                .into_iter()
                .map(|t| (t.topic.to_string(), t.partitions))
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `response` shows topic `name` with a leader for every partition.
fn leaders_everywhere(response: &MetadataResponse, name: &str) -> bool {
    response.topics.iter().any(|t| {
        t.name.as_ref().is_some_and(|n| n.0.as_str() == name)
            && t.error_code == 0
            && !t.partitions.is_empty()
            && t.partitions
                .iter()
                .all(|p| p.error_code == 0 && p.leader_id.0 >= 0)
    })
}

/// A client-quota entity: (entity type `user` or `client-id`, name; `None` is the default
/// entity of that type).
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// An entity's client quotas (Kafka's keys: `producer_byte_rate`, `consumer_byte_rate`,
/// `request_percentage`, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientQuotas {
    /// Whose quotas these are.
    pub entity: QuotaEntity,
    /// Quota keys and their values (bytes per second for the byte rates, a percentage for
    /// `request_percentage`).
    pub values: Vec<(String, f64)>,
}

/// How a DescribeClientQuotas filter component matches an entity's component of its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name.
    Exact(String),
    /// The default entity.
    Default,
    /// Any entity of the type, the default included.
    Any,
}

impl Admin {
    /// The client quotas whose entities match `filter` ((entity type, match) pairs; with
    /// `strict`, entities with no other component). An empty filter without `strict` lists all.
    pub async fn describe_client_quotas(
        &mut self,
        filter: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<ClientQuotas>, AdminError> {
        use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
        let components = filter
            .iter()
            .map(|(kind, wanted)| {
                let (match_type, name) = match wanted {
                    QuotaMatch::Exact(name) => (0, Some(text(name))),
                    QuotaMatch::Default => (1, None),
                    QuotaMatch::Any => (2, None),
                };
                ComponentData::default()
                    .with_entity_type(text(kind))
                    .with_match_type(match_type)
                    .with_match(name)
            })
            .collect();
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 1).await?;
        quota_error(
            ApiKey::DescribeClientQuotas,
            response.error_code,
            response.error_message.as_deref(),
        )?;
        Ok(response
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|entry| ClientQuotas {
                entity: entry
                    .entity
                    .into_iter()
                    .map(|e| {
                        (
                            e.entity_type.to_string(),
                            e.entity_name.map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                values: entry
                    .values
                    .into_iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            })
            .collect())
    }

    /// Sets (`Some(value)`) or removes (`None`) quota keys of one entity; with `validate_only`
    /// the broker only checks them.
    pub async fn alter_client_quotas(
        &mut self,
        entity: &[(String, Option<String>)],
        ops: &[(String, Option<f64>)],
        validate_only: bool,
    ) -> Result<(), AdminError> {
        use kafka_protocol::messages::alter_client_quotas_request::{
            EntityData, EntryData, OpData,
        };
        let entry = EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(kind, name)| {
                        EntityData::default()
                            .with_entity_type(text(kind))
                            .with_entity_name(name.as_deref().map(text))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(key, value)| {
                        OpData::default()
                            .with_key(text(key))
                            .with_value(value.unwrap_or(0.0))
                            .with_remove(value.is_none())
                    })
                    .collect(),
            );
        let request = AlterClientQuotasRequest::default()
            .with_entries(vec![entry])
            .with_validate_only(validate_only);
        let connection = self.cluster.controller_connection().await?;
        let response = connection.call(&request, 1).await?;
        let entry = response
            .entries
            .first()
            .ok_or(AdminError::EmptyResponse(ApiKey::AlterClientQuotas))?;
        quota_error(
            ApiKey::AlterClientQuotas,
            entry.error_code,
            entry.error_message.as_deref(),
        )
    }
}

fn quota_error(api: ApiKey, code: i16, message: Option<&str>) -> Result<(), AdminError> {
    match ErrorCode::try_from_code(code) {
        None => Ok(()),
        Some(code) => Err(AdminError::Call(CallError::Broker {
            api,
            resource: "client quotas".to_string(),
            code,
            message: message.map(str::to_string),
        })),
    }
}
