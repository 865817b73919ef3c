//! A segment's batches as a chain: each batch must parse, fit in the segment and start at the
//! offset where the one before it ended. Where the chain breaks, the damage is measured: from
//! the break (or from the batch before it, when that batch's CRC shows its length was wrong) to
//! the next whole batch with a valid CRC that continues the offsets, found by scanning forward
//! byte by byte; and the offsets those bytes should have held. Reads serve what lies on either
//! side of a damaged stretch and refuse the offsets inside it: never a silent skip.
//!
//! Where a segment's offsets must end is known for every segment but the last (the next
//! segment's base): data that ends before that offset lost its tail, and the missing offsets
//! are damage too.

use record_batch::layout::MAGIC_AT;
use record_batch::{BatchError, BatchHeader, HEADER_LEN, MAGIC};

/// The `limit` of a walk over a segment whose offsets have no known end (the last one, at
/// recovery): nothing is missing when its data ends.
pub(crate) const UNKNOWN_END: i64 = i64::MAX;

/// A damaged stretch of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// Byte position where the damage starts.
    pub position: u64,
    /// Byte position of the next valid batch (the end of the data if there is none).
    pub resume_at: u64,
    /// The offsets that cannot be served: `first_offset..end_offset`.
    pub first_offset: i64,
    /// The first offset after them.
    pub end_offset: i64,
    /// What broke the chain of batches at `position`.
    pub reason: DamageReason,
}

impl Damage {
    /// Whether `offset` lies in the damaged offsets.
    pub fn covers(&self, offset: i64) -> bool {
        (self.first_offset..self.end_offset).contains(&offset)
    }
}

/// Why the chain broke.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DamageReason {
    /// The bytes at the position are not a valid batch.
    #[error(transparent)]
    Batch(#[from] BatchError),
    /// A valid batch, but not at the offset the previous batch ends at.
    #[error("batch base offset {found} where {expected} was expected")]
    OffsetGap {
        /// The batch's base offset.
        found: i64,
        /// The offset after the previous batch.
        expected: i64,
    },
    /// The data ends before the offsets the segment is known to hold.
    #[error("the segment's data ends at offset {found}, before its offsets end at {expected}")]
    EndsEarly {
        /// The offset after the last valid batch.
        found: i64,
        /// The offset the segment's offsets end at.
        expected: i64,
    },
}

/// Checks the batch at `pos`: a header, a batch that fits in `data`, base offset `expected`;
/// also its CRC if the batch ends after byte `crc_checked` (the bytes before it were checked).
///
/// In a `compacted` segment a batch may start past `expected` (the cleaner removed the batches
/// between) and hold fewer records than its offsets span.
fn check(
    data: &[u8],
    pos: usize,
    expected: i64,
    crc_checked: usize,
    compacted: bool,
) -> Result<BatchHeader, DamageReason> {
    let rest = data.get(pos..).unwrap_or_default();
    let header = if compacted {
        BatchHeader::read(rest)?
    } else {
        BatchHeader::parse(rest)?
    };
    let size = header.size as usize;
    if size > rest.len() {
        return Err(BatchError::Truncated {
            needed: size,
            available: rest.len(),
        }
        .into());
    }
    if pos.saturating_add(size) > crc_checked {
        validate(rest, compacted)?;
    }
    let continues = if compacted {
        header.base_offset >= expected
    } else {
        header.base_offset == expected
    };
    if !continues {
        return Err(DamageReason::OffsetGap {
            found: header.base_offset,
            expected,
        });
    }
    Ok(header)
}

/// [`record_batch::validate`], or for a compacted segment [`record_batch::validate_stored`].
fn validate(buf: &[u8], compacted: bool) -> Result<BatchHeader, BatchError> {
    if compacted {
        record_batch::validate_stored(buf)
    } else {
        record_batch::validate(buf)
    }
}

/// The first position after `from` where a whole batch with a valid CRC starts whose offsets
/// continue plausibly from `expected`: its base offset is at least `expected`, at most one
/// offset per byte skipped past (the CRC does not cover the base offset, so a corrupt one
/// must not be trusted; in a compacted segment, where batches may have been removed, any
/// offset past `expected`), and its offsets end by `limit`.
fn resync(
    data: &[u8],
    from: usize,
    expected: i64,
    limit: i64,
    compacted: bool,
) -> Option<(usize, BatchHeader)> {
    let last_start = data.len().checked_sub(HEADER_LEN)?;
    (from..=last_start)
        // The magic byte first: the cheapest sign of a batch.
        .filter(|&q| data[q + MAGIC_AT] as i8 == MAGIC)
        .find_map(|q| {
            let header = validate(&data[q..], compacted).ok()?;
            let skipped = i64::try_from(q - from).unwrap_or(i64::MAX);
            let fits = header.base_offset >= expected
                && (compacted || header.base_offset - expected <= skipped.saturating_add(1))
                && header.next_offset() <= limit;
            fits.then_some((q, header))
        })
}

