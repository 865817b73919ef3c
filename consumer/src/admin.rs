//! Admin calls: topics, consumer groups, committed offsets and lag.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Buf;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;

use crate::connection::{ClientError, Connection};

/// A topic as Metadata and DescribeConfigs show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    pub partitions: i32,
    pub internal: bool,
    /// Kafka config names and values (only from [`Admin::describe_topic`]).
    pub configs: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct MemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub host: String,
    /// (topic, partitions) from the consumer-protocol assignment.
    pub assignment: Vec<(String, Vec<i32>)>,
}

#[derive(Debug, Clone)]
pub struct GroupDescription {
    pub group_id: String,
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberDescription>,
}

/// Where a group stands on one partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionLag {
    pub topic: String,
    pub partition: i32,
    /// The next offset the group will read; `None` if it never committed.
    pub committed: Option<i64>,
    pub log_start: i64,
    pub log_end: i64,
    /// Records between the committed offset and the log end.
    pub lag_records: Option<i64>,
    /// Now minus the timestamp of the oldest unconsumed record (0 when caught up).
    pub lag_seconds: Option<f64>,
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

fn check(code: i16, what: &str) -> Result<(), ClientError> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) => Err(ClientError::Broker(format!("{what}: {e}"))),
    }
}

/// Admin operations over one [`Connection`].
#[derive(Debug)]
pub struct Admin {
    connection: Connection,
}

impl Admin {
    pub async fn connect(addr: &str) -> Result<Admin, ClientError> {
        Ok(Admin {
            connection: Connection::connect(addr).await?,
        })
    }

