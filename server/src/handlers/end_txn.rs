//! EndTxn, versions 0–5. v5 is transaction version 2's (KIP-890 part 2, as Kafka takes it):
//! the epoch is bumped at each transaction's end and the answer carries the producer id and
//! epoch to go on with (`transactions::state::epoch_bump`); before v5 they come back -1 and
//! the epoch stays. COMMIT or ABORT: PrepareCommit or PrepareAbort is
//! stored in `__transaction_state`, then a marker is written to every partition of the
//! transaction and, on commit, its offsets are stored into their groups, then
//! CompleteCommit/CompleteAbort (`transactions`). The answer comes once that is done (Kafka
//! answers once Prepare* is stored; answering later means a consumer reading committed sees the
//! transaction as soon as the producer hears of the commit); if the markers cannot be written
//! now, the decision is durable and the coordinator keeps trying: the answer is still NONE.
//! A retry of an EndTxn that completed is NONE; of one being completed CONCURRENT_TRANSACTIONS;
//! the other outcome of a completed one, or EndTxn with no transaction, INVALID_TXN_STATE;
//! another epoch PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v2), another producer id
//! INVALID_PRODUCER_ID_MAPPING. Authorization: WRITE on the transactional id (else
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED).

use std::sync::Arc;

use acl::{Operation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};

use super::transaction;
use super::Handler;
use super::RequestContext;
use crate::broker::Txns;

impl Handler for EndTxnRequest {
    const SERVED: (i16, i16) = (0, 5);
    type Needs = Arc<Txns>;

    async fn handle(
        txns: Self::Needs,
        request: EndTxnRequest,
        ctx: &RequestContext,
    ) -> EndTxnResponse {
        let response = EndTxnResponse::default()
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1);
        let id = request.transactional_id.to_string();
        if !ctx.authorize(Operation::Write, ResourceType::TransactionalId, &id) {
            return response
                .with_error_code(ResponseError::TransactionalIdAuthorizationFailed.code());
        }
        let (producer_id, epoch, commit) = (
            request.producer_id.0,
            request.producer_epoch,
            request.committed,
        );
        let key = id.clone();
        let bump = ctx.version >= 5;
        let outcome = transaction::run(&txns, &id, transaction::fenced(ctx.version, 2), move |b| {
            b.coordinator
                .end(&key, (producer_id, epoch), commit, bump, log_core::now_ms())
        })
        .await;
        match outcome {
            Ok(prepared) => {
                if prepared {
                    // In a task of its own: a client that goes away does not stop the markers.
                    let completion = tokio::spawn(txns.clone().complete(id.clone()));
                    let _ = completion.await;
                }
                match txns.coordinator.get(&id).filter(|_| bump) {
                    Some(txn) => response
                        .with_producer_id(ProducerId(txn.producer_id))
                        .with_producer_epoch(txn.producer_epoch),
                    None => response,
                }
            }
            Err(error) => response.with_error_code(error.code()),
        }
    }

    fn throttle_time_ms(response: &mut EndTxnResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &EndTxnResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