/// Measures the damage where the chain broke at `pos` (which should have held offset
/// `expected`), for a segment whose offsets end at `limit`. `previous` is the batch before the
/// break: its CRC is checked, since a wrong length there is only noticed at the next header.
pub(crate) fn measure(
    data: &[u8],
    pos: usize,
    expected: i64,
    previous: Option<(usize, BatchHeader)>,
    limit: i64,
    reason: DamageReason,
    compacted: bool,
) -> Damage {
    let (start, first_offset, reason) = match previous {
        Some((at, header)) => match validate(&data[at..], compacted) {
            Err(e) => (at, header.base_offset, DamageReason::Batch(e)),
            Ok(_) => (pos, expected, reason),
        },
        None => (pos, expected, reason),
    };
    let (resume_at, end_offset) = match resync(data, start + 1, first_offset, limit, compacted) {
        Some((at, header)) => (at, header.base_offset),
        None => (data.len(), limit.max(first_offset)),
    };
    Damage {
        position: start as u64,
        resume_at: resume_at as u64,
        first_offset,
        end_offset,
        reason,
    }
}

/// One step of a walk along the chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Link {
    /// A batch that continues the chain, at a byte position.
    Batch(usize, BatchHeader),
    /// Where the chain broke; the walk goes on after it. Its `position` may lie before the last
    /// batch yielded (that batch's length was wrong).
    Damage(Damage),
}

/// Walks the chain from byte `pos`, where offset `expected` starts, to the end of `data`,
/// stepping over damage. `limit` is where the segment's offsets end ([`UNKNOWN_END`] if that
/// is not known): data that ends before it ends with damage over the missing offsets. With
/// `check_crc`, every batch's CRC is checked; without, none (see [`Chain::crc_checked_up_to`]).
///
/// Every walk of a segment follows the same path (the one a walk from byte 0 takes) as long as
/// it starts on it (byte 0, or an index entry) and steps over damage the same way: where a
/// batch fails its check, the walk resumes at the next valid batch, never at the position its
/// (untrustworthy) length points to; and a walk that meets damage an earlier walk found
/// ([`Chain::stepping_over`]) resumes where that walk did.
#[derive(Debug)]
pub(crate) struct Chain<'a> {
    data: &'a [u8],
    pos: usize,
    expected: i64,
    limit: i64,
    /// Batches ending at or before this byte are not CRC-checked again.
    crc_checked: usize,
    known: Vec<Damage>,
    previous: Option<(usize, BatchHeader)>,
    /// The segment was compacted: batches may be missing (see [`Chain::compacted`]).
    compacted: bool,
}

impl<'a> Chain<'a> {
    pub fn new(data: &'a [u8], pos: usize, expected: i64, limit: i64, check_crc: bool) -> Self {
        Chain {
            data,
            pos,
            expected,
            limit,
            crc_checked: if check_crc { 0 } else { usize::MAX },
            known: Vec::new(),
            previous: None,
            compacted: false,
        }
    }

    /// A segment the log cleaner wrote: offsets may jump forward between batches and end
    /// before `limit` (records the cleaner removed), and a batch may hold fewer records than
    /// its offsets span.
    pub fn compacted(mut self, compacted: bool) -> Self {
        self.compacted = compacted;
        self
    }

    /// CRC-checks the batches that end after byte `checked`, the ones before it having been
    /// checked by an earlier walk (along this same path).
    pub fn crc_checked_up_to(mut self, checked: usize) -> Self {
        self.crc_checked = checked;
        self
    }

    /// Damage earlier walks found: a walk that arrives inside one yields it and resumes where
    /// it ends, as the walk that found it did.
    pub fn stepping_over(mut self, known: Vec<Damage>) -> Self {
        self.known = known;
        self
    }
}

