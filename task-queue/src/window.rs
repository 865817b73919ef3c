//! The entries of a share partition from SPSO to SPEO: every offset in between has one, so
//! they are a ring buffer indexed by `offset - first` rather than a map. Lookups are O(1),
//! SPSO moves by popping the front, SPEO by pushing at the back, and nothing is allocated per
//! record.

use std::collections::VecDeque;

use crate::record::Entry;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Window {
    /// The offset of `entries[0]`.
    first: i64,
    entries: VecDeque<Entry>,
}

impl Window {
    pub fn new(first: i64) -> Self {
        Window {
            first,
            entries: VecDeque::new(),
        }
    }

    /// The offsets `first..end`, each with its entry from `known` or a fresh one (an offset a
    /// replay has no entry for was never acquired).
    pub fn filled(
        first: i64,
        end: i64,
        mut known: impl FnMut(i64) -> Option<Entry>,
        fresh: impl Fn() -> Entry,
    ) -> Self {
        let entries = (first..end)
            .map(|o| known(o).unwrap_or_else(&fresh))
            .collect();
        Window { first, entries }
    }

    fn index(&self, offset: i64) -> Option<usize> {
        usize::try_from(offset.checked_sub(self.first)?).ok()
    }

    pub fn get(&self, offset: i64) -> Option<&Entry> {
        self.entries.get(self.index(offset)?)
    }

    pub fn get_mut(&mut self, offset: i64) -> Option<&mut Entry> {
        let i = self.index(offset)?;
        self.entries.get_mut(i)
    }

    /// The offset after the last entry.
    pub fn end(&self) -> i64 {
        self.first + self.entries.len() as i64
    }

    /// Appends the entry of `offset`, which must be [`Window::end`].
    pub fn push(&mut self, offset: i64, entry: Entry) {
        debug_assert_eq!(offset, self.end(), "a window has no gaps");
        self.entries.push_back(entry);
    }

    /// Removes entries from the front while `done` says so; how many went.
    pub fn pop_front_while(&mut self, done: impl Fn(&Entry) -> bool) -> usize {
        let mut popped = 0;
        while self.entries.front().is_some_and(&done) {
            self.entries.pop_front();
            popped += 1;
        }
        self.first += popped as i64;
        popped
    }

    /// Forgets every entry below `offset`; an empty window starts there.
    pub fn start_at(&mut self, offset: i64) {
        let drop = usize::try_from(offset - self.first)
            .unwrap_or(0)
            .min(self.entries.len());
        self.entries.drain(..drop);
        self.first += drop as i64;
        if self.entries.is_empty() {
            self.first = offset;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = (i64, &Entry)> {
        (self.first..).zip(self.entries.iter())
    }

    /// The entries from `offset` on.
    pub fn iter_from(&self, offset: i64) -> impl Iterator<Item = (i64, &Entry)> {
        let skip = usize::try_from(offset.saturating_sub(self.first))
            .unwrap_or(0)
            .min(self.entries.len());
        (self.first + skip as i64..).zip(self.entries.range(skip..))
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = (i64, &mut Entry)> {
        (self.first..).zip(self.entries.iter_mut())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::record::RecordState;

    fn entry(deliveries: u16) -> Entry {
        Entry {
            state: RecordState::Available { not_before: 0 },
            deliveries,
            history: Vec::new(),
            acquired_at: 0,
        }
    }

    #[test]
    fn offsets_map_to_slots_as_the_window_moves() {
        let mut w = Window::new(10);
        assert_eq!(w.end(), 10);
        for d in 0..3 {
            w.push(10 + i64::from(d), entry(d));
        }
        assert_eq!(w.end(), 13);
        assert_eq!(w.get(11).unwrap().deliveries, 1);
        assert!(w.get(9).is_none() && w.get(13).is_none() && w.get(i64::MIN).is_none());
        assert_eq!(w.pop_front_while(|e| e.deliveries == 0), 1);
        assert_eq!(w.pop_front_while(|e| e.deliveries == 0), 0);
        assert_eq!(w.iter().map(|(o, _)| o).collect::<Vec<_>>(), vec![11, 12]);
        assert_eq!(
            w.iter_from(12).map(|(o, _)| o).collect::<Vec<_>>(),
            vec![12]
        );
        assert_eq!(w.iter_from(i64::MIN).count(), 2);
        assert_eq!(w.iter_from(99).count(), 0);
        w.start_at(12);
        assert_eq!(
            w.iter().map(|(o, e)| (o, e.deliveries)).collect::<Vec<_>>(),
            vec![(12, 2)]
        );
        w.start_at(40);
        assert_eq!((w.iter().count(), w.end()), (0, 40));
        let filled = Window::filled(5, 8, |o| (o == 6).then(|| entry(4)), || entry(0));
        let got: Vec<(i64, u16)> = filled.iter().map(|(o, e)| (o, e.deliveries)).collect();
        assert_eq!(got, vec![(5, 0), (6, 4), (7, 0)]);
    }
}
