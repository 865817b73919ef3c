//! Group membership under the classic protocol, in a background task: find the coordinator,
//! JoinGroup (with KIP-394's member-id round trip and KIP-345 static membership), SyncGroup
//! (the leader runs the assignor), heartbeats, auto commit, LeaveGroup on close.
//!
//! The rebalance protocol follows the assignors, as in the Java client: cooperative when every
//! configured assignor is cooperative-sticky (partitions are revoked only when they move, in a
//! second round), eager otherwise (everything is revoked before joining).

//!
//! - `join`: one rebalance (JoinGroup, the leader's assignment, SyncGroup, the new partitions).
//! - `stable`: the generation's life (heartbeats, auto commit, reasons to rejoin), leaving and
//!   closing.
//! - `assignor`: the `range` and `cooperative-sticky` assignors and the consumer protocol's
//!   messages.

pub(crate) mod assignor;
mod join;
mod stable;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::config::AssignorKind;
use crate::consumer::error::ConsumeError;
use crate::consumer::state::Shared;
use crate::error::CallError;
use crate::util::backoff;
use crate::TopicPartition;

/// Told about partitions as the group moves them. Called from the group task: keep it short
/// and do not block (hand work to another task if needed).
///
/// With `enable.auto.commit`, the offsets of processed records are committed before
/// `on_partitions_revoked` is called.
pub trait RebalanceListener: Send + Sync + std::fmt::Debug {
    /// Partitions newly assigned (their position is the committed offset, or
    /// `auto.offset.reset`).
    fn on_partitions_assigned(&self, _partitions: &[TopicPartition]) {}
    /// Partitions given up in an orderly rebalance (or on close).
    fn on_partitions_revoked(&self, _partitions: &[TopicPartition]) {}
    /// Partitions lost: the member was dropped from the group (session timeout, fenced
    /// generation) and others may already own them; nothing could be committed.
    fn on_partitions_lost(&self, partitions: &[TopicPartition]) {
        self.on_partitions_revoked(partitions);
    }
}

/// Why the stable phase ended.
enum Next {
    Rejoin,
    Close,
}

/// A failure of one join attempt.
enum JoinFailure {
    /// Try again after a backoff.
    Retry(CallError),
    /// The group will not take this member.
    Fatal(CallError),
}

struct Member {
    shared: Arc<Shared>,
    listener: Option<Arc<dyn RebalanceListener>>,
    group: String,
    member_id: String,
    generation: i32,
    cooperative: bool,
    leader: bool,
    /// Topics and partition counts the leader assigned from (a change means rebalance).
    assigned_from: BTreeMap<String, i32>,
    joined_subscription: BTreeSet<String>,
    attempts: u32,
}

pub(crate) async fn run(shared: Arc<Shared>, listener: Option<Arc<dyn RebalanceListener>>) {
    let Some(group) = shared.config.group_id.clone() else {
        return;
    };
    let cooperative = shared
        .config
        .assignors
        .iter()
        .all(|a| *a == AssignorKind::CooperativeSticky);
    let mut member = Member {
        shared,
        listener,
        group,
        member_id: String::new(),
        generation: -1,
        cooperative,
        leader: false,
        assigned_from: BTreeMap::new(),
        joined_subscription: BTreeSet::new(),
        attempts: 0,
    };
    member.run().await;
}

fn closing(shared: &Shared) -> bool {
    shared.closing.load(Ordering::Acquire)
}

/// Returns once the consumer is closing.
async fn wait_closing(shared: &Shared) {
    loop {
        let notified = shared.group.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if closing(shared) {
            return;
        }
        notified.await;
    }
}

impl Member {
    fn subscription(&self) -> BTreeSet<String> {
        self.shared.state().subscription.clone()
    }

    fn owned(&self) -> Vec<TopicPartition> {
        self.shared.state().partitions.keys().cloned().collect()
    }

    async fn run(&mut self) {
        let shared = self.shared.clone();
        loop {
            if closing(&self.shared) {
                self.close().await;
                return;
            }
            let notified = shared.group.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let waiting_for_poll = self.shared.state().left_for_poll_timeout;
            let subscription = self.subscription();
            if subscription.is_empty() || waiting_for_poll {
                if waiting_for_poll
                    && self.shared.last_poll().elapsed() < self.shared.config.max_poll_interval
                {
                    self.shared.state().left_for_poll_timeout = false;
                    continue;
                }
                if !subscription.is_empty() || self.generation < 0 {
                    notified.await;
                    continue;
                }
                // Unsubscribed: give everything back and leave.
                self.revoke_all().await;
                self.leave().await;
                continue;
            }
            let outcome = tokio::select! {
                r = self.join(&subscription) => Some(r),
                () = wait_closing(&shared) => None,
            };
            let Some(outcome) = outcome else {
                self.close().await;
                return;
            };
            match outcome {
                Ok(again) => {
                    self.attempts = 0;
                    if again {
                        continue;
                    }
                }
                Err(JoinFailure::Fatal(e)) => {
                    self.shared.state().fatal = Some(ConsumeError::Group(e));
                    self.shared.records.notify_one();
                    // Nothing more to do until close.
                    while !closing(&self.shared) {
                        self.shared.group.notified().await;
                    }
                    continue;
                }
                Err(JoinFailure::Retry(e)) => {
                    tracing::debug!(group = %self.group, error = %e, "rebalance failed; retrying");
                    let net = &self.shared.config.net;
                    let pause = backoff(net.retry_backoff, net.retry_backoff_max, self.attempts);
                    self.attempts += 1;
                    tokio::select! {
                        () = tokio::time::sleep(pause) => {}
                        () = self.shared.group.notified() => {}
                    }
                    continue;
                }
            }
            match self.stable().await {
                Next::Rejoin => continue,
                Next::Close => {
                    self.close().await;
                    return;
                }
            }
        }
    }

    fn set_rebalancing(&self, on: bool) {
        let mut st = self.shared.state();
        st.membership.rebalancing = on;
        st.membership.generation = if on { -1 } else { self.generation };
        st.membership.member_id = self.member_id.clone();
    }

    /// Commits processed offsets (auto commit only), then gives `partitions` back.
    async fn revoke(&mut self, partitions: &[TopicPartition]) {
        if partitions.is_empty() {
            return;
        }
        if self.shared.config.enable_auto_commit && self.generation >= 0 {
            let offsets: BTreeMap<TopicPartition, i64> = self
                .shared
                .state()
                .commit_offsets(false)
                .into_iter()
                .filter(|(tp, _)| partitions.contains(tp))
                .collect();
            let _ = self.shared.commit(offsets).await;
        }
        if let Some(l) = &self.listener {
            l.on_partitions_revoked(partitions);
        }
        self.shared.state().remove_partitions(partitions);
        self.shared.fetcher.notify_one();
    }

    async fn revoke_all(&mut self) {
        let owned = self.owned();
        self.revoke(&owned).await;
    }

    /// The generation is gone: partitions are lost, nothing is committed.
    fn lose_all(&mut self, reset_member: bool) {
        let owned = self.owned();
        if !owned.is_empty() {
            if let Some(l) = &self.listener {
                l.on_partitions_lost(&owned);
            }
            self.shared.state().remove_partitions(&owned);
        }
        self.generation = -1;
        if reset_member {
            self.member_id.clear();
        }
        self.set_rebalancing(true);
    }
}
