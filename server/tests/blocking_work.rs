//! Blocking work never runs on an async worker: the broker runs in this process on a runtime
//! of ONE worker thread (the test's clients on a runtime of their own), over a storage fake
//! whose fsyncs the test holds. While a produce to
//! topic A is stuck in its segment roll (index files and data are fsynced), and while a produce
//! to topic C waits for its fsync, produces to topic B (write caching: no fsync to wait for)
//! are still answered. Had the
//! roll or the fsync wait run on the worker, B would wait too.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::sync::Arc;
use std::time::Duration;

use consumer::{Admin, Connection};
use kafka_protocol::messages::ProduceResponse;
use log_core::io::{Faults, FaultyStorage};
use log_core::{batch, LogOptions};
use test_support::kafka::produce_request;
use test_support::InProcess;

/// Produces one batch of `size` bytes of value; the error code and base offset.
async fn produce(addr: &str, topic: &str, size: usize) -> (i16, i64) {
    let mut connection = Connection::connect(addr).await.unwrap();
    let value = vec![b'v'; size];
    let records = batch::build(&[(None, Some(value.as_slice()), 1)]);
    let response: ProduceResponse = connection
        .call(&produce_request(topic, 0, Some(records)), 9)
        .await
        .unwrap();
    let partition = &response.responses[0].partition_responses[0];
    (partition.error_code, partition.base_offset)
}

/// Releases held fsyncs when dropped, so that a failing assertion cannot leave blocking threads
/// (and with them the runtime's shutdown) waiting forever.
struct Release(Arc<Faults>);

impl Drop for Release {
    fn drop(&mut self) {
        self.0.hold_syncs(false);
    }
}

#[test]
fn a_segment_roll_and_an_fsync_wait_do_not_stall_other_requests() {
    let faults = Faults::new();
    // One worker thread: blocking work run on it would stall every other request.
    let mut broker = InProcess::start(1, |config| {
        config.log = LogOptions {
            storage: Arc::new(FaultyStorage::new(faults.clone())),
            ..LogOptions::default()
        }
    });
    // Declared after the broker, so dropped before it: held fsyncs are released first.
    let _release = Release(faults.clone());
    let addr = broker.addr.clone();

    let clients = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    clients.block_on(async {
        let mut admin = Admin::connect(&addr).await.unwrap();
        let one_mib = vec![("segment.bytes".to_string(), "1048576".to_string())];
        admin.create_topic("a", 1, &one_mib).await.unwrap();
        // b answers from the page cache (write caching): its produces wait for no fsync.
        let cached = vec![("write.caching".to_string(), "true".to_string())];
        admin.create_topic("b", 1, &cached).await.unwrap();
        let always = vec![("flush.messages".to_string(), "1".to_string())];
        admin.create_topic("c", 1, &always).await.unwrap();
        // Fill a's first segment to just below 1 MiB: 17 batches of 60 KiB and a header.
        for _ in 0..17 {
            assert_eq!(produce(&addr, "a", 60 * 1024).await.0, 0);
        }

        faults.hold_syncs(true);
        // This one rolls a's segment: its fsyncs are held.
        let rolling = tokio::spawn({
            let addr = addr.clone();
            async move { produce(&addr, "a", 60 * 1024).await }
        });
        // This one waits for c's fsync, also held.
        let durable = tokio::spawn({
            let addr = addr.clone();
            async move { produce(&addr, "c", 100).await }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while faults.held_syncs() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the roll and the fsync never started"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // b is answered while both wait.
        for expected in 0..3 {
            let answered = tokio::time::timeout(Duration::from_secs(10), produce(&addr, "b", 100));
            assert_eq!(
                answered.await.expect("a produce to b was not answered"),
                (0, expected)
            );
        }
        assert!(!rolling.is_finished() && !durable.is_finished());

        faults.hold_syncs(false);
        assert_eq!(rolling.await.unwrap(), (0, 17));
        assert_eq!(durable.await.unwrap(), (0, 0));
    });
    broker.stop(Duration::from_secs(60));
}
