//! One transactional id's state and its transitions, without I/O: each transition takes the
//! state as it is (or `None` for an id never seen) and what the request says, and gives the
//! state to store, or why the request is refused. The coordinator ([`super::Transactions`])
//! persists what a transition gives before acting on it or answering.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// A transaction's state, Kafka's `TransactionState` (the names are Kafka's, as
/// DescribeTransactions and ListTransactions report them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum State {
    /// A producer id and epoch, no transaction.
    Empty,
    /// Partitions or offsets added: records may be written.
    Ongoing,
    /// EndTxn(commit) taken: commit markers are being written.
    PrepareCommit,
    /// EndTxn(abort), a timeout, or a new producer of the id: abort markers are being written.
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// Expired (`transactional.id.expiration.ms`): forgotten.
    Dead,
    /// Kafka's intermediate state while it bumps the epoch of an ongoing transaction to abort
    /// it. lograil stores the bumped epoch with PrepareAbort in one record, so it never holds
    /// this state; the name is kept for the ListTransactions filter.
    PrepareEpochFence,
}

impl State {
    pub const ALL: [State; 8] = [
        State::Empty,
        State::Ongoing,
        State::PrepareCommit,
        State::PrepareAbort,
        State::CompleteCommit,
        State::CompleteAbort,
        State::Dead,
        State::PrepareEpochFence,
    ];

    /// Kafka's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            State::Empty => "Empty",
            State::Ongoing => "Ongoing",
            State::PrepareCommit => "PrepareCommit",
            State::PrepareAbort => "PrepareAbort",
            State::CompleteCommit => "CompleteCommit",
            State::CompleteAbort => "CompleteAbort",
            State::Dead => "Dead",
            State::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<State> {
        State::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Markers are being written: the transaction is neither open nor finished.
    pub fn is_prepared(self) -> bool {
        matches!(
            self,
            State::PrepareCommit | State::PrepareAbort | State::PrepareEpochFence
        )
    }
}

/// An offset committed within a transaction (TxnOffsetCommit), stored into the group when the
/// transaction commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// Offsets pending in a transaction: group → (topic, partition) → offset.
pub type PendingOffsets = BTreeMap<String, BTreeMap<(String, i32), PendingOffset>>;

/// One transactional id: its producer, and its transaction if one is open or ending.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Txn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// The producer id and epoch before the last InitProducerId (KIP-360: a retried
    /// InitProducerId whose answer was lost gets the same answer again); -1 for none.
    pub last_producer_id: i64,
    pub last_producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: State,
    /// Partitions written in the transaction (AddPartitionsToTxn).
    pub partitions: BTreeSet<(String, i32)>,
    /// Groups added (AddOffsetsToTxn), and the offsets committed for them (TxnOffsetCommit).
    pub offsets: PendingOffsets,
    /// When the transaction began (its first partition or group); -1 when none is open.
    pub start_ms: i64,
    pub update_ms: i64,
}

/// Why a request on a transactional id is refused. Handlers map these to Kafka's codes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("transaction timeout {0} ms is not within 1 and transaction.max.timeout.ms")]
    InvalidTimeout(i32),
    #[error("the transactional id has no producer id")]
    UnknownId,
    #[error("producer id {given} is not the transactional id's current one ({current})")]
    ProducerIdMismatch { given: i64, current: i64 },
    #[error("producer epoch {given} is not the current epoch {current}: fenced")]
    Fenced { given: i16, current: i16 },
    #[error("the transaction is in state {0:?}: markers are being written, retry")]
    Concurrent(State),
    #[error("{operation} is not valid in state {state:?}")]
    InvalidState {
        operation: &'static str,
        state: State,
    },
}

/// A new producer id for InitProducerId; the caller allocates it (durably) only if asked.
pub trait NewId {
    fn new_id(&mut self) -> i64;
}

impl<F: FnMut() -> i64> NewId for F {
    fn new_id(&mut self) -> i64 {
        self()
    }
}

