//! Control batches: the transaction markers a transaction coordinator writes into each data
//! partition a transaction touched (Kafka's `EndTransactionMarker`). A control batch has the
//! control and transactional attribute bits set, the producer's id and epoch, base sequence
//! -1, and one control record: key = version (i16, 0) and type (i16: 0 abort, 1 commit),
//! value = version (i16, 0) and the coordinator epoch (i32). Readers never hand control
//! records to applications.
//!
//! ```
//! use record_batch::control::{control_batch, control_type, ControlType};
//!
//! let marker = control_batch(7, 1, 3, ControlType::Commit, 1_700_000_000_000);
//! let header = record_batch::validate(&marker)?;
//! assert!(header.is_control() && header.is_transactional());
//! assert_eq!((header.producer_id, header.producer_epoch), (7, 1));
//! assert_eq!(control_type(&marker), Some(ControlType::Commit));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use crate::header::BatchHeader;
use crate::layout::*;
use crate::records::records;

pub use crate::build::control_batch;
pub use crate::marker::ControlType;

/// The marker type of the whole batch `batch` if it is a control batch holding a transaction
/// marker; `None` for a data batch, another kind of control record, or a control batch whose
/// record does not parse (or was removed).
pub fn control_type(batch: &[u8]) -> Option<ControlType> {
    let header = BatchHeader::read(batch).ok()?;
    if !header.is_control() || header.is_compressed() {
        return None;
    }
    let end = (header.size as usize).min(batch.len());
    let record = records(batch.get(HEADER_LEN..end)?).next()??;
    let key = record.key?;
    ControlType::from_code(i16_at(key, 2)?)
}

/// The coordinator epoch a transaction marker's value carries.
pub fn coordinator_epoch(batch: &[u8]) -> Option<i32> {
    let header = BatchHeader::read(batch).ok()?;
    if !header.is_control() || header.is_compressed() {
        return None;
    }
    let end = (header.size as usize).min(batch.len());
    let record = records(batch.get(HEADER_LEN..end)?).next()??;
    // The value follows the key in `rest`: key length, key, value length, value.
    let (key_len, after) = crate::varint::read(record.rest)?;
    let after = after.get(usize::try_from(key_len).ok()?..)?;
    let (value_len, value) = crate::varint::read(after)?;
    if value_len < 6 {
        return None;
    }
    i32_at(value, 2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{self, Record, Stamp};

    #[test]
    fn a_marker_is_a_valid_control_batch_kafka_protocol_decodes() {
        for kind in [ControlType::Abort, ControlType::Commit] {
            let marker = control_batch(42, 5, 9, kind, 1234);
            let header = crate::validate(&marker).unwrap();
            assert!(header.is_control() && header.is_transactional());
            assert_eq!(header.record_count, 1);
            assert_eq!(header.base_sequence, -1);
            assert_eq!((header.base_offset, header.base_timestamp), (0, 1234));
            assert_eq!(control_type(&marker), Some(kind));
            assert_eq!(coordinator_epoch(&marker), Some(9));

            // An independent decoder sees a control batch with Kafka's key and value.
            let mut bytes = bytes::Bytes::from(marker.clone());
            let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut bytes).unwrap();
            let record = &set.records[0];
            assert!(record.control && record.transactional);
            assert_eq!(record.producer_id, 42);
            let key = record.key.as_ref().unwrap();
            assert_eq!(&key[..], &[0, 0, 0, kind as u8]);
            assert_eq!(&record.value.as_ref().unwrap()[..], &[0, 0, 0, 0, 0, 9]);
        }
    }

    #[test]
    fn data_batches_are_not_markers() {
        let mut buf = bytes::BytesMut::new();
        build::begin(&mut buf, 0);
        build::put_record(
            &mut buf,
            Record {
                offset_delta: 0,
                timestamp_delta: 0,
                key: Some(&[0, 0, 0, 1][..]),
                value: None,
                headers: std::iter::empty(),
            },
        )
        .unwrap();
        build::finish(&mut buf, &Stamp::new(Codec::None, 1, 0)).unwrap();
        assert_eq!(control_type(&buf), None);
        build::set_transactional(&mut buf).unwrap();
        let header = crate::validate(&buf).unwrap();
        assert!(header.is_transactional() && !header.is_control());
        assert_eq!(control_type(&buf), None);
        assert_eq!(control_type(&[]), None);
        let mut marker = control_batch(1, 0, 0, ControlType::Abort, 0);
        marker.truncate(HEADER_LEN + 2);
        assert_eq!(
            control_type(&marker),
            None,
            "a cut marker is not read past its end"
        );
    }
}
