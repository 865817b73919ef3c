//! The streams groups' task assignor, `sticky` as Kafka's `StickyTaskAssignor` in what it
//! guarantees: every task has exactly one active owner; the active tasks are spread evenly
//! (at most one more on any member than on another); a task stays with the member that had it
//! while that member is under its share; standby replicas go only to stateful tasks and never
//! to a process that holds the same task; the same input gives the same assignment.

use std::collections::{BTreeMap, BTreeSet};

/// A task: a subtopology and a partition.
pub type Task = (String, i32);

/// The kind of a task in a member's assignment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Active,
    Standby,
    Warmup,
}

/// What one member is to run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tasks {
    pub active: BTreeSet<Task>,
    pub standby: BTreeSet<Task>,
    pub warmup: BTreeSet<Task>,
}

impl Tasks {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }

    /// Whether it holds `task` of any kind.
    pub fn contains(&self, task: &Task) -> bool {
        self.active.contains(task) || self.standby.contains(task) || self.warmup.contains(task)
    }

    /// Adds `other`'s tasks, kind to kind.
    pub fn add(&mut self, other: &Tasks) {
        self.active.extend(other.active.iter().cloned());
        self.standby.extend(other.standby.iter().cloned());
        self.warmup.extend(other.warmup.iter().cloned());
    }

    /// Against `target`, kind for kind: what it keeps, what it must give up, what it gains.
    pub fn diff(&self, target: &Tasks) -> (Tasks, Tasks, Tasks) {
        let split = |have: &BTreeSet<Task>, want: &BTreeSet<Task>| {
            let keep = have.intersection(want).cloned().collect();
            let revoke = have.difference(want).cloned().collect();
            let add = want.difference(have).cloned().collect();
            (keep, revoke, add)
        };
        let (ka, ra, aa) = split(&self.active, &target.active);
        let (ks, rs, as_) = split(&self.standby, &target.standby);
        let (kw, rw, aw) = split(&self.warmup, &target.warmup);
        let tasks = |active, standby, warmup| Tasks {
            active,
            standby,
            warmup,
        };
        (tasks(ka, ks, kw), tasks(ra, rs, rw), tasks(aa, as_, aw))
    }

    /// Splits the tasks into those `keep` holds true for and the others, kind for kind.
    pub fn split(self, keep: impl Fn(Kind, &Task) -> bool) -> (Tasks, Tasks) {
        let part = |set: BTreeSet<Task>, kind| -> (BTreeSet<Task>, BTreeSet<Task>) {
            set.into_iter().partition(|t| keep(kind, t))
        };
        let (fa, ha) = part(self.active, Kind::Active);
        let (fs, hs) = part(self.standby, Kind::Standby);
        let (fw, hw) = part(self.warmup, Kind::Warmup);
        let yes = Tasks {
            active: fa,
            standby: fs,
            warmup: fw,
        };
        let no = Tasks {
            active: ha,
            standby: hs,
            warmup: hw,
        };
        (yes, no)
    }

    fn all(&self) -> impl Iterator<Item = &Task> {
        self.active.iter().chain(&self.standby).chain(&self.warmup)
    }

    /// Whether `self` and `other` share a task of the same kind.
    pub fn overlaps(&self, other: &Tasks) -> bool {
        !self.active.is_disjoint(&other.active)
            || !self.standby.is_disjoint(&other.standby)
            || !self.warmup.is_disjoint(&other.warmup)
    }

    /// Whether every task of `self` is in `other`, kind for kind.
    pub fn within(&self, other: &Tasks) -> bool {
        self.active.is_subset(&other.active)
            && self.standby.is_subset(&other.standby)
            && self.warmup.is_subset(&other.warmup)
    }
}

/// `tasks` by subtopology, each with its partitions in order (the wire's `TaskIds`).
pub fn by_subtopology(tasks: &BTreeSet<Task>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for (subtopology, partition) in tasks {
        match out.last_mut() {
            Some((last, partitions)) if *last == subtopology => partitions.push(*partition),
            _ => out.push((subtopology, vec![*partition])),
        }
    }
    out
}

/// A member as the assignor sees it.
#[derive(Debug, Clone)]
pub struct MemberSpec<'a> {
    pub process_id: &'a str,
    /// Its previous target.
    pub previous: &'a Tasks,
}