/// What InitProducerId does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Init {
    /// Store this and answer its producer id and epoch.
    Ready(Txn),
    /// A retry answered as before (KIP-360): nothing to store.
    Again { producer_id: i64, epoch: i16 },
    /// An ongoing transaction must be aborted first: store this (PrepareAbort at a bumped
    /// epoch), write its markers, and answer CONCURRENT_TRANSACTIONS (the client retries).
    AbortFirst(Txn),
}

/// InitProducerId for a transactional id at `now_ms`. `expected` is the producer id and epoch
/// the client presents (v3+, KIP-360), or `None`.
pub fn init(
    current: Option<&Txn>,
    timeout_ms: i32,
    max_timeout_ms: i32,
    expected: Option<(i64, i16)>,
    now_ms: i64,
    ids: &mut dyn NewId,
) -> Result<Init, TxnError> {
    if timeout_ms <= 0 || timeout_ms > max_timeout_ms {
        return Err(TxnError::InvalidTimeout(timeout_ms));
    }
    let Some(txn) = current.filter(|t| t.state != State::Dead) else {
        return Ok(Init::Ready(Txn {
            producer_id: ids.new_id(),
            producer_epoch: 0,
            last_producer_id: -1,
            last_producer_epoch: -1,
            timeout_ms,
            state: State::Empty,
            partitions: BTreeSet::new(),
            offsets: BTreeMap::new(),
            start_ms: -1,
            update_ms: now_ms,
        }));
    };
    if txn.state.is_prepared() {
        return Err(TxnError::Concurrent(txn.state));
    }
    if let Some((id, epoch)) = expected {
        let is_current = id == txn.producer_id && epoch == txn.producer_epoch;
        let is_retry = id == txn.last_producer_id && epoch == txn.last_producer_epoch;
        if is_retry && txn.state != State::Ongoing {
            return Ok(Init::Again {
                producer_id: txn.producer_id,
                epoch: txn.producer_epoch,
            });
        }
        if !is_current {
            return Err(if id == txn.producer_id || id == txn.last_producer_id {
                TxnError::Fenced {
                    given: epoch,
                    current: txn.producer_epoch,
                }
            } else {
                TxnError::ProducerIdMismatch {
                    given: id,
                    current: txn.producer_id,
                }
            });
        }
    }
    if txn.state == State::Ongoing {
        return Ok(Init::AbortFirst(fence_and_abort(txn, now_ms)));
    }
    let mut next = txn.clone();
    let (id, epoch) = bump(txn, ids);
    next.last_producer_id = txn.producer_id;
    next.last_producer_epoch = txn.producer_epoch;
    next.producer_id = id;
    next.producer_epoch = epoch;
    next.timeout_ms = timeout_ms;
    next.state = State::Empty;
    next.partitions.clear();
    next.offsets.clear();
    next.start_ms = -1;
    next.update_ms = now_ms;
    Ok(Init::Ready(next))
}

/// The next producer id and epoch: the epoch bumped, or a new id when it is exhausted.
fn bump(txn: &Txn, ids: &mut dyn NewId) -> (i64, i16) {
    if txn.producer_epoch >= i16::MAX - 1 {
        (ids.new_id(), 0)
    } else {
        (txn.producer_id, txn.producer_epoch + 1)
    }
}

/// An ongoing transaction aborted with its epoch bumped, so its producer is fenced (Kafka's
/// PrepareEpochFence then PrepareAbort, as one step). At the last epoch it is aborted at that
/// epoch: the next InitProducerId gives a new id.
pub fn fence_and_abort(txn: &Txn, now_ms: i64) -> Txn {
    let mut next = txn.clone();
    if txn.producer_epoch < i16::MAX - 1 {
        next.producer_epoch += 1;
    }
    next.state = State::PrepareAbort;
    next.update_ms = now_ms;
    next
}

