//! Per-key ordering: while a key has a record in the retry chain, its later records are parked
//! behind it in the chain (forwarded, not held in memory) and processed only when every
//! earlier record of the key is done, in their main-topic order.
//!
//! A key's chain is the set of main-topic offsets of its records now in retry topics; only the
//! lowest is processed, the others go (again) to the chain's furthest stage. The set is rebuilt
//! from the retry topics when a partition is assigned, so it survives restarts and rebalances.

use std::collections::{BTreeSet, HashMap};

use bytes::Bytes;
use serde::Serialize;

/// What to do with a record of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Hand it to the handler now.
    Process,
    /// Forward it to `stage`, parked behind the record at main offset `behind`.
    Park { behind: i64, stage: usize },
}

#[derive(Debug, Clone)]
struct Chain {
    /// Main-topic offsets of the key's records in the chain.
    pending: BTreeSet<i64>,
    /// The furthest stage any of them is in.
    tail_stage: usize,
    since_ms: i64,
    reason: String,
}

/// A key with records parked, as [`crate::Status`] shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ParkedKey {
    /// The partition the key is in: the same number in the main topic and each retry topic.
    pub partition: i32,
    /// The key, lossy UTF-8.
    pub key: String,
    /// Since when (ms since the epoch) the key has had a record in retry.
    pub since_ms: i64,
    /// The failure that started it (or the latest failure of the record in front).
    pub reason: String,
    /// Main-topic offset of the record in front.
    pub head_offset: i64,
    /// Records of the key in the chain, the one in front included.
    pub records: usize,
}

/// Chains of every key with records in retry, per main partition.
#[derive(Debug, Default)]
pub(crate) struct KeyChains {
    chains: HashMap<(i32, Bytes), Chain>,
}

impl KeyChains {
    /// A main-topic record at `offset`.
    pub(crate) fn on_main(&mut self, partition: i32, key: &Bytes, offset: i64) -> Decision {
        match self.chains.get_mut(&(partition, key.clone())) {
            Some(chain) => {
                chain.pending.insert(offset);
                Decision::Park {
                    behind: chain.pending.first().copied().unwrap_or(offset),
                    stage: chain.tail_stage,
                }
            }
            None => Decision::Process,
        }
    }

    /// A retry-topic record whose main-topic offset is `original`.
    pub(crate) fn on_retry(&mut self, partition: i32, key: &Bytes, original: i64) -> Decision {
        let Some(chain) = self.chains.get(&(partition, key.clone())) else {
            return Decision::Process;
        };
        match chain.pending.first() {
            Some(&head) if head != original && chain.pending.contains(&original) => {
                Decision::Park {
                    behind: head,
                    stage: chain.tail_stage,
                }
            }
            _ => Decision::Process,
        }
    }

    /// The record at `original` failed and goes to `stage`.
    pub(crate) fn failed(
        &mut self,
        partition: i32,
        key: &Bytes,
        original: i64,
        stage: usize,
        now_ms: i64,
        reason: String,
    ) {
        let chain = self
            .chains
            .entry((partition, key.clone()))
            .or_insert_with(|| Chain {
                pending: BTreeSet::new(),
                tail_stage: stage,
                since_ms: now_ms,
                reason: String::new(),
            });
        chain.pending.insert(original);
        chain.tail_stage = chain.tail_stage.max(stage);
        chain.reason = reason;
    }

    /// The record at `original` is done (processed or dead-lettered).
    pub(crate) fn finished(&mut self, partition: i32, key: &Bytes, original: i64) {
        let k = (partition, key.clone());
        if let Some(chain) = self.chains.get_mut(&k) {
            chain.pending.remove(&original);
            if chain.pending.is_empty() {
                self.chains.remove(&k);
            }
        }
    }

