//! The storage facade: the log, the topic defaults, producer state, the append signal and
//! the fsync queue — what reads and writes records needs, and nothing of groups or access.

use std::sync::Arc;

use log_core::{Log, Partition, TopicConfig};
use tokio::sync::Notify;

use crate::appender::Appender;
use crate::broker_defaults::BrokerDefaults;
use crate::durable::Syncer;
use crate::metrics::Metrics;
use crate::producers::{ProducerIds, Producers};

/// The log and what every append touches beside it.
#[derive(Debug)]
pub struct Storage {
    pub log: Log,
    /// Topic config defaults: the flags, with dynamic broker defaults over them.
    pub defaults: BrokerDefaults,
    /// Idempotent-producer state, per partition.
    pub producers: Producers,
    pub producer_ids: ProducerIds,
    /// Notified after every append, to wake fetches waiting for data.
    pub appended: Notify,
    /// Produces waiting for their fsync (durability `always`).
    pub syncer: Syncer,
    /// Counts appends and their sizes.
    metrics: Arc<Metrics>,
}

impl Storage {
    pub(super) fn new(
        log: Log,
        defaults: BrokerDefaults,
        producer_ids: ProducerIds,
        metrics: Arc<Metrics>,
    ) -> Storage {
        let producers = Producers::default();
        for topic in log.topics() {
            for (index, partition) in (0..).zip(topic.partitions()) {
                producers.rebuild(topic.name(), index, partition);
            }
        }
        Storage {
            log,
            defaults,
            producers,
            producer_ids,
            appended: Notify::new(),
            syncer: Syncer::default(),
            metrics,
        }
    }

    /// The config a new topic starts from: the flags, with dynamic broker defaults over them.
    pub fn topic_defaults(&self) -> TopicConfig {
        self.defaults.effective()
    }

    /// Partitions the broker holds, all topics together.
    pub fn partition_count(&self) -> u64 {
        self.log
            .topics()
            .iter()
            .map(|t| t.partitions().len() as u64)
            .sum()
    }

    /// The append path over this log, producer state and metrics.
    pub fn appender(&self) -> Appender<'_> {
        Appender {
            log: &self.log,
            producers: &self.producers,
            producer_ids: &self.producer_ids,
            metrics: &self.metrics,
            appended: &self.appended,
        }
    }

    /// Partition `index` of `topic`, if both exist.
    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let index = u32::try_from(index).ok()?;
        self.log.topic(topic)?.partition(index).cloned()
    }

    /// Whether partition `index` of `topic` belongs to a topic whose files could not be
    /// opened (counted from its partition directories).
    pub fn is_offline(&self, topic: &str, index: i32) -> bool {
        u32::try_from(index).is_ok_and(|i| i < self.log.offline_partition_count(topic))
    }

    /// Topics only the broker writes (`__consumer_offsets`): clients may not produce to or
    /// delete them.
    pub fn is_internal(topic: &str) -> bool {
        crate::appender::is_internal(topic)
    }
}
