//! Weighted deficit round robin over the tenants of the look-ahead window, each tenant's list
//! walked only as far as its turns need: a call costs the records it chooses and those it
//! walks past, not `budget` candidates of every tenant (with 100 tenants and fetches of 500,
//! building every tenant's full queue first walked 100 times the records a fetch takes).

use std::collections::VecDeque;

use super::Ask;

/// One call's walk over the tenants' lists (offsets ascending, by tenant id) for their due
/// records.
pub(super) struct Walk<'a, F> {
    lists: &'a mut [VecDeque<i64>],
    ask: Ask,
    /// Of an offset: its deliveries so far if it is due, and whether it is finished.
    state: F,
    /// By tenant id: its next candidate, if it has one.
    heads: Vec<Option<i64>>,
    /// Oldest first, by tenant id: the offsets taken off the front of its list that stay in
    /// it (in flight, not due, chosen, used up); put back by [`Walk::finish`].
    kept: Vec<Vec<i64>>,
    /// Newest first, by tenant id: how many of its list (from the back) were looked at.
    seen: Vec<usize>,
    used_up: Vec<i64>,
}

impl<'a, F: Fn(i64) -> (Option<u16>, bool)> Walk<'a, F> {
    pub(super) fn new(lists: &'a mut [VecDeque<i64>], ask: Ask, state: F) -> Self {
        let ids = lists.len();
        Walk {
            lists,
            ask,
            state,
            heads: vec![None; ids],
            kept: vec![Vec::new(); ids],
            seen: vec![0; ids],
            used_up: Vec::new(),
        }
    }

    /// Every tenant's first candidate; the tenants that have one, in the order of it (newest
    /// first with `ask.newest_first`).
    pub(super) fn heads(&mut self) -> Vec<u32> {
        let mut firsts: Vec<(i64, u32)> = Vec::new();
        for id in 0..self.lists.len() {
            self.heads[id] = self.next(id);
            if let Some(offset) = self.heads[id] {
                firsts.push((offset, id as u32));
            }
        }
        if self.ask.newest_first {
            firsts.sort_unstable_by(|a, b| b.cmp(a));
        } else {
            firsts.sort_unstable();
        }
        firsts.into_iter().map(|(_, id)| id).collect()
    }

    fn has_head(&self, id: u32) -> bool {
        self.heads.get(id as usize).is_some_and(Option::is_some)
    }

    /// Tenant `id`'s current candidate, its next one found in its place.
    fn take_head(&mut self, id: usize) -> Option<i64> {
        let head = self.heads.get_mut(id)?.take()?;
        self.heads[id] = self.next(id);
        Some(head)
    }

    /// Tenant `id`'s next due record, those met that had every delivery noted as used up.
    /// Oldest first, finished records are dropped from its list as they are met.
    fn next(&mut self, id: usize) -> Option<i64> {
        let Ask {
            start,
            known_end,
            newest_first,
            delivery_limit,
            ..
        } = self.ask;
        let list = &mut self.lists[id];
        if newest_first {
            while self.seen[id] < list.len() {
                self.seen[id] += 1;
                let offset = list[list.len() - self.seen[id]];
                if offset < start || offset >= known_end {
                    continue;
                }
                match (self.state)(offset).0 {
                    Some(d) if d >= delivery_limit => self.used_up.push(offset),
                    Some(_) => return Some(offset),
                    None => {}
                }
            }
            return None;
        }
        let kept = &mut self.kept[id];
        while let Some(offset) = list.pop_front() {
            if offset >= known_end {
                list.push_front(offset);
                return None;
            }
            if offset < start {
                continue;
            }
            match (self.state)(offset) {
                (_, true) => continue,
                (Some(d), _) if d >= delivery_limit => self.used_up.push(offset),
                (Some(_), _) => {
                    kept.push(offset);
                    return Some(offset);
                }
                (None, _) => {}
            }
            kept.push(offset);
        }
        None
    }

    /// Puts back what the walk took off the lists; the records met that had every delivery.
    pub(super) fn finish(self) -> Vec<i64> {
        for (list, kept) in self.lists.iter_mut().zip(self.kept) {
            for offset in kept.into_iter().rev() {
                list.push_front(offset);
            }
        }
        self.used_up
    }
}

/// Up to `budget` of the walk's candidates, each tenant's in its order, the tenants in turn,
/// each turn as many as the tenant's weight (`weights` by id). The `ring` and what is left of
/// a turn (`deficits`, by id) carry over to the next call; a tenant without candidates leaves
/// the ring, a newcomer joins at the back (in the order of its first candidate). The chosen
/// offsets, in the order chosen.
pub(super) fn turns<F: Fn(i64) -> (Option<u16>, bool)>(
    ring: &mut VecDeque<u32>,
    deficits: &mut Vec<u32>,
    walk: &mut Walk<'_, F>,
    weights: &[u32],
    budget: usize,
) -> Vec<i64> {
    let newcomers = walk.heads();
    let ids = walk.lists.len();
    deficits.resize(ids.max(deficits.len()), 0);
    let mut in_ring = vec![false; ids];
    ring.retain(|&id| {
        let keep = walk.has_head(id);
        if keep {
            in_ring[id as usize] = true;
        } else if let Some(d) = deficits.get_mut(id as usize) {
            *d = 0;
        }
        keep
    });
    for id in newcomers {
        if !in_ring[id as usize] {
            in_ring[id as usize] = true;
            ring.push_back(id);
        }
    }
    let mut chosen = Vec::with_capacity(budget);

    while chosen.len() < budget {
        let Some(&id) = ring.front() else {
            break;
        };
        let i = id as usize;
        if deficits[i] == 0 {
            deficits[i] = weights.get(i).copied().unwrap_or(1).max(1);
        }
        while deficits[i] > 0 && chosen.len() < budget {
            let Some(offset) = walk.take_head(i) else {
                break;
            };
            chosen.push(offset);
            deficits[i] -= 1;
        }
        if !walk.has_head(id) {
            ring.pop_front();
            deficits[i] = 0;
        } else if deficits[i] == 0 {
            ring.rotate_left(1);
        }
    }

    chosen
}
