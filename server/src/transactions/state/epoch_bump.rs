//! EndTxn of transaction version 2 (KIP-890 part 2, EndTxn v5+): every transaction ends with
//! the producer's epoch bumped, so a produce left over from it is fenced by the next. Prepare*
//! is stored at epoch + 1 (the markers' epoch) with the epoch before it as the last one, and
//! EndTxn answers the bumped epoch. At the last epoch the markers are written at `i16::MAX`
//! and the completion moves the transactional id to a new producer id at epoch 0
//! ([`super::complete`]); the client learns it from EndTxn's answer.
//!
//! A retried EndTxn carries the epoch before the bump: it is told the outcome when it matches
//! the stored last epoch (or, across a new producer id, the last id at the last usable epoch).
//! An abort with no transaction open (Empty, or after a completed one) is served too, with the
//! epoch bumped: the client's way to move to a fresh epoch after an error.

use super::{State, Txn, TxnError};

/// What EndTxn v5+ does.
pub use super::End;

/// EndTxn(commit or abort) of a transaction version 2 client.
pub fn end(
    current: Option<&Txn>,
    producer_id: i64,
    epoch: i16,
    commit: bool,
    now_ms: i64,
) -> Result<End, TxnError> {
    let txn = current
        .filter(|t| t.state != State::Dead)
        .ok_or(TxnError::UnknownId)?;
    let retry_on_bump =
        txn.producer_id == producer_id && i32::from(txn.producer_epoch) == i32::from(epoch) + 1;
    let retry_on_overflow = txn.producer_id != producer_id
        && txn.last_producer_id == producer_id
        && epoch == i16::MAX - 1
        && txn.producer_epoch == 0;
    if txn.producer_id != producer_id && !retry_on_overflow {
        return Err(TxnError::ProducerIdMismatch {
            given: producer_id,
            current: txn.producer_id,
        });
    }
    let is_retry = retry_on_bump || retry_on_overflow;
    let valid = match txn.state {
        State::Ongoing | State::Empty | State::Dead => epoch == txn.producer_epoch,
        State::PrepareCommit | State::PrepareAbort | State::PrepareEpochFence => retry_on_bump,
        State::CompleteCommit | State::CompleteAbort => is_retry || epoch == txn.producer_epoch,
    };
    if !valid {
        return Err(TxnError::Fenced {
            given: epoch,
            current: txn.producer_epoch,
        });
    }
    let invalid = |state| super::end_refused(commit, state);
    match (txn.state, commit) {
        (State::Ongoing, _) => Ok(End::Prepare(prepare(txn, commit, now_ms))),
        (State::CompleteCommit, true) | (State::CompleteAbort, false) if is_retry => Ok(End::Done),
        (State::CompleteCommit | State::CompleteAbort | State::Empty, false) if !is_retry => {
            Ok(End::Prepare(prepare(txn, false, now_ms)))
        }
        (State::PrepareCommit, true) | (State::PrepareAbort | State::PrepareEpochFence, false) => {
            Err(TxnError::Concurrent(txn.state))
        }
        (state, _) => Err(invalid(state)),
    }
}

/// Prepare* at the bumped epoch, the epoch before it kept as the last one (what a retry
/// carries). An abort with no transaction open prepares one with no partitions.
fn prepare(txn: &Txn, commit: bool, now_ms: i64) -> Txn {
    let mut next = txn.clone();
    if txn.state != State::Ongoing {
        next.partitions.clear();
        next.offsets.clear();
    }
    next.last_producer_id = txn.producer_id;
    next.last_producer_epoch = txn.producer_epoch;
    next.producer_epoch = txn.producer_epoch.saturating_add(1);
    next.state = if commit {
        State::PrepareCommit
    } else {
        State::PrepareAbort
    };
    next.update_ms = now_ms;
    next
}
