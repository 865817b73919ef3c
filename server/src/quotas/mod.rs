//! Kafka client quotas: `producer_byte_rate`, `consumer_byte_rate` and `request_percentage`
//! per user and/or client id, and `connection_creation_rate` per `ip` (KIP-612), set with
//! AlterClientQuotas, read with DescribeClientQuotas,
//! kept in `<data-dir>/client-quotas` (JSON, written atomically) and enforced as Kafka does
//! since KIP-219: a request is recorded against its quota entity's rate, the response carries
//! `throttle_time_ms`, and the connection reads no further request for that long.
//!
//! - A client's use of a quota is a token bucket, Kafka's `TokenBucket` stat (KIP-599): it
//!   fills at the quota, up to the quota times the window (`quota.window.num` 11 x
//!   `quota.window.size.seconds` 1 s, Kafka's settings and defaults), and each request takes
//!   its bytes out. A bucket in debt is a throttle of debt / quota: the time the client needs,
//!   at its quota, to pay it back (at most the whole window). Deviation: Kafka's client quotas
//!   measure a sampled `Rate` instead; with a greedy client that lets through a burst of ten
//!   windows' worth each time the oldest sample expires (10 MB every ~11 s at 1 MB/s), where
//!   the bucket holds the client to its quota once its first burst is spent. The throttle
//!   means the same to clients.
//! - Produce counts its request bytes against `producer_byte_rate`, Fetch its response bytes
//!   against `consumer_byte_rate`, every request the time its handler spends running (polled,
//!   not waiting: a long-polling fetch costs only its reads) against `request_percentage`
//!   (100 = one thread's whole time). A request throttled by both gets the longer throttle.
//! - The bucket is the quota entity's, shared by all its connections, and a Produce or Fetch
//!   waits, before it is handled, until its entity's byte-rate bucket is out of debt (Produce
//!   bytes are taken out then, before the append). So many connections of one client id that
//!   ignore `throttle_time_ms` share its quota instead of each being muted on its own (with
//!   Kafka, and lograil before, N such connections got up to N times a window's worth per
//!   window). A Fetch's bytes are known only once it is answered: concurrent fetches of one
//!   entity may overshoot by one response each. `request_percentage` mutes per connection only.
//!   Deviation: the wait is after the request is read (Kafka mutes before reading), so a
//!   waiting request keeps its bytes, and one over 64 KiB its share of
//!   `queued.max.request.bytes`.
//! - Which quota applies is Kafka's order, first match per quota key: user+client-id,
//!   user+default client-id, user, default user+client-id, default user+default client-id,
//!   default user, client-id, default client-id. A default entity gives each user / client id
//!   its own rate at that quota, as in Kafka.
//! - `connection_creation_rate` of an `ip` entity (the address, or the default: each address
//!   its own rate) is a bucket of connections over the same window: a new connection from the
//!   address takes one out, and one over the rate is not served but held for the time the
//!   bucket needs to refill, then closed (Kafka's per-IP throttle; the held connection is not
//!   counted, as Kafka unrecords it).
//! - A client's user is its authenticated principal's name (a SASL username, or a client
//!   certificate's subject); `ANONYMOUS` on a listener without authentication, so there user
//!   quotas apply through the default user or the user named `ANONYMOUS`.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

use log_core::FileError;
use serde::{Deserialize, Serialize};

mod bucket;
mod entity;

use bucket::Sensor;
pub use bucket::Window;
pub use entity::{
    check_key, check_value, Entity, Match, Name, Op, QuotaError, QuotaKind, CLIENT_ID, IP, USER,
};

/// The user of a client on a listener without authentication, as Kafka names it.
pub const ANONYMOUS: &str = "ANONYMOUS";

const FILE: &str = "client-quotas";
const FORMAT: u32 = 1;

