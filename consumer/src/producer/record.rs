//! What the application hands the producer and gets back: a record to send (and the topic
//! names it takes), where an acknowledged record landed, the future of its delivery.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::DeliveryError;

/// A topic name for [`ProducerRecord::new`].
pub trait IntoTopic {
    /// The name as the shared string a record holds (no allocation for an `Arc<str>`).
    fn into_topic(self) -> Arc<str>;
}

impl IntoTopic for &str {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for &String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self.as_str())
    }
}

impl IntoTopic for String {
    fn into_topic(self) -> Arc<str> {
        Arc::from(self)
    }
}

impl IntoTopic for Arc<str> {
    fn into_topic(self) -> Arc<str> {
        self
    }
}

impl IntoTopic for &Arc<str> {
    fn into_topic(self) -> Arc<str> {
        self.clone()
    }
}

/// A record to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerRecord {
    /// The topic to send to.
    pub topic: Arc<str>,
    /// `None`: the partitioner chooses (murmur2 of the key, or sticky for no key).
    pub partition: Option<i32>,
    /// `None`: a null key (unkeyed: the partitioner does not hash it).
    pub key: Option<Bytes>,
    /// `None`: a null value (a tombstone in a compacted topic).
    pub value: Option<Bytes>,
    /// Header names and values, in order. A name given twice keeps its last value: the record
    /// codec (`kafka-protocol`) stores headers in a map.
    pub headers: Vec<(String, Option<Bytes>)>,
    /// Milliseconds since the epoch (`CreateTime`); `None`: the time of `send`.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record for `topic` (a `&str`, `String` or `Arc<str>`; sending many records to one
    /// topic, a cloned `Arc<str>` saves an allocation per record) with no key, value or headers
    /// yet.
    pub fn new(topic: impl IntoTopic) -> ProducerRecord {
        ProducerRecord {
            topic: topic.into_topic(),
            partition: None,
            key: None,
            value: None,
            headers: Vec::new(),
            timestamp: None,
        }
    }

    /// Sets the key (the default partitioner sends equal keys to one partition).
    pub fn key(mut self, key: impl Into<Bytes>) -> ProducerRecord {
        self.key = Some(key.into());
        self
    }

    /// Sets the value; without one the record's value is null.
    pub fn value(mut self, value: impl Into<Bytes>) -> ProducerRecord {
        self.value = Some(value.into());
        self
    }

    /// Adds a header after those already set (for a null header value, push onto `headers`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<Bytes>) -> ProducerRecord {
        self.headers.push((name.into(), Some(value.into())));
        self
    }

    /// Sends to this partition, bypassing the partitioner; `send` refuses one the topic does
    /// not have ([`SendError::UnknownPartition`](super::SendError::UnknownPartition)).
    pub fn partition(mut self, partition: i32) -> ProducerRecord {
        self.partition = Some(partition);
        self
    }

    /// Sets the record's `CreateTime`, in milliseconds since the epoch (default: the time of
    /// `send`); `send` refuses a negative one ([`SendError::InvalidTimestamp`](super::SendError::InvalidTimestamp)).
    pub fn timestamp(mut self, ms: i64) -> ProducerRecord {
        self.timestamp = Some(ms);
        self
    }

    /// Bytes the record takes in a batch at most (before compression): what counts against
    /// `batch.size`, `buffer.memory` and `max.request.size`.
    pub fn size_estimate(&self) -> usize {
        // Length, attributes, timestamp and offset deltas, key and value lengths, header count:
        // at most 21 bytes of varints, as the Java client estimates.
        21 + self.key.as_ref().map_or(0, Bytes::len)
            + self.value.as_ref().map_or(0, Bytes::len)
            + self
                .headers
                .iter()
                .map(|(k, v)| 10 + k.len() + v.as_ref().map_or(0, Bytes::len))
                .sum::<usize>()
    }
}

/// Where an acknowledged record landed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The record's topic.
    pub topic: Arc<str>,
    /// The partition it went to (the partitioner's choice, or the one the record named).
    pub partition: i32,
    /// -1 with `acks=0` (the broker does not say).
    pub offset: i64,
    /// The record's timestamp, or the broker's append time for `LogAppendTime` topics.
    pub timestamp: i64,
}

/// Completes when the record is acknowledged (or has failed for good).
#[derive(Debug)]
pub struct DeliveryFuture {
    pub(super) rx: oneshot::Receiver<Result<RecordMetadata, DeliveryError>>,
}

impl Future for DeliveryFuture {
    type Output = Result<RecordMetadata, DeliveryError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(DeliveryError::Closed)))
    }
}