/// The checks of a request naming a producer id and epoch for an open (or opening) transaction.
fn check_producer(current: Option<&Txn>, producer_id: i64, epoch: i16) -> Result<&Txn, TxnError> {
    let txn = current
        .filter(|t| t.state != State::Dead)
        .ok_or(TxnError::UnknownId)?;
    if txn.producer_id != producer_id {
        return Err(TxnError::ProducerIdMismatch {
            given: producer_id,
            current: txn.producer_id,
        });
    }
    if txn.producer_epoch != epoch {
        return Err(TxnError::Fenced {
            given: epoch,
            current: txn.producer_epoch,
        });
    }
    if txn.state.is_prepared() {
        return Err(TxnError::Concurrent(txn.state));
    }
    Ok(txn)
}

fn begin(txn: &Txn, now_ms: i64) -> Txn {
    let mut next = txn.clone();
    if txn.state != State::Ongoing {
        next.partitions.clear();
        next.offsets.clear();
        next.start_ms = now_ms;
    }
    next.state = State::Ongoing;
    next.update_ms = now_ms;
    next
}

/// AddPartitionsToTxn: the state to store, or `None` when every partition is in the
/// transaction already (nothing to store).
pub fn add_partitions(
    current: Option<&Txn>,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, i32)],
    now_ms: i64,
) -> Result<Option<Txn>, TxnError> {
    let txn = check_producer(current, producer_id, epoch)?;
    if txn.state == State::Ongoing && partitions.iter().all(|p| txn.partitions.contains(p)) {
        return Ok(None);
    }
    let mut next = begin(txn, now_ms);
    next.partitions.extend(partitions.iter().cloned());
    Ok(Some(next))
}

/// Whether AddPartitionsToTxn's `verify_only` form finds each partition in the transaction.
pub fn verify_partitions(
    current: Option<&Txn>,
    producer_id: i64,
    epoch: i16,
    partitions: &[(String, i32)],
) -> Result<Vec<bool>, TxnError> {
    let txn = check_producer(current, producer_id, epoch)?;
    Ok(partitions
        .iter()
        .map(|p| txn.state == State::Ongoing && txn.partitions.contains(p))
        .collect())
}

/// AddOffsetsToTxn: the group joins the transaction.
pub fn add_offsets(
    current: Option<&Txn>,
    producer_id: i64,
    epoch: i16,
    group: &str,
    now_ms: i64,
) -> Result<Option<Txn>, TxnError> {
    let txn = check_producer(current, producer_id, epoch)?;
    if txn.state == State::Ongoing && txn.offsets.contains_key(group) {
        return Ok(None);
    }
    let mut next = begin(txn, now_ms);
    next.offsets.entry(group.to_string()).or_default();
    Ok(Some(next))
}

/// TxnOffsetCommit: offsets of a group added by AddOffsetsToTxn, pending until the commit.
/// With `add_group` (TxnOffsetCommit v5, transaction version 2) the group joins the
/// transaction here, as AddOffsetsToTxn would have.
pub fn commit_offsets(
    current: Option<&Txn>,
    producer_id: i64,
    epoch: i16,
    group: &str,
    offsets: Vec<((String, i32), PendingOffset)>,
    add_group: bool,
    now_ms: i64,
) -> Result<Txn, TxnError> {
    let txn = check_producer(current, producer_id, epoch)?;
    let joined = txn.state == State::Ongoing && txn.offsets.contains_key(group);
    if !joined && !add_group {
        return Err(TxnError::InvalidState {
            operation: "TxnOffsetCommit without AddOffsetsToTxn",
            state: txn.state,
        });
    }
    let mut next = begin(txn, now_ms);
    next.offsets
        .entry(group.to_string())
        .or_default()
        .extend(offsets);
    next.update_ms = now_ms;
    Ok(next)
}

/// What EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Store this (PrepareCommit or PrepareAbort), then write the markers.
    Prepare(Txn),
    /// A retry of an EndTxn that completed: answer success, nothing to do.
    Done,
}