impl Iterator for Chain<'_> {
    type Item = Link;

    fn next(&mut self) -> Option<Link> {
        if self.pos >= self.data.len() {
            if self.expected >= self.limit || self.limit == UNKNOWN_END || self.compacted {
                return None;
            }
            // The data ends short of the segment's last offset: its tail is gone.
            let end = self.data.len() as u64;
            let damage = Damage {
                position: end,
                resume_at: end,
                first_offset: self.expected,
                end_offset: self.limit,
                reason: DamageReason::EndsEarly {
                    found: self.expected,
                    expected: self.limit,
                },
            };
            self.expected = self.limit;
            return Some(Link::Damage(damage));
        }
        let pos = self.pos as u64;
        if let Some(known) = self
            .known
            .iter()
            .find(|d| d.position <= pos && pos < d.resume_at)
        {
            let damage = known.clone();
            self.pos = damage.resume_at as usize;
            self.expected = damage.end_offset;
            self.previous = None;
            return Some(Link::Damage(damage));
        }
        match check(
            self.data,
            self.pos,
            self.expected,
            self.crc_checked,
            self.compacted,
        ) {
            Ok(header) => {
                let at = self.pos;
                self.previous = Some((at, header));
                self.pos += header.size as usize;
                self.expected = header.next_offset();
                Some(Link::Batch(at, header))
            }
            Err(reason) => {
                let damage = measure(
                    self.data,
                    self.pos,
                    self.expected,
                    self.previous.take(),
                    self.limit,
                    reason,
                    self.compacted,
                );
                self.pos = damage.resume_at as usize;
                self.expected = damage.end_offset;
                Some(Link::Damage(damage))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch;

    /// Three batches of `n` records, offsets from 0, concatenated: (bytes, start positions).
    fn three_batches(n: usize) -> (Vec<u8>, Vec<usize>) {
        let mut data = Vec::new();
        let mut starts = Vec::new();
        for b in 0..3 {
            let values: Vec<String> = (0..n).map(|i| format!("b{b}-{i}")).collect();
            let records: Vec<batch::NewRecord> = values
                .iter()
                .map(|v| (None, Some(v.as_bytes()), 1))
                .collect();
            let mut one = batch::build(&records).to_vec();
            one[..8].copy_from_slice(&((b * n) as i64).to_be_bytes());
            starts.push(data.len());
            data.extend_from_slice(&one);
        }
        (data, starts)
    }

    fn walk(data: &[u8], limit: i64) -> Vec<Link> {
        Chain::new(data, 0, 0, limit, false).collect()
    }

    #[test]
    fn an_intact_chain_has_no_damage() {
        let (data, starts) = three_batches(4);
        let links = walk(&data, 12);
        assert_eq!(links.len(), 3);
        for (link, start) in links.iter().zip(&starts) {
            assert!(matches!(link, Link::Batch(at, _) if at == start));
        }
    }

    #[test]
    fn a_corrupt_length_is_stepped_over_to_the_next_batch() {
        let (mut data, starts) = three_batches(4);
        data[starts[1] + 8..starts[1] + 12].copy_from_slice(&0x7fff_0000i32.to_be_bytes());
        let links = walk(&data, 12);
        assert!(matches!(links[0], Link::Batch(0, _)));
        let Link::Damage(d) = &links[1] else {
            panic!("{links:?}")
        };
        assert_eq!(
            (d.position, d.resume_at, d.first_offset, d.end_offset),
            (starts[1] as u64, starts[2] as u64, 4, 8)
        );
        assert!(matches!(links[2], Link::Batch(at, h) if at == starts[2] && h.base_offset == 8));
    }

    #[test]
    fn a_shrunk_length_is_blamed_on_its_batch_by_the_crc() {
        let (mut data, starts) = three_batches(4);
        // Batch 1 claims 2 bytes less (still room for its records): the chain breaks at the
        // next header, and batch 1's CRC tells which batch was wrong.
        let size = (starts[2] - starts[1]) as i32 - 12 - 2;
        data[starts[1] + 8..starts[1] + 12].copy_from_slice(&size.to_be_bytes());
        let links = walk(&data, 12);
        let damage = links
            .iter()
            .find_map(|l| match l {
                Link::Damage(d) => Some(d.clone()),
                Link::Batch(..) => None,
            })
            .unwrap();
        assert_eq!(
            (damage.position, damage.first_offset, damage.end_offset),
            (starts[1] as u64, 4, 8)
        );
        assert!(
            matches!(
                damage.reason,
                DamageReason::Batch(BatchError::CrcMismatch { .. })
            ),
            "{damage:?}"
        );
    }

    #[test]
    fn a_wrong_base_offset_damages_that_batch_only() {
        let (mut data, starts) = three_batches(4);
        data[starts[1]..starts[1] + 8].copy_from_slice(&704i64.to_be_bytes());
        let links = walk(&data, 12);
        let Link::Damage(d) = &links[1] else {
            panic!("{links:?}")
        };
        assert_eq!((d.first_offset, d.end_offset), (4, 8));
        assert_eq!(
            d.reason,
            DamageReason::OffsetGap {
                found: 704,
                expected: 4
            }
        );
        assert!(matches!(links[2], Link::Batch(_, h) if h.base_offset == 8));
    }

    #[test]
    fn data_that_ends_before_the_limit_damages_the_missing_offsets() {
        let (data, starts) = three_batches(4);
        let links = walk(&data[..starts[2]], 12);
        assert_eq!(links.len(), 3);
        let Link::Damage(d) = &links[2] else {
            panic!("{links:?}")
        };
        assert_eq!(
            (d.position, d.resume_at, d.first_offset, d.end_offset),
            (starts[2] as u64, starts[2] as u64, 8, 12)
        );
        assert_eq!(walk(&[], 12).len(), 1);
        // Without a known end, the data may end anywhere.
        assert_eq!(walk(&data[..starts[2]], UNKNOWN_END).len(), 2);
        assert!(walk(&[], UNKNOWN_END).is_empty());
    }

    #[test]
    fn garbage_to_the_end_damages_every_remaining_offset() {
        let (mut data, starts) = three_batches(4);
        for b in &mut data[starts[1]..] {
            *b = 0x5a;
        }
        let links = walk(&data, 12);
        assert_eq!(links.len(), 2);
        let Link::Damage(d) = &links[1] else {
            panic!("{links:?}")
        };
        assert_eq!(
            (d.resume_at, d.first_offset, d.end_offset),
            (data.len() as u64, 4, 12)
        );
    }
}
