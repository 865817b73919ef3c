//! The backlog facade: what a produce to a backlog-bounded topic gets (`backlog`), measured
//! from the log and the bounding group's position (committed offsets or share start).

use std::sync::Arc;

use log_core::Topic;

use super::groups::Groups;
use super::storage::Storage;
use super::Admin;
use crate::backlog::{self, Backlogs, Bound, Verdict};
use crate::shares::Shares;

/// Backlog bounds, over the storage and the groups they are measured against.
#[derive(Debug)]
pub struct Backlog {
    storage: Arc<Storage>,
    groups: Arc<Groups>,
    shares: Arc<Shares>,
    /// Its quota window caps how long a produce may be held.
    admin: Arc<Admin>,
    /// The measured backlogs of backlog-bounded topics.
    backlogs: Backlogs,
}

impl Backlog {
    pub(super) fn new(
        storage: Arc<Storage>,
        groups: Arc<Groups>,
        shares: Arc<Shares>,
        admin: Arc<Admin>,
    ) -> Backlog {
        Backlog {
            storage,
            groups,
            shares,
            admin,
            backlogs: Backlogs::default(),
        }
    }

    /// What a produce to `topic` gets from its backlog bound now (`backlog`): measured again,
    /// on the blocking pool, when the last measure is older than [`backlog::REFRESH`].
    pub async fn verdict(self: &Arc<Self>, topic: &str) -> Verdict {
        let Some(handle) = self.storage.log.topic(topic) else {
            return Verdict::Accept;
        };
        let Some(bound) = Bound::of(&handle.config()) else {
            return Verdict::Accept;
        };
        let state = match self.backlogs.fresh(topic) {
            Some(state) => state,
            None => {
                let (owner, for_measure) = (self.clone(), bound.clone());
                let measured =
                    crate::blocking::spawn(move || owner.measure(&handle, &for_measure)).await;
                match measured {
                    Ok(state) => {
                        self.backlogs.store(topic, state.clone());
                        state
                    }
                    Err(e) => {
                        tracing::error!(topic, error = %e, "measuring the backlog failed");
                        return Verdict::Accept;
                    }
                }
            }
        };
        let cap = self.admin.quotas.window().length();
        Backlogs::verdict(topic, &bound, &state, cap)
    }

    /// `topic`'s backlog for `bound`, measured now (it may read a segment: blocking).
    pub fn measure(&self, topic: &Topic, bound: &Bound) -> backlog::State {
        let position = |index: i32| {
            self.groups
                .offsets
                .fetch(&bound.group, topic.name(), index)
                .map(|c| c.offset)
                .or_else(|| self.shares.start_offset(&bound.group, topic.id(), index))
        };
        self.backlogs.measure(position, topic, bound)
    }
}
