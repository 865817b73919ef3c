#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

const MAX: i32 = 900_000;

fn ids() -> impl FnMut() -> i64 {
    let mut next = 100;
    move || {
        next += 1;
        next
    }
}

fn ready(init: Init) -> Txn {
    match init {
        Init::Ready(t) => t,
        other => panic!("expected Ready, got {other:?}"),
    }
}

fn p(topic: &str, i: i32) -> (String, i32) {
    (topic.to_string(), i)
}

#[test]
fn timeouts_beyond_the_maximum_or_not_positive_are_refused() {
    let mut ids = ids();
    for bad in [0, -1, MAX + 1] {
        assert_eq!(
            init(None, bad, MAX, None, 0, &mut ids),
            Err(TxnError::InvalidTimeout(bad))
        );
    }
    assert!(init(None, MAX, MAX, None, 0, &mut ids).is_ok());
}

#[test]
fn a_transaction_commits_through_prepare_to_complete() {
    let mut ids = ids();
    let t = ready(init(None, 60_000, MAX, None, 1, &mut ids).unwrap());
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.state),
        (101, 0, State::Empty)
    );
    let t = add_partitions(Some(&t), 101, 0, &[p("a", 0)], 2)
        .unwrap()
        .unwrap();
    assert_eq!((t.state, t.start_ms), (State::Ongoing, 2));
    assert_eq!(add_partitions(Some(&t), 101, 0, &[p("a", 0)], 3), Ok(None));
    assert_eq!(check_produce(Some(&t), 101, 0, &p("a", 0)), Ok(()));
    assert_eq!(
        check_produce(Some(&t), 101, 0, &p("a", 1)),
        Err(ProduceCheck::NotInTransaction)
    );
    let End::Prepare(t) = end(Some(&t), 101, 0, true, 4).unwrap() else {
        panic!()
    };
    assert_eq!(t.state, State::PrepareCommit);
    assert_eq!(
        add_partitions(Some(&t), 101, 0, &[p("a", 1)], 5),
        Err(TxnError::Concurrent(State::PrepareCommit))
    );
    assert_eq!(
        end(Some(&t), 101, 0, true, 5),
        Err(TxnError::Concurrent(State::PrepareCommit))
    );
    let t = complete(&t, 6, &mut ids).unwrap();
    assert_eq!(t.state, State::CompleteCommit);
    assert!(t.partitions.is_empty());
    assert_eq!(end(Some(&t), 101, 0, true, 7), Ok(End::Done));
    assert!(matches!(
        end(Some(&t), 101, 0, false, 7),
        Err(TxnError::InvalidState { .. })
    ));
}

#[test]
fn a_new_producer_fences_the_old_and_aborts_its_transaction_first() {
    let mut ids = ids();
    let t = ready(init(None, 60_000, MAX, None, 1, &mut ids).unwrap());
    let t = add_partitions(Some(&t), 101, 0, &[p("a", 0)], 2)
        .unwrap()
        .unwrap();
    let Init::AbortFirst(t) = init(Some(&t), 60_000, MAX, None, 3, &mut ids).unwrap() else {
        panic!()
    };
    assert_eq!((t.state, t.producer_epoch), (State::PrepareAbort, 1));
    assert_eq!(
        init(Some(&t), 60_000, MAX, None, 3, &mut ids),
        Err(TxnError::Concurrent(State::PrepareAbort))
    );
    let t = complete(&t, 4, &mut ids).unwrap();
    let t = ready(init(Some(&t), 60_000, MAX, None, 5, &mut ids).unwrap());
    assert_eq!((t.producer_id, t.producer_epoch), (101, 2));
    // The old producer is fenced everywhere.
    assert_eq!(
        add_partitions(Some(&t), 101, 0, &[p("a", 0)], 6),
        Err(TxnError::Fenced {
            given: 0,
            current: 2
        })
    );
    assert!(matches!(
        end(Some(&t), 101, 0, true, 6),
        Err(TxnError::Fenced { .. })
    ));
    assert_eq!(
        check_produce(Some(&t), 101, 0, &p("a", 0)),
        Err(ProduceCheck::Epoch {
            given: 0,
            current: 2
        })
    );
}

