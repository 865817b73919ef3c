//! What the transaction APIs' handlers share: a coordinator operation run on the blocking pool
//! (it writes `__transaction_state` and waits for the fsync) and answered as a Kafka error.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;

use super::errors;
use crate::broker::Txns;
use crate::transactions::{CoordError, TxnError};

/// Runs `op` on the blocking pool; a refusal or failure becomes its Kafka error (`fenced`: the
/// code of a fenced producer at this version). A prepared transaction the refusal names
/// (CONCURRENT_TRANSACTIONS) is completed in the background, so a retry finds it done.
pub(super) async fn run<R: Send + 'static>(
    txns: &Arc<Txns>,
    id: &str,
    fenced: ResponseError,
    op: impl FnOnce(&Txns) -> Result<R, CoordError> + Send + 'static,
) -> Result<R, ResponseError> {
    let owner = txns.clone();
    match crate::blocking::spawn(move || op(&owner)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => {
            match &e {
                CoordError::Txn(TxnError::Concurrent(_)) => {
                    tokio::spawn(txns.clone().complete(id.to_string()));
                }
                CoordError::Txn(_) => {
                    tracing::debug!(transactional_id = id, error = %e, "transaction request refused")
                }
                CoordError::Store(_) | CoordError::ProducerId(_) => {
                    tracing::error!(transactional_id = id, error = %e, "transaction coordinator write failed")
                }
            }
            Err(errors::coordinator(&e, fenced))
        }
        Err(e) => {
            tracing::error!(transactional_id = id, error = %e, "transaction coordinator task failed");
            Err(ResponseError::UnknownServerError)
        }
    }
}

/// PRODUCER_FENCED from `since` (KIP-588), INVALID_PRODUCER_EPOCH before.
pub(super) fn fenced(version: i16, since: i16) -> ResponseError {
    if version >= since {
        ResponseError::ProducerFenced
    } else {
        ResponseError::InvalidProducerEpoch
    }
}
