//! Producer identity and sequence numbers.
//!
//! An idempotent producer gets a producer id and epoch from InitProducerId; each partition's
//! batches carry consecutive sequence numbers, assigned when a batch is first sent and kept on
//! every retry, so the broker writes a batch once however often it arrives. When a batch's fate
//! becomes unknown for good (it failed, or expired after it was sent), the epoch is bumped
//! (KIP-360: InitProducerId with the current id and epoch) and sequences start again from 0;
//! batches still waiting are re-stamped ([`restamp`]), never re-encoded.

use bytes::{Bytes, BytesMut};
use record_batch::build;

use super::batch::Encoded;

/// Producer id and epoch (absent without idempotence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Identity {
    pub id: i64,
    pub epoch: i16,
}

/// Sequence numbers wrap from `i32::MAX` to 0, as Kafka's do.
pub(super) fn wrap_sequence(base: i32, delta: i32) -> i32 {
    let sum = i64::from(base) + i64::from(delta);
    i32::try_from(sum % (i64::from(i32::MAX) + 1)).unwrap_or(0)
}

/// The same batch under a new producer identity and base sequence (the CRC recomputed).
pub(super) fn restamp(encoded: &Encoded, identity: Identity, base_sequence: i32) -> Encoded {
    let mut bytes = BytesMut::from(&encoded.bytes[..]);
    // An encoded batch always has its header: nothing to restamp otherwise.
    let _ = build::restamp(&mut bytes, identity.id, identity.epoch, base_sequence);
    Encoded {
        bytes: Bytes::from(bytes),
        producer_id: identity.id,
        producer_epoch: identity.epoch,
        base_sequence,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_wrap_to_zero() {
        assert_eq!(wrap_sequence(i32::MAX, 1), 0);
        assert_eq!(wrap_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(wrap_sequence(5, 2), 7);
    }
}
