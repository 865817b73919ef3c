//! Topic calls: list and describe (with configs), create (CreateTopics to the controller,
//! then waiting until every broker shows a leader for every partition) and delete.

use std::time::Instant;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::*;

use super::{Admin, AdminError, NewTopic, TopicDescription};
use crate::error::{check, CallError, ErrorCode};
use crate::util::text;

impl Admin {
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
    pub(super) async fn topic_metadata(
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

    pub(super) async fn partition_count(&mut self, topic: &str) -> Result<i32, AdminError> {
        let t = self.topic_metadata(topic).await?;
        Ok(i32::try_from(t.partitions.len()).unwrap_or(i32::MAX))
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
