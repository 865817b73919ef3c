//! ShareFetch's long poll: the look for records on the blocking pool (the request's
//! acknowledgements applied with the first), repeated at each append or release until records
//! are acquired, the fetch's `max_wait_ms` passes or the broker shuts down.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ShareFetchRequest;

use super::{apply_acks, joined, AckResults, Acks, TaskFailed};
use crate::broker::Storage;
use crate::shares::Shares;
use crate::shares::{FetchLimits, PartitionFetch, Pending, Requester, TopicPartition};
use tokio::sync::watch;

/// Records a fetch acquires when it does not say (`max.poll.records`' default).
const DEFAULT_MAX_RECORDS: usize = 500;

/// What a fetch looks for records in, and until when it waits for them.
pub(super) struct Poll {
    /// The session's partitions of READ-able topics.
    partitions: Vec<TopicPartition>,
    limits: FetchLimits,
    /// Where the partitions' turns start (the session epoch).
    rotate: usize,
    deadline: tokio::time::Instant,
}

impl Poll {
    /// The fetch `request` asks for on `partitions`: its limits, the turn its session epoch
    /// gives, and its deadline (`max_wait_ms` from now).
    pub(super) fn new(request: &ShareFetchRequest, partitions: Vec<TopicPartition>) -> Poll {
        let limits = limits(request);
        let rotate = usize::try_from(request.share_session_epoch).unwrap_or(0);
        let max_wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
        Poll {
            partitions,
            limits,
            rotate,
            deadline: tokio::time::Instant::now() + max_wait,
        }
    }
}

/// Looks for records for `member` of `group`, the acknowledgements applied with the first look
/// (one trip to the blocking pool instead of two); with nothing acquired, looks again at each
/// append or release until the deadline or shutdown. Returns the acknowledgements' outcomes,
/// the last look's records and the state changes to make durable.
pub(super) async fn poll_records(
    storage: &Arc<Storage>,
    shares: &Arc<Shares>,
    shutdown: &watch::Receiver<bool>,
    group: &str,
    member: &str,
    poll: Poll,
    acks: Acks,
) -> Result<(AckResults, Vec<PartitionFetch>, Pending), TaskFailed> {
    let mut acks = Some(acks);
    let (mut ack_results, mut pending) = (Vec::new(), Pending::default());
    let mut shutdown = shutdown.clone();
    let Poll {
        partitions,
        limits,
        rotate,
        deadline,
    } = poll;
    loop {
        // Registered before looking, so no append or release in between is missed.
        let appended = storage.appended.notified();
        let released = shares.released.notified();
        tokio::pin!(appended, released);
        appended.as_mut().enable();
        released.as_mut().enable();
        let (owner, owner_shares) = (storage.clone(), shares.clone());
        let (g, m, ps) = (group.to_string(), member.to_string(), partitions.clone());
        let acks = acks.take();
        let (acked, got, more) = joined(crate::blocking::spawn(move || {
            let mut pending = Pending::default();
            let now = log_core::now_ms();
            let acked =
                acks.map(|acks| apply_acks(&owner, &owner_shares, &g, &m, acks, now, &mut pending));
            let from = Requester {
                group: &g,
                member: &m,
                now,
            };
            let got = owner_shares.acquire(&owner.log, from, &ps, rotate, limits, &mut pending);
            (acked, got, pending)
        }))
        .await?;
        if let Some(acked) = acked {
            ack_results = acked;
        }
        pending.0.extend(more.0);
        let any = got
            .iter()
            .any(|f| !f.acquired.is_empty() || f.error.is_some());
        if any || tokio::time::Instant::now() >= deadline || *shutdown.borrow() {
            return Ok((ack_results, got, pending));
        }
        tokio::select! {
            () = &mut appended => {}
            () = &mut released => {}
            () = tokio::time::sleep_until(deadline) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// How much the fetch may acquire: `max_records` (500 if not said), `max_bytes`, and the
/// acquire mode (ShareAcquireMode, v2: 0 batch_optimized, also what v1 gets; 1 record_limit).
fn limits(request: &ShareFetchRequest) -> FetchLimits {
    let max_records = usize::try_from(request.max_records)
        .ok()
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_RECORDS);
    let max_bytes = usize::try_from(request.max_bytes).unwrap_or(0).max(1);
    FetchLimits {
        records: max_records,
        bytes: max_bytes,
        whole_batches: request.share_acquire_mode != 1,
    }
}
