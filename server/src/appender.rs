//! The broker's append path for one partition of a Produce: the idempotent-producer check, the
//! append, recording the producer's new state, then the wait for durability.
//!
//! Lock order: the partition's producer state is held from the check until the batch is
//! appended and recorded (so a retry racing its original is either appended once or answered
//! as a duplicate), and released before waiting for an fsync.

use std::sync::PoisonError;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use log_core::{batch, AppendError, AppendInfo, BatchError};

use crate::broker::Broker;
use crate::producers::Verdict;

/// Why records were not appended. Nothing of them was stored.
#[derive(Debug, thiserror::Error)]
pub enum ProduceError {
    #[error("{0} is internal to the broker")]
    InternalTopic(String),
    #[error("{topic}-{index} does not exist")]
    UnknownPartition { topic: String, index: i32 },
    #[error("no records")]
    NoRecords,
    #[error(transparent)]
    Corrupt(#[from] BatchError),
    #[error("producer {producer_id} rejected: {error}")]
    Producer {
        producer_id: i64,
        error: ResponseError,
    },
    #[error(transparent)]
    Append(#[from] AppendError),
}

impl Broker {
    /// Appends a producer's record batches to `topic`-`index` and waits until they are as
    /// durable as the topic asks. A retry of batches already stored answers with where they
    /// were stored, without storing them again.
    pub fn append_records(
        &self,
        topic: &str,
        index: i32,
        records: Option<Bytes>,
    ) -> Result<AppendInfo, ProduceError> {
        if Broker::is_internal(topic) {
            return Err(ProduceError::InternalTopic(topic.to_string()));
        }
        let partition =
            self.partition(topic, index)
                .ok_or_else(|| ProduceError::UnknownPartition {
                    topic: topic.to_string(),
                    index,
                })?;
        let records = records.ok_or(ProduceError::NoRecords)?;
        let headers = batch::parse_all(&records)?;
        let state = self.producers.partition(topic, index);
        let mut producers = state.lock().unwrap_or_else(PoisonError::into_inner);
        let info = match producers.check(&headers) {
            Verdict::Reject(error) => {
                return Err(ProduceError::Producer {
                    producer_id: headers.first().map_or(-1, |h| h.producer_id),
                    error,
                })
            }
            Verdict::Duplicate(info) => info,
            Verdict::Append => {
                let info = partition.append_pending(&records)?;
                producers.record(&headers, info);
                info
            }
        };
        drop(producers);
        partition.await_durable(&info)?;
        Ok(info)
    }
}