/// Every member's target: `tasks` (subtopology → number of tasks), `stateful` the
/// subtopologies with state (changelogs), `standbys` replicas of each stateful task.
pub fn assign(
    members: &BTreeMap<String, MemberSpec<'_>>,
    tasks: &BTreeMap<String, i32>,
    stateful: &BTreeSet<String>,
    standbys: usize,
) -> BTreeMap<String, Tasks> {
    let mut out: BTreeMap<String, Tasks> = members
        .keys()
        .map(|m| (m.clone(), Tasks::default()))
        .collect();
    if members.is_empty() {
        return out;
    }
    let all: Vec<Task> = tasks
        .iter()
        .flat_map(|(s, n)| (0..*n).map(move |p| (s.clone(), p)))
        .collect();
    let quota = all.len().div_ceil(members.len());
    let mut free = Vec::new();
    for task in &all {
        let previous = members
            .iter()
            .find(|(_, m)| m.previous.active.contains(task))
            .map(|(id, _)| id);
        match previous {
            Some(id) if out[id].active.len() < quota => {
                if let Some(t) = out.get_mut(id) {
                    t.active.insert(task.clone());
                }
            }
            _ => free.push(task.clone()),
        }
    }
    for task in free {
        if let Some(id) = least_loaded(&out, |_| true) {
            if let Some(t) = out.get_mut(&id) {
                t.active.insert(task);
            }
        }
    }
    for task in all.iter().filter(|(s, _)| stateful.contains(s)) {
        for _ in 0..standbys {
            let holders: BTreeSet<&str> = out
                .iter()
                .filter(|(_, t)| t.active.contains(task) || t.standby.contains(task))
                .map(|(id, _)| members[id].process_id)
                .collect();
            let eligible = |id: &String| !holders.contains(members[id].process_id);
            let sticky = members
                .iter()
                .find(|(id, m)| m.previous.standby.contains(task) && eligible(id))
                .map(|(id, _)| id.clone());
            let Some(id) = sticky.or_else(|| least_loaded(&out, eligible)) else {
                break;
            };
            if let Some(t) = out.get_mut(&id) {
                t.standby.insert(task.clone());
            }
        }
    }
    out
}

/// The eligible member with the fewest tasks (ties: the first by id).
fn least_loaded(
    out: &BTreeMap<String, Tasks>,
    eligible: impl Fn(&String) -> bool,
) -> Option<String> {
    out.iter()
        .filter(|(id, _)| eligible(id))
        .min_by_key(|(_, t)| t.all().count())
        .map(|(id, _)| id.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn specs<'a>(members: &'a [(&'a str, &'a str, Tasks)]) -> BTreeMap<String, MemberSpec<'a>> {
        members
            .iter()
            .map(|(id, process, previous)| {
                (
                    id.to_string(),
                    MemberSpec {
                        process_id: process,
                        previous,
                    },
                )
            })
            .collect()
    }

    #[test]
    fn every_task_has_one_active_owner_and_the_load_is_even() {
        let members = [
            ("a", "p1", Tasks::default()),
            ("b", "p2", Tasks::default()),
            ("c", "p3", Tasks::default()),
        ];
        let tasks = BTreeMap::from([("0".to_string(), 4), ("1".to_string(), 3)]);
        let out = assign(&specs(&members), &tasks, &BTreeSet::new(), 0);
        let mut seen = BTreeSet::new();
        for t in out.values() {
            assert!(t.active.len() == 2 || t.active.len() == 3, "{out:?}");
            for task in &t.active {
                assert!(seen.insert(task.clone()), "{task:?} twice");
            }
        }
        assert_eq!(seen.len(), 7);
    }

    #[test]
    fn tasks_stay_with_their_owner_and_standbys_avoid_its_process() {
        let mine = Tasks {
            active: [("0".to_string(), 0), ("0".to_string(), 1)].into(),
            ..Tasks::default()
        };
        let members = [
            ("a", "p1", mine.clone()),
            ("b", "p1", Tasks::default()),
            ("c", "p2", Tasks::default()),
        ];
        let tasks = BTreeMap::from([("0".to_string(), 3)]);
        let stateful = BTreeSet::from(["0".to_string()]);
        let out = assign(&specs(&members), &tasks, &stateful, 1);
        assert_eq!(
            out["a"].active,
            mine.active.iter().take(1).cloned().collect()
        );
        for task in out.values().flat_map(|t| &t.active) {
            let owner = out.iter().find(|(_, t)| t.active.contains(task)).unwrap().0;
            let standby: Vec<&String> = out
                .iter()
                .filter(|(_, t)| t.standby.contains(task))
                .map(|(id, _)| id)
                .collect();
            assert_eq!(standby.len(), 1, "{task:?}: {out:?}");
            let process = |id: &str| members.iter().find(|m| m.0 == id).unwrap().1;
            assert_ne!(process(owner), process(standby[0]), "{out:?}");
        }
    }
}