/// EndTxn(commit or abort) of a transaction version 1 client (EndTxn v0–4: no epoch bump;
/// v5+ is [`epoch_bump::end`]).
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
    if txn.producer_id != producer_id {
        return Err(TxnError::ProducerIdMismatch {
            given: producer_id,
            current: txn.producer_id,
        });
    }
    if txn.producer_epoch != epoch {
        return Err(TxnError::Fenced {
            given: epoch,
            current: txn.producer_epoch,
        });
    }
    let invalid = |state| end_refused(commit, state);
    match (txn.state, commit) {
        (State::Ongoing, _) => {
            let mut next = txn.clone();
            next.state = if commit {
                State::PrepareCommit
            } else {
                State::PrepareAbort
            };
            next.update_ms = now_ms;
            Ok(End::Prepare(next))
        }
        (State::PrepareCommit, true) | (State::PrepareAbort, false) => {
            Err(TxnError::Concurrent(txn.state))
        }
        (State::CompleteCommit, true) | (State::CompleteAbort, false) => Ok(End::Done),
        (state, _) => Err(invalid(state)),
    }
}

/// Whether completing `txn` moves its transactional id to a new producer id: its markers
/// were written at the last epoch (transaction version 2's bump from `i16::MAX - 1`).
pub fn completion_takes_new_id(txn: &Txn) -> bool {
    txn.state.is_prepared() && txn.producer_epoch == i16::MAX
}

/// EndTxn(commit or abort) refused in `state`.
fn end_refused(commit: bool, state: State) -> TxnError {
    TxnError::InvalidState {
        operation: if commit {
            "EndTxn(commit)"
        } else {
            "EndTxn(abort)"
        },
        state,
    }
}

/// The state once every marker of a prepared transaction is durable (and, on commit, its
/// offsets stored): Complete*, with no partitions or offsets; at the last epoch, on a new
/// producer id from `ids` at epoch 0. `None` if not prepared.
pub fn complete(txn: &Txn, now_ms: i64, ids: &mut dyn NewId) -> Option<Txn> {
    let state = match txn.state {
        State::PrepareCommit => State::CompleteCommit,
        State::PrepareAbort | State::PrepareEpochFence => State::CompleteAbort,
        _ => return None,
    };
    let mut next = txn.clone();
    if completion_takes_new_id(txn) {
        next.producer_id = ids.new_id();
        next.producer_epoch = 0;
    }
    next.state = state;
    next.partitions.clear();
    next.offsets.clear();
    next.start_ms = -1;
    next.update_ms = now_ms;
    Some(next)
}

/// Whether an ongoing transaction has run past its timeout at `now_ms`.
pub fn timed_out(txn: &Txn, now_ms: i64) -> bool {
    txn.state == State::Ongoing
        && txn.start_ms >= 0
        && now_ms.saturating_sub(txn.start_ms) > i64::from(txn.timeout_ms)
}

/// Whether an id without a transaction has been idle for `expiration_ms`
/// (`transactional.id.expiration.ms`) at `now_ms`.
pub fn expired(txn: &Txn, now_ms: i64, expiration_ms: i64) -> bool {
    matches!(
        txn.state,
        State::Empty | State::CompleteCommit | State::CompleteAbort
    ) && now_ms.saturating_sub(txn.update_ms) >= expiration_ms
}

/// Why a transactional produce to a partition is refused (KIP-890 part 1's verification).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProduceCheck {
    #[error("the transactional id has no producer id, or another one")]
    UnknownProducer,
    #[error("producer epoch {given} is not the transaction's {current}")]
    Epoch { given: i16, current: i16 },
    #[error("the partition is not in an ongoing transaction of this producer")]
    NotInTransaction,
}

/// Whether a producer may write records to `partition` in its transaction now.
pub fn check_produce(
    current: Option<&Txn>,
    producer_id: i64,
    epoch: i16,
    partition: &(String, i32),
) -> Result<(), ProduceCheck> {
    let txn = current
        .filter(|t| t.state != State::Dead && t.producer_id == producer_id)
        .ok_or(ProduceCheck::UnknownProducer)?;
    if txn.producer_epoch != epoch {
        return Err(ProduceCheck::Epoch {
            given: epoch,
            current: txn.producer_epoch,
        });
    }
    if txn.state != State::Ongoing || !txn.partitions.contains(partition) {
        return Err(ProduceCheck::NotInTransaction);
    }
    Ok(())
}

pub mod epoch_bump;

#[cfg(test)]
mod tests;