/// Why quotas could not be read at start.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file is there but is not JSON of this format, or holds an entity, key or value that
    /// AlterClientQuotas would refuse.
    #[error("{path}: {reason}; fix or remove the file")]
    Corrupt {
        /// `<data-dir>/client-quotas`.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The file is there but could not be read.
    #[error(transparent)]
    Io(#[from] FileError),
}

/// The file's form: Kafka's entity components, then the values by key name.
#[derive(Debug, Serialize, Deserialize)]
struct StoredFile {
    format: u32,
    quotas: Vec<StoredEntry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredEntry {
    /// (entity type, name or null for the default)
    entity: Vec<(String, Option<String>)>,
    values: BTreeMap<String, f64>,
}

type Table = BTreeMap<Entity, BTreeMap<QuotaKind, f64>>;

#[derive(Debug, Default)]
struct Sensors {
    /// By (key, user tag, client-id tag); a tag is empty when the matched entity has no
    /// such component (Kafka's metric tags).
    by_key: HashMap<(QuotaKind, String, String), Sensor>,
    last_purge: Option<Instant>,
}

/// Every client quota and the rates they are enforced on.
#[derive(Debug)]
pub struct Quotas {
    dir: PathBuf,
    window: Window,
    table: RwLock<Table>,
    /// Whether any quota of a user or client id is set (the request path does nothing more
    /// when none is).
    any: AtomicBool,
    /// Whether a `connection_creation_rate` quota is set (accepting does nothing more when
    /// none is).
    any_ip: AtomicBool,
    /// Whether a `request_percentage` quota is set (handlers are timed only then).
    any_request: AtomicBool,
    sensors: Mutex<Sensors>,
    /// Serialises alterations (table, then file).
    alter: Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Called with every throttle the broker imposes, with its cause (a quota key, or `backlog`
/// for a backlog-bounded topic); logged at debug level. The throttle-time metric per client
/// (`lograil_client_throttle_seconds_total`) counts the throttle each response carries, where
/// it is set (`handlers::handle`, through `Metrics::record_throttle`).
pub fn on_throttle(client_id: &str, cause: &'static str, throttle: Duration) {
    tracing::debug!(
        client_id,
        cause,
        throttle_ms = throttle.as_millis(),
        "throttled"
    );
}

impl Quotas {
    /// Reads `<data_dir>/client-quotas` if there is one. A file that cannot be read as quotas
    /// is an error naming it, not an empty set of quotas.
    pub fn open(data_dir: &Path, window: Window) -> Result<Quotas, LoadError> {
        let path = data_dir.join(FILE);
        let mut table = Table::new();
        match fs::read_to_string(&path) {
            Ok(text) => {
                let corrupt = |reason: String| LoadError::Corrupt {
                    path: path.clone(),
                    reason,
                };
                let file: StoredFile =
                    serde_json::from_str(&text).map_err(|e| corrupt(e.to_string()))?;
                if file.format != FORMAT {
                    return Err(corrupt(format!(
                        "format {} (this lograil reads format {FORMAT})",
                        file.format
                    )));
                }
                for entry in file.quotas {
                    let entity = Entity::from_components(
                        entry.entity.iter().map(|(t, n)| (t.as_str(), n.as_deref())),
                    )
                    .map_err(|e| corrupt(e.to_string()))?;
                    let mut values = BTreeMap::new();
                    for (key, value) in entry.values {
                        let kind = QuotaKind::parse(&key)
                            .ok_or_else(|| corrupt(QuotaError::UnknownKey(key).to_string()))?;
                        check_key(&entity, kind).map_err(|e| corrupt(e.to_string()))?;
                        check_value(kind, value).map_err(|e| corrupt(e.to_string()))?;
                        values.insert(kind, value);
                    }
                    if !values.is_empty() {
                        table.insert(entity, values);
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(FileError::new("read", path, e).into()),
        }
        let quotas = Quotas {
            dir: data_dir.to_path_buf(),
            window,
            table: RwLock::new(Table::new()),
            any: AtomicBool::new(false),
            any_ip: AtomicBool::new(false),
            any_request: AtomicBool::new(false),
            sensors: Mutex::new(Sensors::default()),
            alter: Mutex::new(()),
        };
        quotas.install(table);
        Ok(quotas)
    }

    fn install(&self, table: Table) {
        let ip = table.keys().any(|e| e.ip.is_some());
        self.any_ip.store(ip, Ordering::Release);
        let client = table.keys().any(|e| e.ip.is_none());
        self.any.store(client, Ordering::Release);
        let request = table
            .values()
            .any(|v| v.contains_key(&QuotaKind::RequestPercentage));
        self.any_request.store(request, Ordering::Release);
        *self.table.write().unwrap_or_else(PoisonError::into_inner) = table;
    }

    /// The rate window quotas are measured over (`BrokerConfig::quota_window`).
    pub fn window(&self) -> Window {
        self.window
    }

    /// Whether any quota is set.
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Acquire)
    }

    /// Whether a `connection_creation_rate` quota is set.
    pub fn any_connection_rate(&self) -> bool {
        self.any_ip.load(Ordering::Acquire)
    }

    /// Whether a `request_percentage` quota is set.
    pub fn any_request_quota(&self) -> bool {
        self.any_request.load(Ordering::Acquire)
    }

    /// Applies one entry's changes (Kafka applies each entry of a request on its own), durably
    /// unless `validate_only`. Blocking file work.
    pub fn alter(
        &self,
        entity: &Entity,
        ops: &[Op],
        validate_only: bool,
    ) -> Result<(), AlterError> {
        for op in ops {
            check_key(entity, op.kind)?;
            if let Some(value) = op.value {
                check_value(op.kind, value)?;
            }
        }
        if validate_only {
            return Ok(());
        }
        let _serial = lock(&self.alter);
        let mut table = self
            .table
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let values = table.entry(entity.clone()).or_default();
        for op in ops {
            match op.value {
                Some(value) => values.insert(op.kind, value),
                None => values.remove(&op.kind),
            };
        }
        if values.is_empty() {
            table.remove(entity);
        }
        self.write(&table)?;
        self.install(table);
        Ok(())
    }

    /// The entities `filter` matches (Kafka's DescribeClientQuotas: every component of the
    /// filter must match one of the entity's; with `strict`, the entity has no other), with
    /// their values.
    pub fn describe(
        &self,
        filter: &[(&str, Match)],
        strict: bool,
    ) -> Vec<(Entity, BTreeMap<QuotaKind, f64>)> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        table
            .iter()
            .filter(|(entity, _)| {
                let components = entity.components();
                if strict && components.len() != filter.len() {
                    return false;
                }
                filter.iter().all(|(kind, wanted)| {
                    components
                        .iter()
                        .find(|(k, _)| k == kind)
                        .is_some_and(|(_, name)| match wanted {
                            Match::Exact(n) => *name == Some(n.as_str()),
                            Match::Default => name.is_none(),
                            Match::Any => true,
                        })
                })
            })
            .map(|(e, v)| (e.clone(), v.clone()))
            .collect()
    }

    /// The quota of `kind` that applies to (`user`, `client_id`), and the tags of the rate it
    /// is measured on, in Kafka's order of precedence.
    fn resolve(
        &self,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
    ) -> Option<(f64, String, String)> {
        let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
        let named = |n: &str| Some(Name::Named(n.to_string()));
        let order = [
            (named(user), named(client_id)),
            (named(user), Some(Name::Default)),
            (named(user), None),
            (Some(Name::Default), named(client_id)),
            (Some(Name::Default), Some(Name::Default)),
            (Some(Name::Default), None),
            (None, named(client_id)),
            (None, Some(Name::Default)),
        ];
        order.into_iter().find_map(|(u, c)| {
            let tags = (
                if u.is_some() { user } else { "" }.to_string(),
                if c.is_some() { client_id } else { "" }.to_string(),
            );
            let entity = Entity {
                user: u,
                client_id: c,
                ip: None,
            };
            table
                .get(&entity)
                .and_then(|values| values.get(&kind))
                .map(|quota| (*quota, tags.0, tags.1))
        })
    }

    /// Records `value` (bytes, or percent-seconds of handler time) for the client against its
    /// quota of `kind`, and returns the throttle it has earned (zero under its quota or without
    /// one).
    pub fn record(
        &self,
        kind: QuotaKind,
        user: &str,
        client_id: &str,
        value: f64,
        now: Instant,
    ) -> Duration {
        if !self.any() {
            return Duration::ZERO;
        }
        let Some((quota, user_tag, client_tag)) = self.resolve(kind, user, client_id) else {
            return Duration::ZERO;
        };
        let mut sensors = self.purged_sensors(now);
        let window = self.window;
        let throttle = sensors
            .by_key
            .entry((kind, user_tag, client_tag))
            .or_insert_with(|| Sensor::full(quota, window, now))
            .record(value, quota, window, now);
        if !throttle.is_zero() {
            on_throttle(client_id, kind.name(), throttle);
        }
        throttle
    }

    /// A new connection from `ip` at `now`, against its `connection_creation_rate` (the
    /// address's, else the default ip entity's): zero if it may be served (it is counted),
    /// else how long to hold it before closing it (it is not counted).
    pub fn admit_connection(&self, ip: IpAddr, now: Instant) -> Duration {
        if !self.any_connection_rate() {
            return Duration::ZERO;
        }
        let kind = QuotaKind::ConnectionCreationRate;
        let address = ip.to_string();
        let quota = {
            let table = self.table.read().unwrap_or_else(PoisonError::into_inner);
            [Name::Named(address.clone()), Name::Default]
                .into_iter()
                .find_map(|name| {
                    let entity = Entity {
                        user: None,
                        client_id: None,
                        ip: Some(name),
                    };
                    table.get(&entity).and_then(|v| v.get(&kind)).copied()
                })
        };
        let Some(quota) = quota else {
            return Duration::ZERO;
        };
        let mut sensors = self.purged_sensors(now);
        let window = self.window;
        let throttle = sensors
            .by_key
            .entry((kind, address.clone(), String::new()))
            .or_insert_with(|| Sensor::full(quota, window, now))
            .try_take(1.0, quota, window, now);
        if !throttle.is_zero() {
            tracing::debug!(
                %ip,
                throttle_ms = throttle.as_millis(),
                "connection over connection_creation_rate"
            );
        }
        throttle
    }

    /// The sensors, those of clients quiet for two windows forgotten first (at most once per
    /// two windows).
    fn purged_sensors(&self, now: Instant) -> MutexGuard<'_, Sensors> {
        let mut sensors = lock(&self.sensors);
        let idle = self.window.length() * 2;
        if sensors
            .last_purge
            .is_none_or(|t| now.saturating_duration_since(t) > idle)
        {
            // Buckets quiet this long are full again: forgotten until they are used again.
            sensors
                .by_key
                .retain(|_, s| now.saturating_duration_since(s.updated) <= idle);
            sensors.last_purge = Some(now);
        }
        sensors
    }

    /// How long until the bucket of `kind` that `client_id` draws on is out of debt (zero
    /// without a quota or a debt). The bucket is the quota entity's, shared by all its
    /// connections: a request of that kind waits this long before it is handled, so that
    /// connections that ignore `throttle_time_ms` share one quota instead of each being muted
    /// on its own.
    pub fn debt(&self, kind: QuotaKind, user: &str, client_id: &str, now: Instant) -> Duration {
        if !self.any() {
            return Duration::ZERO;
        }
        let Some((quota, user_tag, client_tag)) = self.resolve(kind, user, client_id) else {
            return Duration::ZERO;
        };
        let sensors = lock(&self.sensors);
        sensors
            .by_key
            .get(&(kind, user_tag, client_tag))
            .map_or(Duration::ZERO, |sensor| sensor.debt(quota, now))
    }

    /// The quotas that apply to `client_id` now (for display).
    pub fn effective(&self, user: &str, client_id: &str) -> Vec<(QuotaKind, f64)> {
        QuotaKind::ALL
            .into_iter()
            .filter_map(|k| self.resolve(k, user, client_id).map(|(q, _, _)| (k, q)))
            .collect()
    }

    fn write(&self, table: &Table) -> Result<(), FileError> {
        let file = StoredFile {
            format: FORMAT,
            quotas: table
                .iter()
                .map(|(entity, values)| StoredEntry {
                    entity: entity
                        .components()
                        .into_iter()
                        .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                        .collect(),
                    values: values
                        .iter()
                        .map(|(k, v)| (k.name().to_string(), *v))
                        .collect(),
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&file).unwrap_or_default() + "\n";
        log_core::io::replace_file(&self.dir, FILE, text.as_bytes())
    }
}

/// Why an AlterClientQuotas entry was not applied.
#[derive(Debug, thiserror::Error)]
pub enum AlterError {
    /// The entity, a key or a value was refused; nothing applied (INVALID_REQUEST).
    #[error(transparent)]
    Invalid(#[from] QuotaError),
    /// The file could not be written; the quotas in effect are unchanged
    /// (KAFKA_STORAGE_ERROR).
    #[error(transparent)]
    Io(#[from] FileError),
}

#[cfg(test)]
mod tests;
