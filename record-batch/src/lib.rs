//! # record-batch
//!
//! Kafka's RecordBatch v2 (magic 2), the unit a producer sends, a broker stores byte for byte
//! and a consumer fetches: its header [`layout`], [`BatchHeader`] and its parse, validation
//! (CRC-32C, and the framing of the records against the header's count), the [`varint`]s of
//! the records, [`build`]ing a batch, and the [`control`] batches of transaction markers. No
//! I/O, no codecs, no async: the storage engine
//! (`log-core`), the broker and the client (`consumer`) all use it, and the client links it
//! without the storage engine.
//!
//! What needs a codec or a full decoder (decompressing a batch's records to check them,
//! decoding records for tools and tests) lives with its user: `log-core`'s `batch` module, the
//! client's fetcher.
//!
//! ```
//! use record_batch::{layout, parse_all, validate_parsed};
//! # let buf = {
//! #     let mut buf = bytes::BytesMut::new();
//! #     record_batch::build::begin(&mut buf, 0);
//! #     record_batch::build::put_record(&mut buf, record_batch::build::Record {
//! #         offset_delta: 0, timestamp_delta: 0, key: None, value: Some(b"v"),
//! #         headers: std::iter::empty(),
//! #     })?;
//! #     let stamp = record_batch::build::Stamp::new(record_batch::Codec::None, 1, 0);
//! #     record_batch::build::finish(&mut buf, &stamp)?;
//! #     buf
//! # };
//! // A producer's record set: its headers parsed once, looked at, then the rest checked.
//! let headers = parse_all(&buf)?;
//! assert!(!headers.iter().any(|h| h.is_compressed()));
//! validate_parsed(&buf, &headers)?;
//! assert_eq!(headers[0].size as usize, buf.len());
//! assert_eq!(buf[layout::MAGIC_AT], 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod build;
pub mod control;
mod error;
mod header;
pub mod layout;
mod marker;
pub mod records;
mod validate;
pub mod varint;

pub use control::{control_batch, control_type, ControlType};
pub use error::{BatchError, BuildError};
pub use header::BatchHeader;
pub use layout::{Codec, TimestampType, HEADER_LEN, LOG_OVERHEAD, MAGIC};
pub use validate::{
    check_records, compute_crc, has_header, parse_all, records_fit, validate, validate_all,
    validate_parsed, validate_stored,
};

#[cfg(test)]
mod tests;