#[test]
fn a_retried_init_producer_id_gets_the_same_answer() {
    let mut ids = ids();
    let t = ready(init(None, 60_000, MAX, None, 1, &mut ids).unwrap());
    let t2 = ready(init(Some(&t), 60_000, MAX, Some((101, 0)), 2, &mut ids).unwrap());
    assert_eq!((t2.producer_epoch, t2.last_producer_epoch), (1, 0));
    assert_eq!(
        init(Some(&t2), 60_000, MAX, Some((101, 0)), 3, &mut ids),
        Ok(Init::Again {
            producer_id: 101,
            epoch: 1
        })
    );
    assert!(matches!(
        init(Some(&t2), 60_000, MAX, Some((101, 7)), 3, &mut ids),
        Err(TxnError::Fenced { .. })
    ));
    assert!(matches!(
        init(Some(&t2), 60_000, MAX, Some((55, 0)), 3, &mut ids),
        Err(TxnError::ProducerIdMismatch { .. })
    ));
}

#[test]
fn an_exhausted_epoch_takes_a_new_producer_id() {
    let mut ids = ids();
    let mut t = ready(init(None, 60_000, MAX, None, 1, &mut ids).unwrap());
    t.producer_epoch = i16::MAX - 1;
    let t = ready(init(Some(&t), 60_000, MAX, None, 2, &mut ids).unwrap());
    assert_eq!((t.producer_id, t.producer_epoch), (102, 0));
    assert_eq!(
        (t.last_producer_id, t.last_producer_epoch),
        (101, i16::MAX - 1)
    );
}

#[test]
fn timeouts_and_expiry() {
    let mut ids = ids();
    let t = ready(init(None, 1_000, MAX, None, 0, &mut ids).unwrap());
    assert!(!timed_out(&t, 10_000), "no transaction open");
    let t = add_partitions(Some(&t), 101, 0, &[p("a", 0)], 100)
        .unwrap()
        .unwrap();
    assert!(!timed_out(&t, 1_100));
    assert!(timed_out(&t, 1_101));
    assert!(
        !expired(&t, i64::MAX, 1),
        "an ongoing transaction never expires"
    );
    let aborted = complete(&fence_and_abort(&t, 1_200), 1_300, &mut ids).unwrap();
    assert_eq!(aborted.state, State::CompleteAbort);
    assert!(!expired(&aborted, 1_399, 100));
    assert!(expired(&aborted, 1_400, 100));
}

#[test]
fn txn_offset_commit_needs_add_offsets_to_txn() {
    let mut ids = ids();
    let t = ready(init(None, 1_000, MAX, None, 0, &mut ids).unwrap());
    let offset = PendingOffset {
        offset: 5,
        leader_epoch: -1,
        metadata: None,
    };
    assert!(matches!(
        commit_offsets(
            Some(&t),
            101,
            0,
            "g",
            vec![(p("a", 0), offset.clone())],
            false,
            1
        ),
        Err(TxnError::InvalidState { .. })
    ));
    let t = add_offsets(Some(&t), 101, 0, "g", 1).unwrap().unwrap();
    let t = commit_offsets(
        Some(&t),
        101,
        0,
        "g",
        vec![(p("a", 0), offset.clone())],
        false,
        2,
    )
    .unwrap();
    assert_eq!(t.offsets["g"][&p("a", 0)], offset);
    // Transaction version 2 (TxnOffsetCommit v5): the commit adds the group itself.
    let t = ready(init(None, 1_000, MAX, None, 0, &mut ids).unwrap());
    let t = commit_offsets(
        Some(&t),
        102,
        0,
        "h",
        vec![(p("a", 0), offset.clone())],
        true,
        3,
    )
    .unwrap();
    assert_eq!((t.state, t.start_ms), (State::Ongoing, 3));
    assert_eq!(t.offsets["h"][&p("a", 0)], offset);
}

