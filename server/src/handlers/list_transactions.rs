//! ListTransactions, versions 0–2: the transactional ids this coordinator knows, with their
//! producer id and state, filtered by state names (an unknown one comes back in
//! `unknown_state_filters`), producer ids, (v1) transactions open longer than
//! `duration_filter` ms and (v2) `transactional_id_pattern`, a regular expression the whole id
//! must match (RE2 syntax, as Kafka's RE2J; an invalid one is INVALID_REGULAR_EXPRESSION).
//! Authorization: only ids the principal may DESCRIBE are listed, as in Kafka.

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Txns;
use crate::transactions::State;

impl Handler for ListTransactionsRequest {
    const SERVED: (i16, i16) = (0, 2);
    type Needs = Arc<Txns>;

    async fn handle(
        txns: Self::Needs,
        request: ListTransactionsRequest,
        ctx: &RequestContext,
    ) -> ListTransactionsResponse {
        let pattern = match request.transactional_id_pattern.as_deref() {
            Some(source) if !source.is_empty() => match super::pattern::whole(source) {
                Ok(pattern) => Some(pattern),
                Err(_) => {
                    return ListTransactionsResponse::default()
                        .with_error_code(ResponseError::InvalidRegularExpression.code())
                }
            },
            _ => None,
        };
        let mut unknown = Vec::new();
        let mut states = Vec::new();
        for name in &request.state_filters {
            match State::from_name(name.as_str()) {
                Some(state) => states.push(state),
                None => unknown.push(name.clone()),
            }
        }
        let now = log_core::now_ms();
        let listed = txns
            .coordinator
            .all()
            .into_iter()
            .filter(|(_, t)| t.state != State::Dead)
            .filter(|(_, t)| states.is_empty() || states.contains(&t.state))
            .filter(|(_, t)| {
                request.producer_id_filters.is_empty()
                    || request
                        .producer_id_filters
                        .contains(&ProducerId(t.producer_id))
            })
            .filter(|(_, t)| {
                request.duration_filter < 0
                    || (t.start_ms >= 0
                        && now.saturating_sub(t.start_ms) >= request.duration_filter)
            })
            .filter(|(id, _)| pattern.as_ref().is_none_or(|p| p.is_match(id)))
            .filter(|(id, _)| ctx.authorize(Operation::Describe, ResourceType::TransactionalId, id))
            .map(|(id, t)| {
                TransactionState::default()
                    .with_transactional_id(TransactionalId(StrBytes::from_string(id)))
                    .with_producer_id(ProducerId(t.producer_id))
                    .with_transaction_state(StrBytes::from_static_str(t.state.name()))
            })
            .collect();
        ListTransactionsResponse::default()
            .with_unknown_state_filters(unknown)
            .with_transaction_states(listed)
    }

    fn throttle_time_ms(response: &mut ListTransactionsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ListTransactionsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
