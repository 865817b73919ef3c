//! The transaction's state machine (which call may run in which state, and where its outcome
//! leads) and the state a transactional producer shares with its sender.

use std::collections::HashSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{AbortReason, TransactionError, TransactionState};
use crate::producer::DeliveryError;
use crate::util::lock;

/// The operations the state machine gates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Init,
    Begin,
    Send,
    SendOffsets,
    Commit,
    Abort,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Init => "init_transactions",
            Op::Begin => "begin_transaction",
            Op::Send => "send",
            Op::SendOffsets => "send_offsets_to_transaction",
            Op::Commit => "commit_transaction",
            Op::Abort => "abort_transaction",
        }
    }
}

/// The state machine: the states and what each operation may do in each (pure, for the unit
/// tests). `Ok(next)` is the state the operation moves to when it starts.
pub(super) fn start(state: TransactionState, op: Op) -> Result<TransactionState, TransactionState> {
    use TransactionState as S;
    match (state, op) {
        (S::Uninitialized | S::Initializing, Op::Init) => Ok(S::Initializing),
        (S::Ready, Op::Begin) => Ok(S::InTransaction),
        (S::InTransaction, Op::Send | Op::SendOffsets) => Ok(S::InTransaction),
        (S::InTransaction | S::Committing, Op::Commit) => Ok(S::Committing),
        (S::InTransaction | S::AbortableError | S::Aborting, Op::Abort) => Ok(S::Aborting),
        (other, _) => Err(other),
    }
}

/// The state after an operation that started from `state` finished as `outcome`.
pub(super) fn finish(
    running: TransactionState,
    op: Op,
    outcome: &Result<(), TransactionError>,
) -> TransactionState {
    use TransactionState as S;
    match outcome {
        Err(e) if e.is_fatal() => S::FatalError,
        Err(TransactionError::Abortable(_)) => match running {
            // A failed init leaves nothing to abort.
            S::Initializing => S::Uninitialized,
            _ => S::AbortableError,
        },
        // A timeout or a refused state: as it was, so the call can be made again.
        Err(_) => running,
        Ok(()) => match op {
            Op::Init | Op::Commit | Op::Abort => S::Ready,
            Op::Begin | Op::Send | Op::SendOffsets => S::InTransaction,
        },
    }
}

/// A transactional producer's state, shared by its handles and (for failures) its sender.
#[derive(Debug)]
pub(in crate::producer) struct Txn {
    pub id: String,
    pub(super) timeout_ms: i32,
    pub(super) core: Mutex<Core>,
    /// One transactional call at a time.
    pub(super) op: tokio::sync::Mutex<()>,
    /// One AddPartitionsToTxn at a time (the partitions it adds are known once it is back).
    pub(super) adding: tokio::sync::Mutex<()>,
    /// A batch failed after it was sent: its sequence numbers are in doubt and the epoch must
    /// be bumped before the next transaction (set by the sender).
    pub bump_needed: AtomicBool,
}

#[derive(Debug)]
pub(super) struct Core {
    pub(super) state: TransactionState,
    /// Partitions added to the open transaction.
    pub(super) partitions: HashSet<(Arc<str>, i32)>,
    /// Whether the coordinator knows of the open transaction (a partition or a group was
    /// added): an empty transaction ends without EndTxn.
    pub(super) started: bool,
    /// Why the transaction is abortable or the producer fatal.
    pub(super) error: Option<TransactionError>,
}

