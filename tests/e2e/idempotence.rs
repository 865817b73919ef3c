//! Idempotence across restarts, however long ago a producer last wrote: the broker keeps each
//! partition's producer state in a snapshot written at every segment roll and at a clean
//! shutdown (`server/src/producers/snapshot.rs`), so a producer whose last batch lies many
//! segments back is still known after a clean stop and after kill -9 (before snapshots, only
//! the last two segments were read, and such a retry was stored again).

use std::time::Duration;

use log_core::batch;
use test_support::kafka::{init_producer_id, list_offset, produce, try_create_topic};
use test_support::TestBroker;

/// A batch of `count` records of producer `pid` from `sequence`.
fn batch_of(pid: i64, epoch: i16, sequence: i32, count: i32, tag: &str) -> bytes::Bytes {
    let values: Vec<String> = (0..count).map(|r| format!("{tag}-{r}")).collect();
    let records: Vec<batch::NewRecord> = values
        .iter()
        .map(|v| (None, Some(v.as_bytes()), 1))
        .collect();
    batch::build_for_producer(&records, pid, epoch, sequence)
}

#[test]
fn a_producer_whose_last_batch_is_segments_back_is_known_after_a_restart() {
    let mut broker = TestBroker::start_temp(&[]);
    let topic = "idem-old";
    // segment.ms 100: each pause below rolls a segment at the next append.
    assert_eq!(
        try_create_topic(&broker.addr, topic, 1, &[("segment.ms", "100")]),
        0
    );
    let quiet = init_producer_id(&broker.addr);
    let busy = init_producer_id(&broker.addr);
    // The quiet producer writes once; the busy one then writes across six segments.
    let first = batch_of(quiet.0, quiet.1, 0, 5, "quiet");
    assert_eq!(produce(&broker.addr, topic, 0, first.clone()), (0, 0));
    let mut sequence = 0;
    for round in 0..6 {
        std::thread::sleep(Duration::from_millis(150));
        for n in 0..3 {
            let b = batch_of(busy.0, busy.1, sequence, 4, &format!("busy-{round}-{n}"));
            assert_eq!(produce(&broker.addr, topic, 0, b).0, 0);
            sequence += 4;
        }
    }
    let end = list_offset(&broker.addr, topic, -1).1;
    assert_eq!(end, 5 + 6 * 3 * 4);

    for restart in ["a clean stop", "kill -9"] {
        if restart == "kill -9" {
            broker.kill9();
        } else {
            broker.stop();
        }
        broker.restart();
        // The quiet producer's batch, sent again (its ack was lost): answered at its offset.
        assert_eq!(
            produce(&broker.addr, topic, 0, first.clone()),
            (0, 0),
            "the quiet producer's retry after {restart}"
        );
        assert_eq!(
            list_offset(&broker.addr, topic, -1).1,
            end,
            "after {restart}: nothing stored twice"
        );
    }
    // Its next batch follows on; one out of sequence is refused.
    let skipped = batch_of(quiet.0, quiet.1, 9, 1, "skipped");
    const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    assert_eq!(
        produce(&broker.addr, topic, 0, skipped).0,
        OUT_OF_ORDER_SEQUENCE_NUMBER
    );
    let next = batch_of(quiet.0, quiet.1, 5, 1, "next");
    assert_eq!(produce(&broker.addr, topic, 0, next), (0, end));
}
