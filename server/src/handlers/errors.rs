//! The one place where lograil's errors become Kafka error codes.

use kafka_protocol::error::ResponseError;
use log_core::{AppendError, ReadError, StateLogError, TopicError};

use crate::appender::ProduceError;
use crate::broker::CreateError;
use crate::shares::FetchError;
use crate::transactions::{CoordError, ProduceCheck, TxnError};

/// The code of an outcome: 0 for success.
pub fn code<T>(outcome: &Result<T, ResponseError>) -> i16 {
    outcome.as_ref().err().map_or(0, |e| e.code())
}

/// The code of an optional error: 0 for none.
pub fn code_of(error: Option<ResponseError>) -> i16 {
    error.map_or(0, |e| e.code())
}

pub fn append(e: &AppendError) -> ResponseError {
    match e {
        AppendError::InvalidBatch(_) => ResponseError::CorruptMessage,
        AppendError::TooLarge { .. } => ResponseError::MessageTooLarge,
        AppendError::ProducerLogAppendTime { .. } => ResponseError::InvalidTimestamp,
        AppendError::RefusedRecords {
            invalid_timestamp: true,
            ..
        } => ResponseError::InvalidTimestamp,
        AppendError::RefusedRecords { .. } => ResponseError::InvalidRecord,
        AppendError::Compress(_) => ResponseError::UnknownServerError,
        AppendError::Closed(_) => ResponseError::UnknownTopicOrPartition,
        AppendError::Io(_) | AppendError::Poisoned { .. } => ResponseError::KafkaStorageError,
        // Retried on the blocking pool before it could reach a client.
        AppendError::OffsetOverflow | AppendError::WouldBlock => ResponseError::UnknownServerError,
    }
}

/// The code of a failed produce at `version` of the request.
pub fn produce(e: &ProduceError, version: i16) -> ResponseError {
    match e {
        // UNKNOWN_PRODUCER_ID came with Produce v5 (Kafka 1.0); older clients know
        // OUT_OF_ORDER_SEQUENCE_NUMBER.
        ProduceError::UnknownProducer(_) if version < 5 => ResponseError::OutOfOrderSequenceNumber,
        ProduceError::UnknownProducer(_) => ResponseError::UnknownProducerId,
        ProduceError::InternalTopic(_) => ResponseError::InvalidTopicException,
        ProduceError::UnknownPartition { .. } => ResponseError::UnknownTopicOrPartition,
        ProduceError::NoRecords | ProduceError::Corrupt(_) => ResponseError::CorruptMessage,
        ProduceError::ControlBatch => ResponseError::InvalidRecord,
        ProduceError::Producer { error, .. } => *error,
        ProduceError::Append(e) => append(e),
        ProduceError::TaskFailed(_) => ResponseError::UnknownServerError,
    }
}

pub fn offsets(e: &StateLogError) -> ResponseError {
    match e {
        StateLogError::Append { source, .. } => append(source),
        StateLogError::Encode { .. } => ResponseError::UnknownServerError,
        _ => ResponseError::KafkaStorageError,
    }
}

pub fn share_fetch(e: &FetchError) -> ResponseError {
    match e {
        FetchError::Protocol(error) => *error,
        FetchError::Read(e) => read(e),
    }
}

pub fn read(e: &ReadError) -> ResponseError {
    match e {
        ReadError::OffsetOutOfRange { .. } => ResponseError::OffsetOutOfRange,
        // Damaged data: the client sees the error (librdkafka hands it to the application)
        // and can seek past it; a storage error would be retried silently forever.
        ReadError::Damaged { .. } | ReadError::Corrupt { .. } => ResponseError::CorruptMessage,
        ReadError::Io(_) => ResponseError::KafkaStorageError,
    }
}

/// What a Fetch of an offline topic's partition answers (its files could not be opened, so its
/// data cannot be served): CORRUPT_MESSAGE, as for damaged data, which librdkafka and the Java
/// client hand to the application; KAFKA_STORAGE_ERROR is retried silently forever, and one
/// broker has no other replica to fail over to.
pub const OFFLINE_FETCH: ResponseError = ResponseError::CorruptMessage;
/// What a ListOffsets of an offline topic's partition answers: UNKNOWN_SERVER_ERROR, which is
/// not retriable, so librdkafka reports "failed to query logical offset" to the application
/// (it retries CORRUPT_MESSAGE and KAFKA_STORAGE_ERROR here without a word).
pub const OFFLINE_LIST_OFFSETS: ResponseError = ResponseError::UnknownServerError;

pub fn topic(e: &TopicError) -> ResponseError {
    match e {
        TopicError::InvalidName { .. } => ResponseError::InvalidTopicException,
        TopicError::AlreadyExists(_) => ResponseError::TopicAlreadyExists,
        TopicError::UnknownTopic(_) => ResponseError::UnknownTopicOrPartition,
        TopicError::InvalidPartitions(_) | TopicError::PartitionsNotIncreased { .. } => {
            ResponseError::InvalidPartitions
        }
        TopicError::InvalidConfig(_) => ResponseError::InvalidConfig,
        TopicError::Offline { .. } | TopicError::Io(_) | TopicError::Open(_) => {
            ResponseError::KafkaStorageError
        }
    }
}

pub fn create(e: &CreateError) -> ResponseError {
    match e {
        CreateError::BrokerFull { .. } => ResponseError::PolicyViolation,
        CreateError::BeingCreated(_) => ResponseError::LeaderNotAvailable,
        CreateError::Topic(e) => topic(e),
    }
}

/// A refused transaction request. `fenced` is the code a fenced producer gets at this version
/// of the API (PRODUCER_FENCED came with KIP-588; older versions know INVALID_PRODUCER_EPOCH).
pub fn txn(e: &TxnError, fenced: ResponseError) -> ResponseError {
    match e {
        TxnError::InvalidTimeout(_) => ResponseError::InvalidTransactionTimeout,
        TxnError::UnknownId | TxnError::ProducerIdMismatch { .. } => {
            ResponseError::InvalidProducerIdMapping
        }
        TxnError::Fenced { .. } => fenced,
        TxnError::Concurrent(_) => ResponseError::ConcurrentTransactions,
        TxnError::InvalidState { .. } => ResponseError::InvalidTxnState,
    }
}

/// A failed coordinator operation: refused, or its record not written (retriable: the
/// client looks for the coordinator again and retries).
pub fn coordinator(e: &CoordError, fenced: ResponseError) -> ResponseError {
    match e {
        CoordError::Txn(e) => txn(e, fenced),
        CoordError::Store(_) | CoordError::ProducerId(_) => ResponseError::CoordinatorNotAvailable,
    }
}

/// A transactional produce to a partition the transaction does not hold (KIP-890 part 1).
pub fn produce_check(e: &ProduceCheck) -> ResponseError {
    match e {
        ProduceCheck::Epoch { .. } => ResponseError::InvalidProducerEpoch,
        ProduceCheck::UnknownProducer | ProduceCheck::NotInTransaction => {
            ResponseError::InvalidTxnState
        }
    }
}
