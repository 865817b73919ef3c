//! AddOffsetsToTxn, versions 0–4: the group joins the producer's transaction, so that
//! TxnOffsetCommit may commit its offsets within it (stored in `__transaction_state` before the
//! answer). Errors as AddPartitionsToTxn's coordinator refusals (PRODUCER_FENCED from v2,
//! INVALID_PRODUCER_EPOCH before). Authorization: WRITE on the transactional id (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then READ on the group (else
//! GROUP_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AddOffsetsToTxnRequest, AddOffsetsToTxnResponse};

use super::transaction;
use super::Handler;
use super::RequestContext;
use crate::broker::Txns;

impl Handler for AddOffsetsToTxnRequest {
    const SERVED: (i16, i16) = (0, 4);
    type Needs = Arc<Txns>;

    async fn handle(
        txns: Self::Needs,
        request: AddOffsetsToTxnRequest,
        ctx: &RequestContext,
    ) -> AddOffsetsToTxnResponse {
        let response = AddOffsetsToTxnResponse::default();
        let id = request.transactional_id.to_string();
        let group = request.group_id.to_string();
        if !ctx.authorize(Operation::Write, ResourceType::TransactionalId, &id) {
            return response
                .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
        }
        if !ctx.authorize_group(Operation::Read, &group) {
            return response.with_error_code(ResponseError::GroupAuthorizationFailed.code());
        }
        if group.is_empty() {
            return response.with_error_code(ResponseError::InvalidGroupId.code());
        }
        let (producer_id, epoch) = (request.producer_id.0, request.producer_epoch);
        let key = id.clone();
        let outcome = transaction::run(&txns, &id, transaction::fenced(ctx.version, 2), move |b| {
            b.coordinator
                .add_offsets(&key, producer_id, epoch, &group, log_core::now_ms())
        })
        .await;
        response.with_error_code(outcome.err().map_or(0, |e| e.code()))
    }

    fn throttle_time_ms(response: &mut AddOffsetsToTxnResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &AddOffsetsToTxnResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
