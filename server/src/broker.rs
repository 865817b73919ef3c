//! What every handler shares: the log, the config, producer state and the append signal.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use log_core::{Log, OpenError, Partition, StateLogError, Topic, TopicConfig, TopicError};
use tokio::sync::{watch, Notify, Semaphore};

use crate::appender::{AppendMode, Appender, Marker, ProduceError};
use crate::authorizer::Authorizer;
use crate::backlog::{self, Backlogs, Bound, Verdict};
use crate::broker_defaults::BrokerDefaults;
use crate::config::BrokerConfig;
use crate::durable::Syncer;
use crate::groups::consumer::ConsumerGroups;
use crate::groups::offsets::{ConsumerGroupMeta, OffsetsError};
use crate::groups::{Coordinator, OffsetStore};
use crate::limits::RateLimiter;
use crate::metrics::{Metrics, TimedStorage};
use crate::producers::{ProducerIds, Producers};
use crate::quotas::Quotas;
use crate::security::Security;
use crate::shares::Shares;
use crate::transactions::{EffectError, Effects, PendingOffsets, Transactions};
use record_batch::ControlType;

/// The coordinator epoch of every marker: one node, whose transaction coordinator never moves.
const COORDINATOR_EPOCH: i32 = 0;

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

/// Why the broker's state could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Open(#[from] OpenError),
    /// `__consumer_offsets`, `__share_group_state` or `__transaction_state` (the error names
    /// which).
    #[error(transparent)]
    State(#[from] StateLogError),
    #[error("client quotas: {0}")]
    Quotas(#[from] crate::quotas::LoadError),
    #[error("credentials: {0}")]
    Credentials(#[from] crate::security::credentials::CredentialsError),
    #[error("ACLs: {0}")]
    Acls(#[from] crate::authorizer::LoadError),
}

#[derive(Debug)]
pub struct Broker {
    pub log: Log,
    pub config: BrokerConfig,
    pub cluster_id: String,
    /// Topic config defaults: the flags, with dynamic broker defaults over them.
    pub defaults: BrokerDefaults,
    /// Idempotent-producer state, per partition.
    pub producers: Producers,
    pub producer_ids: ProducerIds,
    /// Consumer groups and their committed offsets.
    pub groups: Coordinator,
    /// Consumer-protocol groups (KIP-848); a group id is here or in `groups`, not both.
    pub consumer_groups: ConsumerGroups,
    pub offsets: OffsetStore,
    /// The transaction coordinator and `__transaction_state`.
    pub transactions: Transactions,
    /// One writer of the groups' own records at a time (`store_group_records`), so records
    /// reach the log in the order their changes were taken.
    group_records: tokio::sync::Mutex<()>,
    /// Share groups (KIP-932): members, sessions and the share partitions' state.
    pub shares: Shares,
    /// Notified after every append, to wake fetches waiting for data.
    pub appended: Notify,
    /// Produces waiting for their fsync (durability `always`).
    pub syncer: Syncer,
    /// Turns `true` when the broker is shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// `queued.max.request.bytes`: one permit per byte of large requests being read or handled.
    pub request_budget: Arc<Semaphore>,
    /// Partitions of topics being created, counted with those that exist against
    /// `max.broker.partitions`.
    creating_partitions: Mutex<u64>,
    /// Paces topic auto-creation (`--auto-create-topics-per-second`).
    pub auto_create: RateLimiter,
    /// What `/metrics` reports (`--metrics-listen`).
    pub metrics: Arc<Metrics>,
    /// Client quotas (AlterClientQuotas) and the rates they are enforced on.
    pub quotas: Quotas,
    /// The measured backlogs of backlog-bounded topics.
    pub backlogs: Backlogs,
    /// SASL settings and the credentials connections authenticate against.
    pub security: Security,
    /// What each request may do (`authorizer.class.name`; none: everything).
    pub authorizer: Authorizer,
}

/// Room for partitions being created; given back when dropped.
struct Room<'a> {
    broker: &'a Broker,
    partitions: u64,
}

impl Drop for Room<'_> {
    fn drop(&mut self) {
        let mut creating = lock(&self.broker.creating_partitions);
        *creating = creating.saturating_sub(self.partitions);
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Broker {
    /// Opens the broker's state in `config.data_dir`, counting into `metrics`.
    pub fn open(
        config: BrokerConfig,
        shutdown: watch::Receiver<bool>,
        metrics: Arc<Metrics>,
    ) -> Result<Broker, StartError> {
        // Every fsync of the log is timed for the fsync latency histogram.
        let mut options = config.log.clone();
        options.storage = Arc::new(TimedStorage::new(options.storage, metrics.clone()));
        let log = Log::open_with_options(&config.data_dir, options)?;
        let defaults = BrokerDefaults::open(&config.data_dir, config.topic_defaults.clone())?;
        let offsets = OffsetStore::open(&log)?;
        let transactions = Transactions::open(&log, config.transactions.clone())?;
        let shares = Shares::open(
            &log,
            config.share.clone(),
            config.topic_defaults.clone(),
            config.default_partitions,
            metrics.clone(),
        )?;
        let groups = Coordinator::new(config.groups.clone());
        // Groups with committed offsets come back Empty, with their protocol type and
        // generation; the record of one without (forgotten) waits for the next rewrite.
        let kept = offsets.group_metas();
        groups.restore(
            kept.into_iter()
                .filter(|(group, _)| offsets.has_offsets(group))
                .collect(),
        );
        let consumer_groups = ConsumerGroups::new(config.groups.consumer.clone());
        consumer_groups.restore(
            offsets
                .consumer_group_metas()
                .into_iter()
                .filter(|(group, _)| offsets.has_offsets(group))
                .map(|(group, meta)| (group, meta.epoch))
                .collect(),
        );
        let producer_ids = ProducerIds::open(&config.data_dir)?;
        let quotas = Quotas::open(&config.data_dir, config.quota_window)?;
        let security = Security::open(&config.data_dir, &config.security)?;
        let authorizer = Authorizer::open(&config.data_dir, &config.authorization)?;
        let producers = Producers::default();
        for topic in log.topics() {
            for (index, partition) in (0..).zip(topic.partitions()) {
                producers.rebuild(topic.name(), index, partition);
            }
        }
        let budget = config
            .limits
            .queued_max_request_bytes
            .min(Semaphore::MAX_PERMITS);
        let auto_create_rate = config.limits.auto_create_topics_per_second;
        Ok(Broker {
            log,
            cluster_id: "lograil-single-node".to_string(),
            defaults,
            config,
            producers,
            producer_ids,
            groups,
            consumer_groups,
            offsets,
            transactions,
            shares,
            appended: Notify::new(),
            syncer: Syncer::default(),
            shutdown,
            request_budget: Arc::new(Semaphore::new(budget)),
            creating_partitions: Mutex::new(0),
            group_records: tokio::sync::Mutex::new(()),
            auto_create: RateLimiter::per_second(auto_create_rate),
            metrics,
            quotas,
            backlogs: Backlogs::default(),
            security,
            authorizer,
        })
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

    /// Whether `partitions` more fit under `max.broker.partitions` now (reserving nothing).
    pub fn check_room(&self, partitions: u32) -> Result<(), CreateError> {
        self.reserve_room(partitions).map(drop)
    }

    fn reserve_room(&self, partitions: u32) -> Result<Room<'_>, CreateError> {
        let max = self.config.limits.max_broker_partitions;
        let mut creating = lock(&self.creating_partitions);
        let total = self.partition_count() + *creating + u64::from(partitions);
        if total > u64::from(max) {
            return Err(CreateError::BrokerFull {
                requested: partitions,
                total,
                max,
            });
        }
        *creating += u64::from(partitions);
        Ok(Room {
            broker: self,
            partitions: u64::from(partitions),
        })
    }

    /// Creates a topic within `max.broker.partitions`. Blocking file work: call it on the
    /// blocking pool. No lock of the broker's is held while the files are made.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        config: TopicConfig,
    ) -> Result<Arc<Topic>, CreateError> {
        let _room = self.reserve_room(partitions)?;
        Ok(self.log.create_topic(name, partitions, config)?)
    }

    /// Grows topic `name` to `partitions` partitions within `max.broker.partitions` (Kafka's
    /// CreatePartitions). Blocking file work: call it on the blocking pool.
    pub fn add_partitions(&self, name: &str, partitions: u32) -> Result<Arc<Topic>, CreateError> {
        let current = self.log.topic(name).map_or(0, |t| {
            u32::try_from(t.partitions().len()).unwrap_or(u32::MAX)
        });
        let _room = self.reserve_room(partitions.saturating_sub(current))?;
        Ok(self.log.add_partitions(name, partitions)?)
    }

    /// Creates a topic with the broker's defaults for a client that asked for it by name
    /// (Metadata with auto-creation allowed). Blocking file work: call it on the blocking
    /// pool. The topic if another request created it meanwhile; [`CreateError::BeingCreated`]
    /// while that creation is still under way.
    pub fn auto_create_topic(&self, name: &str) -> Result<Arc<Topic>, CreateError> {
        let partitions = self.config.default_partitions;
        match self.create_topic(name, partitions, self.topic_defaults()) {
            Ok(topic) => {
                tracing::info!(topic = name, partitions, "auto-created topic");
                Ok(topic)
            }
            Err(CreateError::Topic(TopicError::AlreadyExists(_))) => self
                .log
                .topic(name)
                .ok_or_else(|| CreateError::BeingCreated(name.to_string())),
            Err(e) => Err(e),
        }
    }

    /// Writes the own records (protocol type, generation) of the groups that changed since
    /// theirs was written, and deletes those of `forgotten` groups, in `__consumer_offsets`
    /// (on the blocking pool, durable when this returns). One call at a time: a change taken
    /// by an earlier call is durable when a later one returns, and records land in the order
    /// their changes were taken. A failure is logged and its groups count as unwritten, so
    /// the next call (the group timer's, within 100 ms) writes them again.
    pub async fn store_group_records(self: &Arc<Self>, mut forgotten: Vec<String>) {
        let _turn = self.group_records.lock().await;
        // A group forgotten at the tick and joined again since keeps its new record.
        forgotten.retain(|group| !self.groups.contains(group));
        let changed = self.groups.unpersisted();
        let consumer: Vec<(String, Option<ConsumerGroupMeta>)> = self
            .consumer_groups
            .unpersisted()
            .into_iter()
            .map(|(id, epoch)| (id, epoch.map(|epoch| ConsumerGroupMeta { epoch })))
            .collect();
        if forgotten.is_empty() && changed.is_empty() && consumer.is_empty() {
            return;
        }
        let names: Vec<String> = changed.iter().map(|(id, _)| id.clone()).collect();
        let consumer_names: Vec<String> = consumer.iter().map(|(id, _)| id.clone()).collect();
        let owner = self.clone();
        let stored = crate::blocking::spawn(move || {
            for group in &forgotten {
                owner.offsets.delete_group_record(group)?;
            }
            owner.offsets.store_groups(changed)?;
            owner.offsets.store_consumer_groups(consumer)
        })
        .await;
        let error = match stored {
            Ok(Ok(())) => return,
            Ok(Err(e)) => e.to_string(),
            Err(e) => e.to_string(),
        };
        tracing::error!(error, "writing group records failed");
        self.groups.unwritten(&names);
        self.consumer_groups.unwritten(&consumer_names);
    }

    /// Deletes the committed offsets of groups empty for `offsets.retention.minutes` at
    /// `now_ms` (tombstones in `__consumer_offsets`, durable: call it on the blocking pool).
    pub fn expire_offsets(&self, now_ms: i64) -> Result<Vec<String>, OffsetsError> {
        let retention = &self.config.limits.offsets_retention;
        let retention_ms = i64::try_from(retention.as_millis()).unwrap_or(i64::MAX);
        let mut with_members = self.groups.groups_with_members();
        with_members.extend(self.consumer_groups.groups_with_members());
        self.offsets.expire(now_ms, retention_ms, &with_members)
    }

    /// Topics only the broker writes (`__consumer_offsets`): clients may not produce to or
    /// delete them.
    pub fn is_internal(topic: &str) -> bool {
        crate::appender::is_internal(topic)
    }

    /// The append path over this broker's log, producer state and metrics.
    pub fn appender(&self) -> Appender<'_> {
        Appender {
            log: &self.log,
            producers: &self.producers,
            producer_ids: &self.producer_ids,
            metrics: &self.metrics,
            appended: &self.appended,
        }
    }

    pub fn partition(&self, topic: &str, index: i32) -> Option<Arc<Partition>> {
        let index = u32::try_from(index).ok()?;
        self.log.topic(topic)?.partition(index).cloned()
    }

    /// Whether partition `index` of `topic` belongs to a topic whose files could not be
    /// opened (counted from its partition directories).
    pub fn is_offline(&self, topic: &str, index: i32) -> bool {
        u32::try_from(index).is_ok_and(|i| i < self.log.offline_partition_count(topic))
    }

    /// What a produce to `topic` gets from its backlog bound now (`backlog`): measured again,
    /// on the blocking pool, when the last measure is older than [`backlog::REFRESH`].
    pub async fn backlog_verdict(self: &Arc<Self>, topic: &str) -> Verdict {
        let Some(handle) = self.log.topic(topic) else {
            return Verdict::Accept;
        };
        let Some(bound) = Bound::of(&handle.config()) else {
            return Verdict::Accept;
        };
        let state = match self.backlogs.fresh(topic) {
            Some(state) => state,
            None => {
                let (owner, for_measure) = (self.clone(), bound.clone());
                let measured =
                    crate::blocking::spawn(move || owner.measure_backlog(&handle, &for_measure))
                        .await;
                match measured {
                    Ok(state) => {
                        self.backlogs.store(topic, state.clone());
                        state
                    }
                    Err(e) => {
                        tracing::error!(topic, error = %e, "measuring the backlog failed");
                        return Verdict::Accept;
                    }
                }
            }
        };
        Backlogs::verdict(topic, &bound, &state, self.quotas.window().length())
    }

    /// `topic`'s backlog for `bound`, measured now (it may read a segment: blocking).
    pub fn measure_backlog(&self, topic: &Topic, bound: &Bound) -> backlog::State {
        let position = |index: i32| {
            self.offsets
                .fetch(&bound.group, topic.name(), index)
                .map(|c| c.offset)
                .or_else(|| self.shares.start_offset(&bound.group, topic.id(), index))
        };
        self.backlogs.measure(position, topic, bound)
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Completes the prepared transaction of `id` on the blocking pool: its markers, its
    /// offsets on commit, then Complete* (see `transactions`). On failure it stays prepared and
    /// the coordinator's timer tries again.
    pub async fn complete_transaction(self: Arc<Self>, id: String) {
        let owner = self.clone();
        let done = crate::blocking::spawn(move || {
            owner
                .transactions
                .complete(&id, owner.as_ref(), log_core::now_ms)
                .map_err(|e| (id, e.to_string()))
        })
        .await;
        match done {
            Ok(Ok(_)) => self.appended.notify_waiters(),
            Ok(Err((id, e))) => {
                tracing::error!(
                    transactional_id = id,
                    error = e,
                    "completing a transaction failed; retried later"
                )
            }
            Err(e) => tracing::error!(error = %e, "transaction completion task failed"),
        }
    }
}

impl Broker {
    /// One marker, durable when this returns; a partition that no longer exists is skipped.
    /// The coordinator epoch is 0: one node, whose coordinator never moves.
    fn write_marker(
        &self,
        topic: &str,
        index: i32,
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), ProduceError> {
        let kind = if commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let marker = Marker {
            producer_id,
            producer_epoch: epoch,
            coordinator_epoch: COORDINATOR_EPOCH,
            kind,
        };
        let written = self
            .appender()
            .write_marker(topic, index, marker, AppendMode::Blocking);
        let appended = match written {
            Ok(appended) => appended,
            Err(ProduceError::UnknownPartition { .. }) => {
                tracing::info!(
                    topic,
                    partition = index,
                    "no marker for a partition that no longer exists"
                );
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        appended.partition.await_durable(&appended.info)?;
        self.appended.notify_waiters();
        Ok(())
    }
}

/// The coordinator's effects on the log and the groups: markers through the append path
/// (durable before returning), offsets through the offset store.
impl Effects for Broker {
    fn write_markers(
        &self,
        partitions: &[(String, i32)],
        producer_id: i64,
        epoch: i16,
        commit: bool,
    ) -> Result<(), EffectError> {
        for (topic, index) in partitions {
            self.write_marker(topic, *index, producer_id, epoch, commit)
                .map_err(|reason| EffectError::Marker {
                    topic: topic.clone(),
                    index: *index,
                    reason: reason.to_string(),
                })?;
        }
        Ok(())
    }

    fn commit_offsets(&self, offsets: &PendingOffsets) -> Result<(), EffectError> {
        let now = log_core::now_ms();
        for (group, offsets) in offsets {
            let commits = offsets
                .iter()
                .map(|(partition, o)| {
                    (
                        partition.clone(),
                        crate::groups::Committed {
                            offset: o.offset,
                            leader_epoch: o.leader_epoch,
                            metadata: o.metadata.clone(),
                            commit_timestamp: now,
                        },
                    )
                })
                .collect();
            self.offsets.commit(group, commits)?;
        }
        Ok(())
    }
}
