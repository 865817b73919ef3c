//! What every handler shares: the log, the config, producer state and the append signal.

use std::net::SocketAddr;
use std::sync::Arc;

use log_core::{Log, OpenError, Partition, Topic, TopicError};
use tokio::sync::{watch, Notify};

use crate::config::BrokerConfig;
use crate::durable::Syncer;
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
    /// Produces waiting for their fsync (durability `always`).
    pub syncer: Syncer,
    /// Turns `true` when the broker is shutting down.
    pub shutdown: watch::Receiver<bool>,
}

impl Broker {
    pub fn open(
        config: BrokerConfig,
        bound: SocketAddr,
        shutdown: watch::Receiver<bool>,
    ) -> Result<Broker, StartError> {
        let log = Log::open_with_options(&config.data_dir, config.log.clone())?;
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
            syncer: Syncer::default(),
            shutdown,
        })
    }

    /// The topic, created with the broker defaults if it is missing and `create` allows it.
    pub fn topic_or_create(&self, name: &str, create: bool) -> Result<Arc<Topic>, TopicError> {
        if let Some(topic) = self.log.topic(name) {
            return Ok(topic);
        }
        if let Some(reason) = self.log.offline_reason(name) {
            return Err(TopicError::Offline {
                name: name.to_string(),
                reason,
            });
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
