//! Groups' state history as the console sees it: each load of a group's page samples its
//! state, epoch and member count, and a sample that differs from the last one is kept. With
//! the page open (it reloads every 5 s) that is the group's history while it is watched; the
//! broker keeps no history of its own. Bounded: [`KEPT`] changes per group, [`GROUPS`] groups
//! (the one watched least recently goes first).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};

/// Changes kept per group.
pub const KEPT: usize = 20;
/// Groups with a history at most.
const GROUPS: usize = 1000;

/// A group as one page load saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Ms since the epoch.
    pub at: i64,
    pub state: &'static str,
    /// The group epoch (a classic group's generation is not shown).
    pub epoch: Option<i32>,
    pub members: usize,
}

impl Sample {
    fn same_as(&self, other: &Sample) -> bool {
        (self.state, self.epoch, self.members) == (other.state, other.epoch, other.members)
    }
}

/// Each watched group's changes, oldest first, with when it was last sampled.
#[derive(Debug, Default)]
pub struct History(Mutex<HashMap<String, (i64, VecDeque<Sample>)>>);

impl History {
    /// Notes `sample` of `group` (kept if it differs from the last); the history, oldest first.
    pub fn note(&self, group: &str, sample: Sample) -> Vec<Sample> {
        let mut groups = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !groups.contains_key(group) && groups.len() >= GROUPS {
            let least = groups
                .iter()
                .min_by_key(|(_, (seen, _))| *seen)
                .map(|(id, _)| id.clone());
            if let Some(least) = least {
                groups.remove(&least);
            }
        }
        let (seen, changes) = groups.entry(group.to_string()).or_default();
        *seen = sample.at;
        if !changes.back().is_some_and(|last| last.same_as(&sample)) {
            if changes.len() == KEPT {
                changes.pop_front();
            }
            changes.push_back(sample);
        }
        changes.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: i64, state: &'static str, members: usize) -> Sample {
        Sample {
            at,
            state,
            epoch: Some(1),
            members,
        }
    }

    #[test]
    fn only_changes_are_kept_and_at_most_kept_of_them() {
        let history = History::default();
        history.note("g", sample(1, "Stable", 2));
        history.note("g", sample(2, "Stable", 2));
        let seen = history.note("g", sample(3, "Empty", 0));
        assert_eq!(seen, vec![sample(1, "Stable", 2), sample(3, "Empty", 0)]);
        for at in 0..100 {
            history.note("g", sample(10 + at, "Stable", at as usize));
        }
        let seen = history.note("g", sample(200, "Stable", 99));
        assert_eq!(seen.len(), KEPT);
        assert_eq!(seen.last().unwrap().at, 109);
    }

    #[test]
    fn the_group_watched_least_recently_goes_first() {
        let history = History::default();
        for i in 0..GROUPS {
            history.note(&format!("g{i}"), sample(i as i64, "Empty", 0));
        }
        history.note("g0", sample(5000, "Stable", 1));
        history.note("new", sample(6000, "Empty", 0));
        let groups = history.0.lock().unwrap();
        assert_eq!(groups.len(), GROUPS);
        assert!(groups.contains_key("g0") && !groups.contains_key("g1"));
    }
}
