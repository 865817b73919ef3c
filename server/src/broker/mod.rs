//! The broker's state as facades, each owning one concern: [`Storage`] (the log and what
//! appends touch), [`Groups`], [`Shares`], [`Txns`] (transactions), [`Admin`] (topic creation,
//! quotas), [`Access`] (authentication, ACLs) and [`Backlog`]. `Broker` only holds them, with
//! the config and the shutdown signal; a handler names the facades it needs ([`Pick`]) and the
//! request path hands it those, so no handler reaches a subsystem it did not ask for.

mod access;
mod admin;
mod backlog;
mod groups;
mod pick;
mod storage;
mod txns;

use std::sync::Arc;

use log_core::OpenError;
use log_core::StateLogError;
use tokio::sync::{watch, Semaphore};

pub use access::Access;
use admin::AdminLimits;
pub use admin::{Admin, CreateError};
pub use backlog::Backlog;
pub use groups::Groups;
pub(crate) use pick::Pick;
pub use storage::Storage;
pub use txns::Txns;

use crate::authorizer::Authorizer;
use crate::broker_defaults::BrokerDefaults;
use crate::config::BrokerConfig;
use crate::groups::consumer::ConsumerGroups;
use crate::groups::{Coordinator, OffsetStore};
use crate::metrics::{Metrics, TimedStorage};
use crate::producers::ProducerIds;
use crate::quotas::Quotas;
use crate::security::Security;
use crate::shares::Shares;
use crate::transactions::Transactions;

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

/// The facades, the config and the shutdown signal. No field is public: the request path
/// hands a handler the facades it names ([`Pick`]); the broker's own tasks (timers,
/// connections, `/metrics`, the console) use the accessors below.
#[derive(Debug)]
pub struct Broker {
    config: Arc<BrokerConfig>,
    cluster_id: Arc<str>,
    storage: Arc<Storage>,
    groups: Arc<Groups>,
    shares: Arc<Shares>,
    txns: Arc<Txns>,
    admin: Arc<Admin>,
    access: Arc<Access>,
    backlog: Arc<Backlog>,
    /// What `/metrics` reports (`--metrics-listen`).
    metrics: Arc<Metrics>,
    /// Turns `true` when the broker is shutting down.
    shutdown: watch::Receiver<bool>,
    /// `queued.max.request.bytes`: one permit per byte of large requests being read or handled.
    request_budget: Arc<Semaphore>,
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
        let log = log_core::Log::open_with_options(&config.data_dir, options)?;
        let defaults = BrokerDefaults::open(&config.data_dir, config.topic_defaults.clone())?;
        let offsets = OffsetStore::open(&log)?;
        let transactions = Transactions::open(&log, config.transactions.clone())?;
        let shares = Arc::new(Shares::open(
            &log,
            config.share.clone(),
            config.topic_defaults.clone(),
            config.default_partitions,
            metrics.clone(),
        )?);
        let groups = Arc::new(Groups::restore(
            Coordinator::new(config.groups.clone()),
            ConsumerGroups::new(config.groups.consumer.clone()),
            offsets,
            config.limits.offsets_retention,
        ));
        let producer_ids = ProducerIds::open(&config.data_dir)?;
        let quotas = Quotas::open(&config.data_dir, config.quota_window)?;
        let access = Arc::new(Access {
            security: Security::open(&config.data_dir, &config.security)?,
            authorizer: Arc::new(Authorizer::open(&config.data_dir, &config.authorization)?),
        });
        let storage = Arc::new(Storage::new(log, defaults, producer_ids, metrics.clone()));
        let limits = AdminLimits {
            max_partitions: config.limits.max_broker_partitions,
            default_partitions: config.default_partitions,
            auto_create_per_second: config.limits.auto_create_topics_per_second,
        };
        let admin = Arc::new(Admin::new(storage.clone(), limits, quotas));
        let backlog = Arc::new(Backlog::new(
            storage.clone(),
            groups.clone(),
            shares.clone(),
            admin.clone(),
        ));
        let txns = Arc::new(Txns::new(transactions, storage.clone(), groups.clone()));
        let budget = config
            .limits
            .queued_max_request_bytes
            .min(Semaphore::MAX_PERMITS);
        Ok(Broker {
            config: Arc::new(config),
            cluster_id: Arc::from("lograil-single-node"),
            storage,
            groups,
            shares,
            txns,
            admin,
            access,
            backlog,
            metrics,
            shutdown,
            request_budget: Arc::new(Semaphore::new(budget)),
        })
    }

    pub fn config(&self) -> &Arc<BrokerConfig> {
        &self.config
    }

    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    pub fn groups(&self) -> &Arc<Groups> {
        &self.groups
    }

    pub fn shares(&self) -> &Arc<Shares> {
        &self.shares
    }

    pub fn txns(&self) -> &Arc<Txns> {
        &self.txns
    }

    pub fn admin(&self) -> &Arc<Admin> {
        &self.admin
    }

    pub fn access(&self) -> &Arc<Access> {
        &self.access
    }

    pub fn backlog(&self) -> &Arc<Backlog> {
        &self.backlog
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// A receiver of the shutdown signal (`true` once the broker is shutting down).
    pub fn shutdown(&self) -> watch::Receiver<bool> {
        self.shutdown.clone()
    }

    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    pub fn request_budget(&self) -> &Arc<Semaphore> {
        &self.request_budget
    }
}
