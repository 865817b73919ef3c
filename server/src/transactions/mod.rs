//! The transaction coordinator of this one node: every transactional id's producer and
//! transaction ([`state::Txn`]), kept in memory and as records in the internal topic
//! `__transaction_state` (one partition, durability `always`): the key is the transactional id,
//! the value the whole [`state::Txn`] (a format byte, then bincode), a null value an expired id.
//! At open the topic is replayed (the last record of each id wins) and rewritten when it holds
//! far more records than live ids.
//!
//! The states are Kafka's (`state::State`): Empty → Ongoing (AddPartitionsToTxn,
//! AddOffsetsToTxn) → PrepareCommit / PrepareAbort (EndTxn, a timeout, a new producer of the
//! id) → CompleteCommit / CompleteAbort → Ongoing again or, idle for
//! `transactional.id.expiration.ms`, Dead (forgotten). The transitions are pure functions
//! ([`state`]); this module runs them one at a time (one writer, `turn`) and makes each
//! durable before it is acted on or answered:
//!
//! - InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and TxnOffsetCommit are answered once
//!   their record is on disk (a TxnOffsetCommit's offsets are kept in the transaction's record,
//!   pending, not in `__consumer_offsets`);
//! - Prepare* is on disk before the first marker is written; then a marker goes to every
//!   partition of the transaction ([`Effects::write_markers`], durable), then on commit the
//!   pending offsets are stored into their groups ([`Effects::commit_offsets`], durable), and
//!   only then Complete* is written. A failed marker or offset write leaves the transaction in
//!   Prepare*; the coordinator's timer tries again. At open a transaction found in Prepare* is
//!   completed the same way (markers written again: a second marker for a partition with no
//!   open transaction of the producer is harmless, and offsets stored again are the same);
//! - an Ongoing transaction past its `transaction.timeout.ms` is aborted with its epoch bumped
//!   (PrepareAbort at epoch + 1, one record): its producer is fenced. A restart keeps an
//!   Ongoing transaction's start time, so its timeout still runs.
//!
//! A transactional produce is checked against the ongoing transaction here (KIP-890 part 1:
//! the partition must have been added by this producer id and epoch). A produce that passed
//! the check is counted until its append is done, and markers are written only once no such
//! produce of the id is in flight, so no record of a transaction lands after its marker.

pub mod state;

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use log_core::{batch, FileError, Log, StateLog, StateLogError};

use state::Init;
pub use state::{PendingOffset, PendingOffsets, ProduceCheck, State, Txn, TxnError};

pub const TOPIC: &str = "__transaction_state";
/// `max.message.bytes` of `__transaction_state`: one transaction's record (partitions and
/// pending offsets) is one batch.
const MAX_BATCH_BYTES: u32 = 16 << 20;
/// How long marker writing waits for verified produces of the transaction still appending.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(30);

/// The coordinator's settings (Kafka's names).
#[derive(Debug, Clone)]
pub struct TxnConfig {
    /// `transaction.max.timeout.ms`: the longest `transaction.timeout.ms` a producer may ask.
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: an id idle this long without a transaction is
    /// forgotten.
    pub id_expiration: Duration,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often timed-out
    /// transactions are looked for (and unfinished ones retried).
    pub abort_check_interval: Duration,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            max_timeout_ms: 900_000,
            id_expiration: Duration::from_secs(7 * 24 * 3600),
            abort_check_interval: Duration::from_secs(10),
        }
    }
}