impl Txn {
    pub(in crate::producer) fn new(id: String, timeout: Duration) -> Txn {
        Txn {
            id,
            timeout_ms: i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX),
            core: Mutex::new(Core {
                state: TransactionState::Uninitialized,
                partitions: HashSet::new(),
                started: false,
                error: None,
            }),
            op: tokio::sync::Mutex::new(()),
            adding: tokio::sync::Mutex::new(()),
            bump_needed: AtomicBool::new(false),
        }
    }

    pub(in crate::producer) fn state(&self) -> TransactionState {
        lock(&self.core).state
    }

    /// The sender saw a record of the transaction fail.
    pub(in crate::producer) fn delivery_failed(&self, error: &DeliveryError) {
        let mut core = lock(&self.core);
        match (core.state, error) {
            (_, DeliveryError::Aborted) | (TransactionState::FatalError, _) => {}
            (_, DeliveryError::Fatal(f)) => {
                core.state = TransactionState::FatalError;
                core.error = Some(TransactionError::Fenced(f.code));
            }
            (TransactionState::InTransaction | TransactionState::Committing, e) => {
                core.state = TransactionState::AbortableError;
                core.error = Some(TransactionError::Abortable(AbortReason::Delivery(
                    e.clone(),
                )));
            }
            _ => {}
        }
    }

    /// For `try_send`: the transaction is open and holds the partition.
    pub(in crate::producer) fn joined(
        &self,
        topic: &Arc<str>,
        partition: i32,
    ) -> Result<(), TransactionError> {
        self.check(Op::Send)?;
        if lock(&self.core)
            .partitions
            .contains(&(topic.clone(), partition))
        {
            return Ok(());
        }
        Err(TransactionError::PartitionNotAdded {
            topic: topic.to_string(),
            partition,
        })
    }

    /// Checks that `op` may run now; the error the caller gets if not (the stored cause of an
    /// abortable or fatal state, rather than just the state).
    pub(super) fn check(&self, op: Op) -> Result<TransactionState, TransactionError> {
        let core = lock(&self.core);
        start(core.state, op).map_err(|state| match (&core.error, state) {
            (Some(e), TransactionState::AbortableError | TransactionState::FatalError) => e.clone(),
            _ => TransactionError::InvalidState {
                operation: op.name(),
                state,
            },
        })
    }

    pub(super) fn enter(&self, op: Op) -> Result<TransactionState, TransactionError> {
        let next = self.check(op)?;
        lock(&self.core).state = next;
        Ok(next)
    }

    pub(super) fn leave(
        &self,
        running: TransactionState,
        op: Op,
        outcome: &Result<(), TransactionError>,
    ) {
        let mut core = lock(&self.core);
        if core.state == TransactionState::FatalError {
            return;
        }
        // The sender may have made the transaction abortable meanwhile; a commit then fails.
        if core.state == TransactionState::AbortableError && op != Op::Abort {
            return;
        }
        core.state = finish(running, op, outcome);
        match outcome {
            Ok(()) if matches!(op, Op::Init | Op::Commit | Op::Abort) => {
                core.partitions.clear();
                core.started = false;
                core.error = None;
            }
            Err(e) if e.is_fatal() || e.is_abortable() => core.error = Some(e.clone()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use TransactionState as S;

    fn abortable() -> TransactionError {
        TransactionError::Abortable(AbortReason::Delivery(DeliveryError::Closed))
    }

    #[test]
    fn operations_are_allowed_only_in_their_states() {
        let all = [
            S::Uninitialized,
            S::Initializing,
            S::Ready,
            S::InTransaction,
            S::Committing,
            S::Aborting,
            S::AbortableError,
            S::FatalError,
        ];
        let allowed = |s: S, op: Op| start(s, op).is_ok();
        for s in all {
            assert_eq!(
                allowed(s, Op::Init),
                matches!(s, S::Uninitialized | S::Initializing)
            );
            assert_eq!(allowed(s, Op::Begin), s == S::Ready, "{s:?}");
            assert_eq!(allowed(s, Op::Send), s == S::InTransaction, "{s:?}");
            assert_eq!(allowed(s, Op::SendOffsets), s == S::InTransaction, "{s:?}");
            assert_eq!(
                allowed(s, Op::Commit),
                matches!(s, S::InTransaction | S::Committing),
                "{s:?}"
            );
            assert_eq!(
                allowed(s, Op::Abort),
                matches!(s, S::InTransaction | S::AbortableError | S::Aborting),
                "{s:?}"
            );
        }
        // Nothing at all once fatal.
        for op in [
            Op::Init,
            Op::Begin,
            Op::Send,
            Op::SendOffsets,
            Op::Commit,
            Op::Abort,
        ] {
            assert_eq!(start(S::FatalError, op), Err(S::FatalError));
        }
    }

    #[test]
    fn outcomes_move_the_state() {
        assert_eq!(finish(S::Initializing, Op::Init, &Ok(())), S::Ready);
        assert_eq!(
            finish(S::InTransaction, Op::Begin, &Ok(())),
            S::InTransaction
        );
        assert_eq!(finish(S::Committing, Op::Commit, &Ok(())), S::Ready);
        assert_eq!(finish(S::Aborting, Op::Abort, &Ok(())), S::Ready);
        // A failed send or offset commit: abort, nothing else.
        assert_eq!(
            finish(S::InTransaction, Op::SendOffsets, &Err(abortable())),
            S::AbortableError
        );
        assert_eq!(
            finish(S::Committing, Op::Commit, &Err(abortable())),
            S::AbortableError
        );
        // Fenced: the end.
        let fenced = Err(TransactionError::Fenced(ErrorCode::ProducerFenced));
        assert_eq!(finish(S::Committing, Op::Commit, &fenced), S::FatalError);
        assert_eq!(finish(S::Initializing, Op::Init, &fenced), S::FatalError);
        // A timeout leaves the call to be made again.
        let timeout = Err(TransactionError::Timeout(Duration::from_secs(1)));
        assert_eq!(finish(S::Committing, Op::Commit, &timeout), S::Committing);
        assert_eq!(finish(S::Aborting, Op::Abort, &timeout), S::Aborting);
        assert_eq!(finish(S::Initializing, Op::Init, &timeout), S::Initializing);
        assert!(start(finish(S::Committing, Op::Commit, &timeout), Op::Commit).is_ok());
    }

    #[test]
    fn a_failed_record_makes_the_transaction_abortable_and_a_commit_refused() {
        let txn = Txn::new("t".into(), Duration::from_secs(60));
        lock(&txn.core).state = S::InTransaction;
        txn.delivery_failed(&DeliveryError::Timeout(Duration::from_secs(1)));
        assert_eq!(txn.state(), S::AbortableError);
        let refused = txn.check(Op::Commit).unwrap_err();
        assert!(refused.is_abortable(), "{refused}");
        assert!(txn.check(Op::Abort).is_ok());
        // Records failed by the abort itself change nothing.
        lock(&txn.core).state = S::Aborting;
        txn.delivery_failed(&DeliveryError::Aborted);
        assert_eq!(txn.state(), S::Aborting);
    }
}
