//! Acknowledgements waiting to be sent, and how they go on the wire: per partition, runs of
//! consecutive offsets with one type per offset (or one for the whole run), a delayed release
//! in a batch of its own since its delay rides in a per-batch tagged field.

use std::collections::BTreeMap;

use bytes::Bytes;

use super::membership::IdPartition;

/// lograil's tagged field on an acknowledgement batch: the release delay in ms (8 bytes, big
/// endian). Kafka brokers ignore it and release at once.
pub(crate) const RELEASE_DELAY_TAG: i32 = 10_000;

/// How one record is acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ack {
    /// The offset holds no record (a gap in an acquired range).
    Gap,
    Accept,
    /// Back to the queue, not deliverable again for this many ms (0: at once).
    Release(u64),
    Reject,
}

impl Ack {
    fn wire(self) -> i8 {
        match self {
            Ack::Gap => 0,
            Ack::Accept => 1,
            Ack::Release(_) => 2,
            Ack::Reject => 3,
        }
    }

    fn delay(self) -> u64 {
        match self {
            Ack::Release(ms) => ms,
            _ => 0,
        }
    }
}

/// One acknowledgement batch, independent of the request it goes in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Batch {
    pub first: i64,
    pub last: i64,
    pub types: Vec<i8>,
    /// The release delay tag, when non-zero.
    pub delay_tag: Option<Bytes>,
}

/// Acknowledgements not yet sent.
#[derive(Debug, Default)]
pub(crate) struct AckBook {
    pending: BTreeMap<IdPartition, BTreeMap<i64, Ack>>,
}

impl AckBook {
    /// Records `ack` for `offset`; a later call for the same offset before it is sent wins.
    pub(crate) fn set(&mut self, partition: IdPartition, offset: i64, ack: Ack) {
        self.pending
            .entry(partition)
            .or_default()
            .insert(offset, ack);
    }

    /// Records `ack` unless the offset already has one.
    pub(crate) fn set_if_absent(&mut self, partition: IdPartition, offset: i64, ack: Ack) {
        self.pending
            .entry(partition)
            .or_default()
            .entry(offset)
            .or_insert(ack);
    }

    /// Whether a partition `f` accepts has acknowledgements waiting.
    pub(crate) fn any(&self, f: impl Fn(&IdPartition) -> bool) -> bool {
        self.pending
            .iter()
            .any(|(p, acks)| !acks.is_empty() && f(p))
    }

    /// Takes the acknowledgements of the partitions `wanted` accepts, as batches.
    pub(crate) fn take(
        &mut self,
        mut wanted: impl FnMut(&IdPartition) -> bool,
    ) -> BTreeMap<IdPartition, Vec<Batch>> {
        let keys: Vec<IdPartition> = self.pending.keys().copied().filter(&mut wanted).collect();
        keys.into_iter()
            .filter_map(|k| self.pending.remove(&k).map(|acks| (k, batches(&acks))))
            .filter(|(_, b)| !b.is_empty())
            .collect()
    }
}

/// Runs of consecutive offsets; a run is cut where the offsets stop being consecutive or the
/// release delay changes.
pub(crate) fn batches(acks: &BTreeMap<i64, Ack>) -> Vec<Batch> {
    let mut out: Vec<Batch> = Vec::new();
    let mut previous: Option<(i64, u64)> = None;
    for (&offset, &ack) in acks {
        let continues = previous.is_some_and(|(o, d)| o + 1 == offset && d == ack.delay());
        match out.last_mut() {
            Some(batch) if continues => {
                batch.last = offset;
                batch.types.push(ack.wire());
            }
            _ => out.push(Batch {
                first: offset,
                last: offset,
                types: vec![ack.wire()],
                delay_tag: (ack.delay() > 0)
                    .then(|| Bytes::copy_from_slice(&ack.delay().to_be_bytes())),
            }),
        }
        previous = Some((offset, ack.delay()));
    }
    // One type for a run where all agree (what the Java client sends too).
    for batch in &mut out {
        if batch.types.windows(2).all(|w| w[0] == w[1]) {
            batch.types.truncate(1);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_cut_at_holes_and_delay_changes_and_collapse_when_uniform() {
        let acks: BTreeMap<i64, Ack> = [
            (3, Ack::Accept),
            (4, Ack::Accept),
            (5, Ack::Reject),
            (7, Ack::Accept),
            (8, Ack::Release(1000)),
            (9, Ack::Release(1000)),
            (10, Ack::Release(0)),
        ]
        .into_iter()
        .collect();
        let got: Vec<(i64, i64, Vec<i8>, bool)> = batches(&acks)
            .into_iter()
            .map(|b| (b.first, b.last, b.types, b.delay_tag.is_some()))
            .collect();
        assert_eq!(
            got,
            vec![
                (3, 5, vec![1, 1, 3], false),
                (7, 7, vec![1], false),
                (8, 9, vec![2], true),
                (10, 10, vec![2], false),
            ]
        );
    }

    #[test]
    fn a_later_acknowledgement_wins_and_take_empties_the_book() {
        let mut book = AckBook::default();
        let p = (uuid::Uuid::from_u128(1), 0);
        book.set(p, 0, Ack::Accept);
        book.set(p, 0, Ack::Reject);
        book.set_if_absent(p, 0, Ack::Accept);
        assert!(book.any(|q| *q == p));
        let taken = book.take(|_| true);
        assert_eq!(taken[&p][0].types, vec![3]);
        assert!(!book.any(|_| true));
    }
}