    /// Every topic, by name.
    pub async fn list_topics(&mut self) -> Result<Vec<TopicDescription>, ClientError> {
        let request = MetadataRequest::default()
            .with_topics(None)
            .with_allow_auto_topic_creation(false);
        let response = self.connection.call(&request, 12).await?;
        let mut topics: Vec<TopicDescription> = response
            .topics
            .into_iter()
            .filter(|t| t.error_code == 0)
            .map(|t| TopicDescription {
                name: t.name.map(|n| n.to_string()).unwrap_or_default(),
                partitions: i32::try_from(t.partitions.len()).unwrap_or(i32::MAX),
                internal: t.is_internal,
                configs: Vec::new(),
            })
            .collect();
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// A topic's metadata; an error if the broker does not know it.
    async fn topic_metadata(
        &mut self,
        name: &str,
    ) -> Result<metadata_response::MetadataResponseTopic, ClientError> {
        let wanted = metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(text(name))));
        let request = MetadataRequest::default()
            .with_topics(Some(vec![wanted]))
            .with_allow_auto_topic_creation(false);
        let topic = self
            .connection
            .call(&request, 12)
            .await?
            .topics
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Broker(format!("no metadata for {name}")))?;
        check(topic.error_code, &format!("topic {name}"))?;
        Ok(topic)
    }

    /// One topic with its configs.
    pub async fn describe_topic(&mut self, name: &str) -> Result<TopicDescription, ClientError> {
        let topic = self.topic_metadata(name).await?;
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(text(name))
                .with_configuration_keys(None),
        ]);
        let described = self.connection.call(&request, 4).await?;
        let result = described
            .results
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Broker(format!("no configs for {name}")))?;
        check(result.error_code, &format!("configs of {name}"))?;
        Ok(TopicDescription {
            name: name.to_string(),
            partitions: i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX),
            internal: topic.is_internal,
            configs: result
                .configs
                .into_iter()
                .map(|c| {
                    (
                        c.name.to_string(),
                        c.value.map(|v| v.to_string()).unwrap_or_default(),
                    )
                })
                .collect(),
        })
    }

    pub async fn create_topic(
        &mut self,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Result<(), ClientError> {
        let topic = CreatableTopic::default()
            .with_name(TopicName(text(name)))
            .with_num_partitions(partitions)
            .with_replication_factor(-1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        CreatableTopicConfig::default()
                            .with_name(text(k))
                            .with_value(Some(text(v)))
                    })
                    .collect(),
            );
        let request = CreateTopicsRequest::default()
            .with_topics(vec![topic])
            .with_timeout_ms(30_000);
        let response = self.connection.call(&request, 5).await?;
        let result = response
            .topics
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Broker("empty CreateTopics response".into()))?;
        match ResponseError::try_from_code(result.error_code) {
            None => Ok(()),
            Some(e) => Err(ClientError::Broker(format!(
                "creating {name}: {e}{}",
                result
                    .error_message
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            ))),
        }
    }

    pub async fn delete_topic(&mut self, name: &str) -> Result<(), ClientError> {
        let request = DeleteTopicsRequest::default()
            .with_topic_names(vec![TopicName(text(name))])
            .with_timeout_ms(30_000);
        let response = self.connection.call(&request, 5).await?;
        let code = response.responses.first().map_or(0, |r| r.error_code);
        check(code, &format!("deleting {name}"))
    }

    /// (group id, state, protocol type) of every group.
    pub async fn list_groups(&mut self) -> Result<Vec<(String, String, String)>, ClientError> {
        let response = self
            .connection
            .call(&ListGroupsRequest::default(), 4)
            .await?;
        check(response.error_code, "listing groups")?;
        Ok(response
            .groups
            .into_iter()
            .map(|g| {
                (
                    g.group_id.to_string(),
                    g.group_state.to_string(),
                    g.protocol_type.to_string(),
                )
            })
            .collect())
    }

    pub async fn describe_group(&mut self, group: &str) -> Result<GroupDescription, ClientError> {
        let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
        let response = self.connection.call(&request, 5).await?;
        let described = response
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Broker(format!("no description of {group}")))?;
        check(described.error_code, &format!("group {group}"))?;
        let consumer = described.protocol_type.as_str() == "consumer";
        Ok(GroupDescription {
            group_id: group.to_string(),
            state: described.group_state.to_string(),
            protocol_type: described.protocol_type.to_string(),
            protocol: described.protocol_data.to_string(),
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
    ) -> Result<BTreeMap<(String, i32), i64>, ClientError> {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(None);
        let response = self.connection.call(&request, 7).await?;
        check(response.error_code, &format!("offsets of {group}"))?;
        let mut out = BTreeMap::new();
        for topic in response.topics {
            for p in topic.partitions {
                if p.error_code == 0 && p.committed_offset >= 0 {
                    out.insert(
                        (topic.name.to_string(), p.partition_index),
                        p.committed_offset,
                    );
                }
            }
        }
        Ok(out)
    }

    /// ListOffsets for every partition of `topic` at `timestamp` (-2 earliest, -1 latest).
    pub async fn list_offsets(
        &mut self,
        topic: &str,
        partitions: i32,
        timestamp: i64,
    ) -> Result<Vec<i64>, ClientError> {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(text(topic)))
                .with_partitions(
                    (0..partitions)
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(p)
                                .with_timestamp(timestamp)
                        })
                        .collect(),
                )]);
        let response = self.connection.call(&request, 7).await?;
        let mut offsets = vec![-1; usize::try_from(partitions).unwrap_or(0)];
        for t in response.topics {
            for p in t.partitions {
                check(
                    p.error_code,
                    &format!("offsets of {topic}-{}", p.partition_index),
                )?;
                if let Some(slot) = usize::try_from(p.partition_index)
                    .ok()
                    .and_then(|i| offsets.get_mut(i))
                {
                    *slot = p.offset;
                }
            }
        }
        Ok(offsets)
    }

    /// Timestamp of the record at `offset` (the first record at or after it), if there is one.
    pub async fn timestamp_at(
        &mut self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<Option<i64>, ClientError> {
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
                    .with_fetch_offset(offset)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(1)])]);
        let response = self.connection.call(&request, 12).await?;
        let Some(data) = response
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .next()
        else {
            return Ok(None);
        };
        check(data.error_code, &format!("reading {topic}-{partition}"))?;
        let Some(mut records) = data.records.filter(|r| !r.is_empty()) else {
            return Ok(None);
        };
        while records.has_remaining() {
            let set = RecordBatchDecoder::decode(&mut records).map_err(|e| {
                ClientError::Broker(format!("undecodable batch in {topic}-{partition}: {e}"))
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
    ) -> Result<Vec<PartitionLag>, ClientError> {
        let committed = self.committed_offsets(group).await?;
        let topics: BTreeSet<String> = committed
            .keys()
            .map(|(topic, _)| topic.clone())
            .chain(also.iter().cloned())
            .collect();
        let mut out = Vec::new();
        for topic in topics {
            let partitions = self.partition_count(&topic).await?;
            let starts = self.list_offsets(&topic, partitions, -2).await?;
            let ends = self.list_offsets(&topic, partitions, -1).await?;
            for p in 0..partitions {
                let i = usize::try_from(p).unwrap_or(0);
                let (log_start, log_end) = (starts[i], ends[i]);
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

    async fn partition_count(&mut self, topic: &str) -> Result<i32, ClientError> {
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
    ) -> Result<(), ClientError> {
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((topic, partition), offset) in offsets {
            topics.entry(topic).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*partition)
                    .with_committed_offset(*offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(StrBytes::default())),
            );
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(StrBytes::default())
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(t)))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let response = self.connection.call(&request, 8).await?;
        for t in response.topics {
            for p in t.partitions {
                check(
                    p.error_code,
                    &format!("committing {}-{}", t.name.as_str(), p.partition_index),
                )?;
            }
        }
        Ok(())
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
