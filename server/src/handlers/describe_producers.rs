//! DescribeProducers, version 0 (`kafka-transactions describe-producers`): the idempotent
//! producers with state on each partition (id, epoch, last sequence, time of the last
//! append, the coordinator epoch of its last transaction marker there, -1 if none) and the
//! first offset of its transaction open there (`current_txn_start_offset`, -1 if none, from
//! log-core's transaction state; what `kafka-transactions find-hanging` looks for). A producer
//! with a transaction open whose idempotence state expired is listed with epoch and sequence
//! -1. An unknown topic or partition is
//! UNKNOWN_TOPIC_OR_PARTITION. Deviation: the last timestamp is when the broker last appended
//! the producer's batch, not the batch's own max timestamp. Authorization: READ on each topic,
//! else TOPIC_AUTHORIZATION_FAILED for its partitions.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{DescribeProducersRequest, DescribeProducersResponse, ProducerId};
use kafka_protocol::protocol::StrBytes;

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;

impl Handler for DescribeProducersRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = Arc<Storage>;

    fn counts(&self) -> Counts {
        topics_and_partitions(&self.topics, |t| t.partition_indexes.len())
    }

    async fn handle(
        storage: Self::Needs,
        request: DescribeProducersRequest,
        ctx: &RequestContext,
    ) -> DescribeProducersResponse {
        let topics = request
            .topics
            .into_iter()
            .map(|topic| {
                let readable = ctx.authorize_topic(Operation::Read, &topic.name);
                let partitions = topic
                    .partition_indexes
                    .iter()
                    .map(|&index| {
                        let response = PartitionResponse::default().with_partition_index(index);
                        if !readable {
                            let denied = ResponseError::TopicAuthorizationFailed;
                            return response.with_error_code(denied.code()).with_error_message(
                                Some(StrBytes::from_string(denied.to_string())),
                            );
                        }
                        let Some(partition) = storage.partition(&topic.name, index) else {
                            return response
                                .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                                .with_error_message(Some(StrBytes::from_string(format!(
                                    "{}-{index} does not exist",
                                    topic.name.as_str()
                                ))));
                        };
                        let open = partition.open_transactions();
                        let start = |id: i64| {
                            open.iter()
                                .find(|t| t.producer_id == id)
                                .map_or(-1, |t| t.first_offset)
                        };
                        let state = storage.producers.partition(&topic.name, index);
                        let (active, epochs): (Vec<_>, Vec<_>) = state
                            .lock()
                            .map(|s| {
                                let active = s.active();
                                let epochs =
                                    active.iter().map(|a| s.coordinator_epoch(a.0)).collect();
                                (active, epochs)
                            })
                            .unwrap_or_default();
                        let mut producers: Vec<ProducerState> = active
                            .iter()
                            .zip(epochs)
                            .map(|(&(id, epoch, sequence, last_ms), coordinator_epoch)| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(id))
                                    .with_producer_epoch(i32::from(epoch))
                                    .with_last_sequence(sequence)
                                    .with_last_timestamp(last_ms)
                                    .with_coordinator_epoch(coordinator_epoch)
                                    .with_current_txn_start_offset(start(id))
                            })
                            .collect();
                        for txn in open
                            .iter()
                            .filter(|t| !active.iter().any(|a| a.0 == t.producer_id))
                        {
                            producers.push(
                                ProducerState::default()
                                    .with_producer_id(ProducerId(txn.producer_id))
                                    .with_producer_epoch(-1)
                                    .with_last_sequence(-1)
                                    .with_last_timestamp(-1)
                                    .with_coordinator_epoch(-1)
                                    .with_current_txn_start_offset(txn.first_offset),
                            );
                        }
                        response.with_active_producers(producers)
                    })
                    .collect();
                TopicResponse::default()
                    .with_name(topic.name)
                    .with_partitions(partitions)
            })
            .collect();
        DescribeProducersResponse::default().with_topics(topics)
    }

    fn throttle_time_ms(response: &mut DescribeProducersResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeProducersResponse, f: &mut dyn FnMut(i16)) {
        r.topics
            .iter()
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code))
    }
}
