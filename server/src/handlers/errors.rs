//! The one place where lograil's errors become Kafka error codes.

use kafka_protocol::error::ResponseError;
use log_core::{AppendError, ReadError, TopicError};

pub fn append(e: &AppendError) -> ResponseError {
    match e {
        AppendError::InvalidBatch(_) => ResponseError::CorruptMessage,
        AppendError::TooLarge { .. } => ResponseError::MessageTooLarge,
        AppendError::Closed(_) => ResponseError::UnknownTopicOrPartition,
        AppendError::Io(_) | AppendError::Poisoned { .. } => ResponseError::KafkaStorageError,
        AppendError::OffsetOverflow => ResponseError::UnknownServerError,
    }
}

pub fn read(e: &ReadError) -> ResponseError {
    match e {
        ReadError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        ReadError::Corrupt { .. } => ResponseError::KafkaStorageError,
    }
}

pub fn topic(e: &TopicError) -> ResponseError {
    match e {
        TopicError::InvalidName { .. } => ResponseError::InvalidTopicException,
        TopicError::AlreadyExists(_) => ResponseError::TopicAlreadyExists,
        TopicError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        TopicError::InvalidPartitions(_) => ResponseError::InvalidPartitions,
        TopicError::InvalidConfig(_) => ResponseError::InvalidConfig,
        TopicError::Io(_) | TopicError::Open(_) => ResponseError::KafkaStorageError,
    }
}