    /// A record found in `stage` while rebuilding (see the module doc).
    pub(crate) fn found(
        &mut self,
        partition: i32,
        key: &Bytes,
        original: i64,
        stage: usize,
        at_ms: i64,
        reason: String,
    ) {
        let chain = self
            .chains
            .entry((partition, key.clone()))
            .or_insert_with(|| Chain {
                pending: BTreeSet::new(),
                tail_stage: stage,
                since_ms: at_ms,
                reason: String::new(),
            });
        if chain.pending.first().is_none_or(|h| original <= *h) && !reason.is_empty() {
            chain.reason = reason;
        }
        chain.pending.insert(original);
        chain.tail_stage = chain.tail_stage.max(stage);
        chain.since_ms = chain.since_ms.min(at_ms);
    }

    /// Forgets a partition's chains (it was revoked; they are rebuilt when it comes back).
    pub(crate) fn drop_partition(&mut self, partition: i32) {
        self.chains.retain(|(p, _), _| *p != partition);
    }

    /// Every key with records in the chain, by partition, then key.
    pub(crate) fn parked(&self) -> Vec<ParkedKey> {
        let mut out: Vec<ParkedKey> = self
            .chains
            .iter()
            .map(|((partition, key), c)| ParkedKey {
                partition: *partition,
                key: String::from_utf8_lossy(key).into_owned(),
                since_ms: c.since_ms,
                reason: c.reason.clone(),
                head_offset: c.pending.first().copied().unwrap_or(-1),
                records: c.pending.len(),
            })
            .collect();
        out.sort_by(|a, b| (a.partition, &a.key).cmp(&(b.partition, &b.key)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn later_records_of_a_failing_key_park_and_come_back_in_order() {
        let mut c = KeyChains::default();
        let a = k("a");
        assert_eq!(c.on_main(0, &a, 10), Decision::Process);
        c.failed(0, &a, 10, 0, 1, "boom".into());
        // Same key, later: parked behind 10 in the tail stage; another key flows.
        assert_eq!(
            c.on_main(0, &a, 11),
            Decision::Park {
                behind: 10,
                stage: 0
            }
        );
        assert_eq!(
            c.on_main(0, &a, 12),
            Decision::Park {
                behind: 10,
                stage: 0
            }
        );
        assert_eq!(c.on_main(0, &k("b"), 13), Decision::Process);
        assert_eq!(c.on_main(1, &a, 5), Decision::Process, "other partition");
        // 10 comes back and fails again into stage 1: 11 arriving now follows it there.
        assert_eq!(c.on_retry(0, &a, 10), Decision::Process);
        c.failed(0, &a, 10, 1, 2, "boom again".into());
        assert_eq!(
            c.on_retry(0, &a, 11),
            Decision::Park {
                behind: 10,
                stage: 1
            }
        );
        let parked = c.parked();
        assert_eq!(parked.len(), 1);
        assert_eq!((parked[0].head_offset, parked[0].records), (10, 3));
        assert_eq!(
            (parked[0].since_ms, parked[0].reason.as_str()),
            (1, "boom again")
        );
        // 10 heals: 11 is next, then 12; then the key is free.
        c.finished(0, &a, 10);
        assert_eq!(
            c.on_retry(0, &a, 12),
            Decision::Park {
                behind: 11,
                stage: 1
            }
        );
        assert_eq!(c.on_retry(0, &a, 11), Decision::Process);
        c.finished(0, &a, 11);
        assert_eq!(c.on_retry(0, &a, 12), Decision::Process);
        c.finished(0, &a, 12);
        assert!(c.parked().is_empty());
        assert_eq!(c.on_main(0, &a, 20), Decision::Process);
    }

    #[test]
    fn rebuilt_chains_keep_the_oldest_in_front() {
        let mut c = KeyChains::default();
        let a = k("a");
        c.found(3, &a, 12, 0, 50, String::new());
        c.found(3, &a, 10, 1, 40, "timeout".into());
        c.found(3, &a, 10, 0, 30, String::new());
        assert_eq!(
            c.on_retry(3, &a, 12),
            Decision::Park {
                behind: 10,
                stage: 1
            }
        );
        assert_eq!(
            c.on_main(3, &a, 13),
            Decision::Park {
                behind: 10,
                stage: 1
            }
        );
        let p = &c.parked()[0];
        assert_eq!(
            (p.since_ms, p.reason.as_str(), p.records),
            (30, "timeout", 3)
        );
        c.drop_partition(3);
        assert!(c.parked().is_empty());
    }
}
