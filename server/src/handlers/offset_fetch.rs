//! OffsetFetch, versions 1–7 (one group a request): the committed offset of each asked
//! partition (-1 when none), or (v2+, topics null) every offset the group has committed.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartition, OffsetFetchResponseTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::RequestContext;
use crate::broker::Broker;

impl Handler for OffsetFetchRequest {
    const SERVED: (i16, i16) = (1, 7);

    fn counts(&self) -> Counts {
        let single = topics_and_partitions(self.topics.as_deref().unwrap_or_default(), |t| {
            t.partition_indexes.len()
        });
        let grouped = self
            .groups
            .iter()
            .map(|g| {
                topics_and_partitions(g.topics.as_deref().unwrap_or_default(), |t| {
                    t.partition_indexes.len()
                })
            })
            .fold(single, |all, group| all + group);
        Counts {
            groups: self.groups.len(),
            ..grouped
        }
    }

    async fn handle(
        broker: &Arc<Broker>,
        request: OffsetFetchRequest,
        _: &RequestContext,
    ) -> OffsetFetchResponse {
        let group = request.group_id.to_string();
        if group.is_empty() {
            return OffsetFetchResponse::default()
                .with_error_code(ResponseError::InvalidGroupId.code());
        }
        let wanted: BTreeMap<String, Vec<i32>> = match request.topics {
            Some(topics) => topics
                .into_iter()
                .map(|t| (t.name.to_string(), t.partition_indexes))
                .collect(),
            None => {
                let mut all: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for ((topic, partition), _) in broker.offsets.group_offsets(&group) {
                    all.entry(topic).or_default().push(partition);
                }
                all
            }
        };
        let topics = wanted
            .into_iter()
            .map(|(topic, partitions)| {
                let partitions = partitions
                    .into_iter()
                    .map(|index| {
                        let response =
                            OffsetFetchResponsePartition::default().with_partition_index(index);
                        match broker.offsets.fetch(&group, &topic, index) {
                            Some(c) => response
                                .with_committed_offset(c.offset)
                                .with_committed_leader_epoch(c.leader_epoch)
                                .with_metadata(Some(StrBytes::from_string(
                                    c.metadata.unwrap_or_default(),
                                ))),
                            None => response
                                .with_committed_offset(-1)
                                .with_committed_leader_epoch(-1)
                                .with_metadata(Some(StrBytes::default())),
                        }
                    })
                    .collect();
                OffsetFetchResponseTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic)))
                    .with_partitions(partitions)
            })
            .collect();
        OffsetFetchResponse::default().with_topics(topics)
    }

    fn throttle_time_ms(response: &mut OffsetFetchResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &OffsetFetchResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code));
        for g in &r.groups {
            f(g.error_code);
            g.topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| f(p.error_code));
        }
    }
}
