//! The admin facade: topic creation within `max.broker.partitions`, auto-creation's pace,
//! and client quotas.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use log_core::{Topic, TopicConfig, TopicError};

use super::storage::Storage;
use crate::limits::RateLimiter;
use crate::quotas::Quotas;

/// Why a topic was not created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error(
        "{requested} more partitions would make {total}, over the broker's limit of {max} \
         (--max-broker-partitions)"
    )]
    BrokerFull {
        requested: u32,
        total: u64,
        max: u32,
    },
    #[error("topic {0} is being created")]
    BeingCreated(String),
    #[error(transparent)]
    Topic(#[from] TopicError),
}

/// Creating topics and partitions, and the client quotas.
#[derive(Debug)]
pub struct Admin {
    /// Where topics are created.
    storage: Arc<Storage>,
    /// Partitions of topics being created, counted with those that exist against
    /// `max.broker.partitions`.
    creating_partitions: Mutex<u64>,
    /// `max.broker.partitions`.
    max_partitions: u32,
    /// The partitions of an auto-created topic (`num.partitions`).
    default_partitions: u32,
    /// Paces topic auto-creation (`--auto-create-topics-per-second`).
    pub auto_create: RateLimiter,
    /// Client quotas (AlterClientQuotas) and the rates they are enforced on.
    pub quotas: Quotas,
}

/// Room for partitions being created; given back when dropped.
struct Room<'a> {
    admin: &'a Admin,
    partitions: u64,
}

impl Drop for Room<'_> {
    fn drop(&mut self) {
        let mut creating = lock(&self.admin.creating_partitions);
        *creating = creating.saturating_sub(self.partitions);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What limits the admin facade enforces.
pub(super) struct AdminLimits {
    pub max_partitions: u32,
    pub default_partitions: u32,
    pub auto_create_per_second: u32,
}

impl Admin {
    pub(super) fn new(storage: Arc<Storage>, limits: AdminLimits, quotas: Quotas) -> Admin {
        Admin {
            storage,
            creating_partitions: Mutex::new(0),
            max_partitions: limits.max_partitions,
            default_partitions: limits.default_partitions,
            auto_create: RateLimiter::per_second(limits.auto_create_per_second),
            quotas,
        }
    }

    /// Whether `partitions` more fit under `max.broker.partitions` now (reserving nothing).
    pub fn check_room(&self, partitions: u32) -> Result<(), CreateError> {
        self.reserve_room(partitions).map(drop)
    }

    fn reserve_room(&self, partitions: u32) -> Result<Room<'_>, CreateError> {
        let max = self.max_partitions;
        let mut creating = lock(&self.creating_partitions);
        let total = self.storage.partition_count() + *creating + u64::from(partitions);
        if total > u64::from(max) {
            return Err(CreateError::BrokerFull {
                requested: partitions,
                total,
                max,
            });
        }
        *creating += u64::from(partitions);
        Ok(Room {
            admin: self,
            partitions: u64::from(partitions),
        })
    }

    /// Creates a topic within `max.broker.partitions`. Blocking file work: call it on the
    /// blocking pool. No lock is held while the files are made.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, CreateError> {
        let _room = self.reserve_room(partitions)?;
        Ok(self.storage.log.create_topic(name, partitions, config)?)
    }

    /// Grows topic `name` to `partitions` partitions within `max.broker.partitions` (Kafka's
    /// CreatePartitions). Blocking file work: call it on the blocking pool.
    pub fn add_partitions(&self, name: &str, partitions: u32) -> Result<Arc<Topic>, CreateError> {
        let current = self.storage.log.topic(name).map_or(0, |t| {
            u32::try_from(t.partitions().len()).unwrap_or(u32::MAX)
        });
        let _room = self.reserve_room(partitions.saturating_sub(current))?;
        Ok(self.storage.log.add_partitions(name, partitions)?)
    }

    /// Creates a topic with the broker's defaults for a client that asked for it by name
    /// (Metadata with auto-creation allowed). Blocking file work: call it on the blocking
    /// pool. The topic if another request created it meanwhile; [`CreateError::BeingCreated`]
    /// while that creation is still under way.
    pub fn auto_create_topic(&self, name: &str) -> Result<Arc<Topic>, CreateError> {
        let partitions = self.default_partitions;
        match self.create_topic(name, partitions, self.storage.topic_defaults()) {
            Ok(topic) => {
                tracing::info!(topic = name, partitions, "auto-created topic");
                Ok(topic)
            }
            Err(CreateError::Topic(TopicError::AlreadyExists(_))) => self
                .storage
                .log
                .topic(name)
                .ok_or_else(|| CreateError::BeingCreated(name.to_string())),
            Err(e) => Err(e),
        }
    }
}
