//! What every handler shares: the log, the config, producer state and the append signal.

use std::net::SocketAddr;
use std::sync::Arc;

use log_core::{Log, OpenError, Partition, Topic, TopicError};
use tokio::sync::{watch, Notify, Semaphore};

use crate::config::BrokerConfig;
use crate::groups::offsets::OffsetsError;
use crate::groups::{Coordinator, OffsetStore};
use crate::producers::{ProducerIds, Producers};

/// Why the broker's state could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Open(#[from] OpenError),
    #[error(transparent)]
    Offsets(#[from] OffsetsError),
}

#[derive(Debug)]
pub struct Broker {
    pub log: Log,
    pub config: BrokerConfig,
    /// Host and port advertised in Metadata.
    pub host: String,
    pub port: i32,
    pub cluster_id: String,
    /// Idempotent-producer state, per partition.
    pub producers: Producers,
    pub producer_ids: ProducerIds,
    /// Consumer groups and their committed offsets.
    pub groups: Coordinator,
    pub offsets: OffsetStore,
    /// Notified after every append, to wake fetches waiting for data.
    pub appended: Notify,
    /// Turns `true` when the broker is shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// `queued.max.request.bytes`: one permit per byte of large requests being read or handled.
    pub request_budget: Arc<Semaphore>,
}

impl Broker {
    pub fn open(
        config: BrokerConfig,
        bound: SocketAddr,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Broker, StartError> {
        let log = Log::open(&config.data_dir)?;
        let offsets = OffsetStore::open(&log)?;
        let group_config = config.groups.clone();
        let producer_ids = ProducerIds::open(&config.data_dir)?;
        let producers = Producers::default();
        for topic in log.topics() {
            for (index, partition) in (0..).zip(topic.partitions()) {
                producers.rebuild(topic.name(), index, partition);
            }
        }
        let host = config.advertised_host.clone().unwrap_or_else(|| {
            if bound.ip().is_unspecified() {
                "127.0.0.1".to_string()
            } else {
                bound.ip().to_string()
            }
        });
        let budget = config
            .limits
            .queued_max_request_bytes
            .min(Semaphore::MAX_PERMITS);
        Ok(Broker {
            log,
            host,
            port: i32::from(bound.port()),
            cluster_id: "lograil-single-node".to_string(),
            config,
            producers,
            producer_ids,
            groups: Coordinator::new(group_config),
            offsets,
            appended: Notify::new(),
            shutdown,
            request_budget: Arc::new(Semaphore::new(budget)),
        })
    }

    /// The topic, created with the broker defaults if it is missing and `create` allows it.
    pub fn topic_or_create(&self, name: &str, create: bool) -> Result<Arc<Topic>, TopicError> {
        if let Some(topic) = self.log.topic(name) {
            return Ok(topic);
        }
        if !create {
            return Err(TopicError::UnknownTopic(name.to_string()));
        }
        match self.log.create_topic(
            name,
            self.config.default_partitions,
            self.config.topic_defaults.clone(),
        ) {
            Ok(topic) => {
                tracing::info!(
                    topic = name,
                    partitions = self.config.default_partitions,
                    "auto-created topic"
                );
                Ok(topic)
            }
            // Another request created it meanwhile.
            Err(TopicError::AlreadyExists(_)) => self
                .log
                .topic(name)
                .ok_or_else(|| TopicError::UnknownTopic(name.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Topics only the broker writes (`__consumer_offsets`): clients may not produce to or
    /// delete them.
    pub fn is_internal(topic: &str) -> bool {
        topic.starts_with("__")
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let index = u32::try_from(index).ok()?;
        self.log.topic(topic)?.partition(index).cloned()
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}