/// Why a coordinator operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CoordError {
    #[error(transparent)]
    Txn(#[from] TxnError),
    #[error(transparent)]
    Store(#[from] StateLogError),
    #[error("allocating a producer id: {0}")]
    ProducerId(#[from] FileError),
}

/// Why the markers or offsets of a transaction could not be written; it stays prepared.
#[derive(Debug, thiserror::Error)]
pub enum EffectError {
    #[error("writing a marker to {topic}-{index}: {reason}")]
    Marker {
        topic: String,
        index: i32,
        reason: String,
    },
    #[error("storing the transaction's offsets: {0}")]
    Offsets(#[from] StateLogError),
    #[error("allocating a producer id: {0}")]
    ProducerId(#[from] FileError),
}

/// What completing a transaction does outside the coordinator (the broker context implements
/// it; tests fake it). Each is blocking and durable when it returns `Ok`.
pub trait Effects {
    /// Writes a COMMIT (or ABORT) marker of `producer_id` at `epoch` to each of `partitions`
    /// (a partition that no longer exists is skipped).
    fn write_markers(
        &self,
        partitions: &[(String, i32)],
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), EffectError>;

    /// Stores the offsets a committed transaction carried into their groups.
    fn commit_offsets(&self, offsets: &PendingOffsets) -> Result<(), EffectError>;

    /// A new producer id (durably allocated), for a transactional id whose epochs ran out.
    fn new_producer_id(&self) -> Result<i64, EffectError>;
}

/// How a prepared transaction's completion went.
#[derive(Debug, PartialEq, Eq)]
pub enum Completion {
    /// Complete* is on disk.
    Done(State),
    /// Nothing to complete (not prepared, or already being completed).
    Nothing,
}

#[derive(Debug)]
pub struct Transactions {
    log: StateLog,
    config: TxnConfig,
    /// Every transactional id's state as stored.
    txns: Mutex<HashMap<String, Txn>>,
    /// One writer at a time: a transition is computed, stored and applied under it.
    turn: Mutex<()>,
    /// Transactional produces checked and not yet appended, by transactional id.
    in_flight: Mutex<HashMap<String, usize>>,
    /// Ids whose markers are being written.
    completing: Mutex<HashSet<String>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A transactional produce counted as in flight until dropped.
#[derive(Debug)]
pub struct InFlight<'a> {
    owner: &'a Transactions,
    id: String,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut in_flight = lock(&self.owner.in_flight);
        if let Some(n) = in_flight.get_mut(&self.id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                in_flight.remove(&self.id);
            }
        }
    }
}

impl Transactions {
    /// Opens (creating if needed) `__transaction_state` and replays it.
    pub fn open(log: &Log, config: TxnConfig) -> Result<Transactions, StateLogError> {
        let state = StateLog::open(log, TOPIC, 16 << 20, MAX_BATCH_BYTES)?;
        let mut txns: HashMap<String, Txn> = HashMap::new();
        let records = state.replay(batch::DECODE_MAX_BYTES, |id: String, txn, _| match txn {
            Some(txn) => {
                txns.insert(id, txn);
            }
            None => {
                txns.remove(&id);
            }
        })?;
        if StateLog::needs_rewrite(records, txns.len()) {
            let live: Vec<(String, Option<Txn>)> = txns
                .iter()
                .map(|(id, txn)| (id.clone(), Some(txn.clone())))
                .collect();
            state.rewrite(&live, 256, records)?;
        }
        Ok(Transactions {
            log: state,
            config,
            txns: Mutex::new(txns),
            turn: Mutex::new(()),
            in_flight: Mutex::new(HashMap::new()),
            completing: Mutex::new(HashSet::new()),
        })
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    /// The state of `id`, as stored.
    pub fn get(&self, id: &str) -> Option<Txn> {
        lock(&self.txns).get(id).cloned()
    }

    /// Every transactional id and its state, by id.
    pub fn all(&self) -> Vec<(String, Txn)> {
        let mut all: Vec<(String, Txn)> = lock(&self.txns)
            .iter()
            .map(|(id, t)| (id.clone(), t.clone()))
            .collect();
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// Writes `id`'s new state (`None`: forgotten), waits until it is on disk, then applies
    /// it. Call with the turn held.
    fn store(&self, id: &str, txn: Option<Txn>) -> Result<(), StateLogError> {
        self.log.append(&[(id.to_string(), txn.clone())])?;
        let mut txns = lock(&self.txns);
        match txn {
            Some(txn) => txns.insert(id.to_string(), txn),
            None => txns.remove(id),
        };
        Ok(())
    }

    /// InitProducerId for `id` (blocking: it writes). `Ok` is the producer id and epoch to
    /// answer; an ongoing transaction is aborted first (stored as PrepareAbort) and answered
    /// with [`TxnError::Concurrent`]: the caller starts its completion and the client retries.
    pub fn init_producer_id(
        &self,
        id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now_ms: i64,
        allocate: impl FnOnce() -> Result<i64, FileError>,
    ) -> Result<(i64, i16), CoordError> {
        let _turn = lock(&self.turn);
        let current = self.get(id);
        let max = self.config.max_timeout_ms;
        let mut wanted = false;
        let probe = state::init(
            current.as_ref(),
            timeout_ms,
            max,
            expected,
            now_ms,
            &mut || {
                wanted = true;
                -1
            },
        )?;
        let outcome = if wanted {
            let fresh = allocate()?;
            state::init(
                current.as_ref(),
                timeout_ms,
                max,
                expected,
                now_ms,
                &mut || fresh,
            )?
        } else {
            probe
        };
        match outcome {
            Init::Ready(txn) => {
                let answer = (txn.producer_id, txn.producer_epoch);
                self.store(id, Some(txn))?;
                Ok(answer)
            }
            Init::Again { producer_id, epoch } => Ok((producer_id, epoch)),
            Init::AbortFirst(txn) => {
                self.store(id, Some(txn))?;
                Err(TxnError::Concurrent(State::PrepareAbort).into())
            }
        }
    }

    /// AddPartitionsToTxn (blocking: it writes when the transaction changes).
    pub fn add_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
        now_ms: i64,
    ) -> Result<(), CoordError> {
        let _turn = lock(&self.turn);
        let current = self.get(id);
        if let Some(txn) =
            state::add_partitions(current.as_ref(), producer_id, epoch, partitions, now_ms)?
        {
            self.store(id, Some(txn))?;
        }
        Ok(())
    }

    /// AddPartitionsToTxn's `verify_only`: whether each partition is in the transaction.
    pub fn verify_partitions(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> Result<Vec<bool>, TxnError> {
        state::verify_partitions(self.get(id).as_ref(), producer_id, epoch, partitions)
    }

    /// AddOffsetsToTxn (blocking).
    pub fn add_offsets(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        group: &str,
        now_ms: i64,
    ) -> Result<(), CoordError> {
        let _turn = lock(&self.turn);
        let current = self.get(id);
        if let Some(txn) = state::add_offsets(current.as_ref(), producer_id, epoch, group, now_ms)?
        {
            self.store(id, Some(txn))?;
        }
        Ok(())
    }

    /// TxnOffsetCommit (blocking): the offsets are pending in the transaction until it
    /// commits. `add_group`: the group joins the transaction here (transaction version 2).
    pub fn commit_offsets(
        &self,
        id: &str,
        (producer_id, epoch): (i64, i16),
        group: &str,
        offsets: Vec<((String, i32), state::PendingOffset)>,
        add_group: bool,
        now_ms: i64,
    ) -> Result<(), CoordError> {
        let _turn = lock(&self.turn);
        let current = self.get(id);
        let txn = state::commit_offsets(
            current.as_ref(),
            producer_id,
            epoch,
            group,
            offsets,
            add_group,
            now_ms,
        )?;
        self.store(id, Some(txn))?;
        Ok(())
    }

    /// EndTxn (blocking): Prepare* stored. `Ok(true)`: the caller completes the transaction
    /// ([`Transactions::complete`]); `Ok(false)`: a retry of one already complete. `bump`:
    /// transaction version 2's epoch bump (EndTxn v5+, [`state::epoch_bump`]).
    pub fn end(
        &self,
        id: &str,
        (producer_id, epoch): (i64, i16),
        commit: bool,
        bump: bool,
        now_ms: i64,
    ) -> Result<bool, CoordError> {
        let _turn = lock(&self.turn);
        let current = self.get(id);
        let end = if bump {
            state::epoch_bump::end(current.as_ref(), producer_id, epoch, commit, now_ms)?
        } else {
            state::end(current.as_ref(), producer_id, epoch, commit, now_ms)?
        };
        match end {
            state::End::Prepare(txn) => {
                self.store(id, Some(txn))?;
                Ok(true)
            }
            state::End::Done => Ok(false),
        }
    }

    /// Writes the markers (and on commit the offsets) of `id`'s prepared transaction, then
    /// Complete* (blocking). One completion of an id at a time; on failure the transaction
    /// stays prepared, for the next try.
    pub fn complete(
        &self,
        id: &str,
        effects: &dyn Effects,
        now_ms: impl Fn() -> i64,
    ) -> Result<Completion, CoordError> {
        if !lock(&self.completing).insert(id.to_string()) {
            return Ok(Completion::Nothing);
        }
        let done = self.complete_once(id, effects, now_ms);
        lock(&self.completing).remove(id);
        done
    }

    fn complete_once(
        &self,
        id: &str,
        effects: &dyn Effects,
        now_ms: impl Fn() -> i64,
    ) -> Result<Completion, CoordError> {
        let Some(prepared) = self.get(id).filter(|t| t.state.is_prepared()) else {
            return Ok(Completion::Nothing);
        };
        self.wait_for_produces(id);
        let commit = prepared.state == State::PrepareCommit;
        let partitions: Vec<(String, i32)> = prepared.partitions.iter().cloned().collect();
        let effect = effects
            .write_markers(
                &partitions,
                prepared.producer_id,
                prepared.producer_epoch,
                commit,
            )
            .and_then(|()| {
                if commit {
                    effects.commit_offsets(&prepared.offsets)
                } else {
                    Ok(())
                }
            });
        if let Err(e) = effect {
            tracing::warn!(transactional_id = id, error = %e, "completing the transaction failed; it stays prepared and is retried");
            return Ok(Completion::Nothing);
        }
        let new_id = if state::completion_takes_new_id(&prepared) {
            match effects.new_producer_id() {
                Ok(new_id) => new_id,
                Err(e) => {
                    tracing::warn!(transactional_id = id, error = %e, "no new producer id for an id whose epochs ran out; the transaction stays prepared and is retried");
                    return Ok(Completion::Nothing);
                }
            }
        } else {
            -1
        };
        let _turn = lock(&self.turn);
        // Only the transaction the markers were written for.
        let Some(current) = self.get(id).filter(|t| *t == prepared) else {
            return Ok(Completion::Nothing);
        };
        let Some(done) = state::complete(&current, now_ms(), &mut || new_id) else {
            return Ok(Completion::Nothing);
        };
        let state = done.state;
        self.store(id, Some(done))?;
        Ok(Completion::Done(state))
    }

    fn wait_for_produces(&self, id: &str) {
        let deadline = std::time::Instant::now() + IN_FLIGHT_WAIT;
        while lock(&self.in_flight).contains_key(id) {
            if std::time::Instant::now() >= deadline {
                tracing::warn!(
                    transactional_id = id,
                    "produces of the transaction still appending after {IN_FLIGHT_WAIT:?}: writing its markers"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The partitions `group` has offsets pending for in a transaction not yet complete
    /// (KIP-447: an OffsetFetch with `require_stable` answers them UNSTABLE_OFFSET_COMMIT).
    pub fn pending_offsets(&self, group: &str) -> HashSet<(String, i32)> {
        lock(&self.txns)
            .values()
            .filter(|t| t.state == State::Ongoing || t.state.is_prepared())
            .filter_map(|t| t.offsets.get(group))
            .flat_map(|offsets| offsets.keys().cloned())
            .collect()
    }

    /// Ids whose transaction is prepared and not being completed (found at open, or whose
    /// completion failed).
    pub fn prepared(&self) -> Vec<String> {
        let completing = lock(&self.completing);
        lock(&self.txns)
            .iter()
            .filter(|(id, t)| t.state.is_prepared() && !completing.contains(*id))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Aborts (PrepareAbort at a bumped epoch, stored) every ongoing transaction past its
    /// timeout at `now_ms` (blocking); returns their ids, for the caller to complete.
    pub fn abort_timed_out(&self, now_ms: i64) -> Result<Vec<String>, StateLogError> {
        let _turn = lock(&self.turn);
        let due: Vec<(String, Txn)> = lock(&self.txns)
            .iter()
            .filter(|(_, t)| state::timed_out(t, now_ms))
            .map(|(id, t)| (id.clone(), state::fence_and_abort(t, now_ms)))
            .collect();
        let mut aborted = Vec::with_capacity(due.len());
        for (id, txn) in due {
            tracing::info!(
                transactional_id = %id,
                producer_id = txn.producer_id,
                "aborting a transaction past its transaction.timeout.ms"
            );
            self.store(&id, Some(txn))?;
            aborted.push(id);
        }
        Ok(aborted)
    }

    /// Forgets ids idle for `transactional.id.expiration.ms` at `now_ms` (tombstones,
    /// blocking); returns how many.
    pub fn expire(&self, now_ms: i64) -> Result<usize, StateLogError> {
        let _turn = lock(&self.turn);
        let expiration = i64::try_from(self.config.id_expiration.as_millis()).unwrap_or(i64::MAX);
        let due: Vec<String> = lock(&self.txns)
            .iter()
            .filter(|(_, t)| state::expired(t, now_ms, expiration))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            self.store(id, None)?;
        }
        Ok(due.len())
    }

    /// KIP-890 part 1: checks a transactional produce of `producer_id` at `epoch` to each of
    /// `partitions`. While the returned guard lives, the transaction's markers wait (hold it
    /// until the records are appended).
    pub fn verify_produce(
        &self,
        id: &str,
        producer_id: i64,
        epoch: i16,
        partitions: &[(String, i32)],
    ) -> (Vec<Result<(), ProduceCheck>>, InFlight<'_>) {
        // Counted before the check, so a transition to Prepare* that follows it waits.
        *lock(&self.in_flight).entry(id.to_string()).or_default() += 1;
        let guard = InFlight {
            owner: self,
            id: id.to_string(),
        };
        let current = self.get(id);
        let checks = partitions
            .iter()
            .map(|p| state::check_produce(current.as_ref(), producer_id, epoch, p))
            .collect();
        (checks, guard)
    }
}

#[cfg(test)]
#[allow(clippy::too_many_lines)]
mod tests;