fn prepared(end: Result<End, TxnError>) -> Txn {
    match end {
        Ok(End::Prepare(t)) => t,
        other => panic!("expected Prepare, got {other:?}"),
    }
}

#[test]
fn transaction_version_2_bumps_the_epoch_at_each_end_and_knows_a_retry() {
    let mut ids = ids();
    let t = ready(init(None, 60_000, MAX, None, 1, &mut ids).unwrap());
    let t = add_partitions(Some(&t), 101, 0, &[p("a", 0)], 2)
        .unwrap()
        .unwrap();
    let t = prepared(epoch_bump::end(Some(&t), 101, 0, true, 3));
    assert_eq!((t.state, t.producer_epoch), (State::PrepareCommit, 1));
    assert_eq!((t.last_producer_id, t.last_producer_epoch), (101, 0));
    assert_eq!(
        t.partitions.len(),
        1,
        "the markers go where the records went"
    );
    // A retry while the markers are written, then once they are.
    assert_eq!(
        epoch_bump::end(Some(&t), 101, 0, true, 4),
        Err(TxnError::Concurrent(State::PrepareCommit))
    );
    let t = complete(&t, 5, &mut ids).unwrap();
    assert_eq!((t.state, t.producer_epoch), (State::CompleteCommit, 1));
    assert_eq!(epoch_bump::end(Some(&t), 101, 0, true, 6), Ok(End::Done));
    assert!(matches!(
        epoch_bump::end(Some(&t), 101, 0, false, 6),
        Err(TxnError::InvalidState { .. })
    ));
    // The old epoch is fenced for anything else; the bumped one opens the next transaction.
    assert!(matches!(
        add_partitions(Some(&t), 101, 0, &[p("a", 0)], 7),
        Err(TxnError::Fenced { .. })
    ));
    assert!(matches!(
        epoch_bump::end(Some(&t), 101, 3, true, 7),
        Err(TxnError::Fenced { .. })
    ));
    // An abort with nothing open moves to a fresh epoch too.
    let t = prepared(epoch_bump::end(Some(&t), 101, 1, false, 8));
    assert_eq!((t.state, t.producer_epoch), (State::PrepareAbort, 2));
    assert!(t.partitions.is_empty());
    let t = complete(&t, 9, &mut ids).unwrap();
    assert_eq!(epoch_bump::end(Some(&t), 101, 1, false, 10), Ok(End::Done));
    assert!(matches!(
        epoch_bump::end(Some(&t), 101, 2, true, 10),
        Err(TxnError::InvalidState { .. })
    ));
}

#[test]
fn transaction_version_2_moves_to_a_new_producer_id_when_the_epochs_run_out() {
    let mut ids = ids();
    let mut t = ready(init(None, 60_000, MAX, None, 1, &mut ids).unwrap());
    t.producer_epoch = i16::MAX - 1;
    let t = add_partitions(Some(&t), 101, i16::MAX - 1, &[p("a", 0)], 2)
        .unwrap()
        .unwrap();
    let t = prepared(epoch_bump::end(Some(&t), 101, i16::MAX - 1, false, 3));
    assert_eq!((t.producer_id, t.producer_epoch), (101, i16::MAX));
    assert!(completion_takes_new_id(&t));
    let t = complete(&t, 4, &mut ids).unwrap();
    assert_eq!(
        (t.producer_id, t.producer_epoch, t.state),
        (102, 0, State::CompleteAbort)
    );
    // The retry carries the old id at its last epoch.
    assert_eq!(
        epoch_bump::end(Some(&t), 101, i16::MAX - 1, false, 5),
        Ok(End::Done)
    );
    assert!(matches!(
        epoch_bump::end(Some(&t), 101, 7, false, 5),
        Err(TxnError::ProducerIdMismatch { .. })
    ));
    let t = add_partitions(Some(&t), 102, 0, &[p("a", 0)], 6)
        .unwrap()
        .unwrap();
    assert_eq!(t.state, State::Ongoing);
}
