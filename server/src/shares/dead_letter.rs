//! Dead letters of archived records (KIP-1191 as Kafka 4.4 ships it): whether a share group's
//! dead-letter topic may be written ([`dead_letter_topic`], Kafka's checks and messages), and
//! the write of an operation's archived records to it, in batches under the topic's
//! `max.message.bytes`.

use std::sync::Arc;

use log_core::batch::HeadedRecord;
use log_core::{Log, Partition, Topic};
use record_batch::HEADER_LEN;
use task_queue::{Archived, ShareConfig};

use super::delivery::{self, Source};
use super::{now_ms, Pending, Shares};
use crate::metrics::DeadLetterFailure;

/// Bytes a record's offset and timestamp deltas and its length may grow by in a longer batch
/// than its own (varints of at most 5 and 10 bytes where its own batch has 1 each).
const DELTA_ROOM: usize = 16;

impl Shares {
    /// Writes the dead letters of what an operation archived, if `config`'s dead-letter topic
    /// passes Kafka 4.4's checks (`dead_letter_topic`); otherwise the records stay archived
    /// without a copy, and the broker log says why, as in Kafka
    /// (`lograil_dead_letters_failed_total` counts them).
    pub(super) fn dead_letter(
        &self,
        log: &Log,
        (config, dlq): (&ShareConfig, &str),
        source: Source<'_>,
        partition: &Partition,
        archived: &[Archived],
        pending: &mut Pending,
    ) {
        let due = archived.iter().filter(|a| a.reason.dead_letters()).count() as u64;
        if due == 0 {
            return;
        }
        let failed = |why| self.metrics.dead_letters_failed(why, due);
        let topic = match dead_letter_topic(log, config, source.group, dlq) {
            Ok(Some(topic)) => topic,
            Ok(None) => {
                // Kafka's configs of a DLQ topic it creates.
                let mut topic_config = self.topic_defaults.clone();
                topic_config.dlq_group_enable = true;
                topic_config.timestamp_type = record_batch::TimestampType::CreateTime;
                match log.create_topic(dlq, self.dead_letter_partitions, topic_config) {
                    Ok(topic) => topic,
                    Err(log_core::TopicError::AlreadyExists(_)) => match log.topic(dlq) {
                        Some(topic) => topic,
                        None => return failed(DeadLetterFailure::Error),
                    },
                    Err(e) => {
                        tracing::error!(topic = dlq, error = %e, "creating the dead-letter topic failed");
                        return failed(DeadLetterFailure::Error);
                    }
                }
            }
            Err(refused) => {
                tracing::warn!(
                    group = source.group,
                    topic = dlq,
                    "{refused}; archived without a dead letter"
                );
                return failed(DeadLetterFailure::Refused);
            }
        };
        let copies = match delivery::dead_letters(
            partition,
            source,
            archived,
            config.dead_letter_copy_record,
            now_ms(),
        ) {
            Ok(copies) if copies.is_empty() => return,
            Ok(copies) => copies,
            Err(e) => {
                tracing::error!(topic = dlq, error = %e, "reading records to dead-letter failed");
                return failed(DeadLetterFailure::Error);
            }
        };
        let count = topic.partitions().len().max(1);
        let Some(target) = topic
            .partitions()
            .get(usize::try_from(source.partition).unwrap_or(0) % count)
            .cloned()
        else {
            return failed(DeadLetterFailure::Error);
        };
        let max_bytes = target.config().max_message_bytes as usize;
        for chunk in under(&copies, max_bytes) {
            let batch = log_core::batch::build_with_headers(chunk);
            match target.append_pending(&batch, log_core::Ack::All) {
                Ok(info) => {
                    self.metrics
                        .dead_lettered(dlq, chunk.len() as u64, batch.len() as u64);
                    tracing::info!(
                        group = source.group,
                        topic = source.topic,
                        dlq,
                        records = chunk.len(),
                        "dead-lettered"
                    );
                    pending.push(&target, info);
                }
                Err(e) => {
                    tracing::error!(topic = dlq, error = %e, "writing dead letters failed");
                    self.metrics
                        .dead_letters_failed(DeadLetterFailure::Error, chunk.len() as u64);
                }
            }
        }
    }
}

/// `copies` in runs whose batch fits in `max_bytes` (the dead-letter topic's
/// `max.message.bytes`), as Kafka batches dead letters: a copy too large on its own goes
/// alone, and its topic refuses it.
fn under(copies: &[HeadedRecord], max_bytes: usize) -> Vec<&[HeadedRecord]> {
    // A record's size in a batch of its own, less that batch's header, plus room for the
    // larger offset and timestamp deltas it may have in a longer batch.
    let size = |copy: &HeadedRecord| {
        log_core::batch::build_with_headers(std::slice::from_ref(copy))
            .len()
            .saturating_sub(HEADER_LEN)
            + DELTA_ROOM
    };
    let mut runs = Vec::new();
    let (mut start, mut bytes) = (0, HEADER_LEN);
    for (i, copy) in copies.iter().enumerate() {
        let more = size(copy);
        if i > start && bytes + more > max_bytes {
            runs.push(&copies[start..i]);
            (start, bytes) = (i, HEADER_LEN);
        }
        bytes += more;
    }
    if start < copies.len() {
        runs.push(&copies[start..]);
    }
    runs
}

