//! DescribeTransactions, version 0: each transactional id's state, timeout, start time (-1
//! with no transaction open), producer id and epoch, and the partitions in its transaction
//! (a group added by AddOffsetsToTxn shows as `__consumer_offsets` partition 0, the partition
//! lograil keeps every group's offsets in; Kafka names the group's partition of its 50). An id
//! the coordinator does not know is TRANSACTIONAL_ID_NOT_FOUND. Authorization: DESCRIBE on
//! the transactional id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for it.

use std::collections::BTreeMap;
use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::Handler;
use super::RequestContext;
use crate::broker::Txns;
use crate::transactions::State;

impl Handler for DescribeTransactionsRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = Arc<Txns>;

    fn counts(&self) -> Counts {
        Counts {
            groups: self.transactional_ids.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        txns: Self::Needs,
        request: DescribeTransactionsRequest,
        ctx: &RequestContext,
    ) -> DescribeTransactionsResponse {
        let states = request
            .transactional_ids
            .into_iter()
            .map(|id| {
                let described = TransactionState::default()
                    .with_transactional_id(id.clone())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1)
                    .with_transaction_start_time_ms(-1);
                if !ctx.authorize(
                    Operation::Describe,
                    ResourceType::TransactionalId,
                    id.as_str(),
                ) {
                    return described
                        .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
                }
                let Some(txn) = txns
                    .coordinator
                    .get(id.as_str())
                    .filter(|t| t.state != State::Dead)
                else {
                    return described
                        .with_error_code(ResponseError::TransactionalIdNotFound.code());
                };
                let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (topic, index) in &txn.partitions {
                    topics.entry(topic.clone()).or_default().push(*index);
                }
                if !txn.offsets.is_empty() {
                    topics
                        .entry(crate::groups::offsets::TOPIC.to_string())
                        .or_default()
                        .push(0);
                }
                described
                    .with_transaction_state(StrBytes::from_static_str(txn.state.name()))
                    .with_transaction_timeout_ms(txn.timeout_ms)
                    .with_transaction_start_time_ms(txn.start_ms)
                    .with_producer_id(ProducerId(txn.producer_id))
                    .with_producer_epoch(txn.producer_epoch)
                    .with_topics(
                        topics
                            .into_iter()
                            .map(|(topic, partitions)| {
                                TopicData::default()
                                    .with_topic(TopicName(StrBytes::from_string(topic)))
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    )
            })
            .collect();
        DescribeTransactionsResponse::default().with_transaction_states(states)
    }

    fn throttle_time_ms(response: &mut DescribeTransactionsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeTransactionsResponse, f: &mut dyn FnMut(i16)) {
        r.transaction_states.iter().for_each(|s| f(s.error_code))
    }
}