/// Why a share group's dead-letter topic was refused: Kafka 4.4's checks, in its order, with
/// its messages (`ShareGroupDLQStateManager`), made when a record is dead-lettered (Kafka
/// accepts any `errors.deadletterqueue.topic.name` as a group config).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeadLetterRefused {
    #[error(
        "Configured DLQ topic name in share group: {group} cannot start with __, topic: {topic}."
    )]
    Internal { group: String, topic: String },
    #[error(
        "DLQ is not enabled on configured DLQ topic for share group: {group}, topic: {topic}."
    )]
    NotEnabled { group: String, topic: String },
    #[error("DLQ topic does not exist and auto create is disabled on cluster for share group: {group}, topic: {topic}.")]
    Missing { group: String, topic: String },
    #[error("Configured DLQ topic name does not comply with the DLQ topic prefix in share group: {group}, topic: {topic}, prefix: {prefix}.")]
    Prefix {
        group: String,
        topic: String,
        prefix: String,
    },
}

/// The dead-letter topic `dlq` of `group`, if Kafka would write to it: the topic (`None`: it
/// is to be created, with `errors.deadletterqueue.group.enable=true`), or why not. Refused: a
/// name starting with `__`; an existing topic without `errors.deadletterqueue.group.enable`;
/// a missing one unless the broker's `errors.deadletterqueue.auto.create.topics.enable`; a
/// name without the broker's `errors.deadletterqueue.topic.name.prefix` (unless it is `""`).
pub fn dead_letter_topic(
    log: &Log,
    config: &ShareConfig,
    group: &str,
    dlq: &str,
) -> Result<Option<Arc<Topic>>, DeadLetterRefused> {
    let names = || (group.to_string(), dlq.to_string());
    if dlq.starts_with("__") {
        let (group, topic) = names();
        return Err(DeadLetterRefused::Internal { group, topic });
    }
    let topic = log.topic(dlq);
    match &topic {
        Some(topic) if !topic.config().dlq_group_enable => {
            let (group, topic) = names();
            return Err(DeadLetterRefused::NotEnabled { group, topic });
        }
        None if !config.dead_letter_auto_create => {
            let (group, topic) = names();
            return Err(DeadLetterRefused::Missing { group, topic });
        }
        _ => {}
    }
    let prefix = &config.dead_letter_topic_prefix;
    if !prefix.is_empty() && !dlq.starts_with(prefix.as_str()) {
        let (group, topic) = names();
        return Err(DeadLetterRefused::Prefix {
            group,
            topic,
            prefix: prefix.clone(),
        });
    }
    Ok(topic)
}

#[cfg(test)]
mod tests {
    use bytes::Bytes;
    use log_core::batch::HeadedRecord;

    use super::under;

    fn copy(value_bytes: usize, header_bytes: usize) -> HeadedRecord {
        HeadedRecord {
            key: Some(Bytes::from_static(b"key")),
            value: Some(Bytes::from(vec![b'v'; value_bytes])),
            timestamp: log_core::now_ms(),
            headers: vec![(
                "__dlq.errors.message".to_string(),
                Some(Bytes::from(vec![b'h'; header_bytes])),
            )],
        }
    }

    #[test]
    fn runs_fit_the_topics_max_message_bytes_and_keep_every_copy_in_order() {
        let copies: Vec<HeadedRecord> = (0..40).map(|i| copy(300 + i * 7, 120)).collect();
        let runs = under(&copies, 2048);
        assert!(runs.len() >= 8, "{} runs", runs.len());
        for run in &runs {
            let batch = log_core::batch::build_with_headers(run);
            assert!(batch.len() <= 2048, "a batch of {} bytes", batch.len());
        }
        let joined: Vec<&HeadedRecord> = runs.iter().flat_map(|r| r.iter()).collect();
        assert_eq!(joined.len(), copies.len());
        assert!(joined.iter().zip(&copies).all(|(a, b)| *a == b));
        // Everything fits one batch: one run.
        assert_eq!(under(&copies, 1 << 20).len(), 1);
    }

    #[test]
    fn a_copy_larger_than_the_limit_goes_alone() {
        let copies = vec![copy(10, 10), copy(5000, 10), copy(10, 10)];
        let runs: Vec<usize> = under(&copies, 2048).iter().map(|r| r.len()).collect();
        assert_eq!(runs, vec![1, 1, 1]);
    }
}
