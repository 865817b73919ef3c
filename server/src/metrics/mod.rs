//! The broker's Prometheus metrics (`lograil serve --metrics-listen ADDR`, served at
//! `/metrics` by the `scrape` module, which sits above the broker context and reads it), in the
//! OpenMetrics text format written by the `prometheus-client`
//! crate: no hand-written exposition.
//!
//! Two kinds of figures, so that the request path pays as little as possible:
//!
//! - **Counted as things happen** ([`Metrics`]): bytes and records in and out per topic and
//!   dead-letter arrivals ([`TopicTraffic`]: plain atomics found by topic name under a read
//!   lock, no label set built or allocated per batch), request count, errors and latency per
//!   API and version (a table built once from the served APIs, indexed by API key and version;
//!   latencies in [`histogram::LatencyHistogram`]s of atomics, no lock per request), fsync
//!   latency ([`storage::TimedStorage`] under log-core's storage seam: every `fdatasync` of
//!   every partition, the background `flush.ms` ones included), open connections, and the
//!   throttle time quotas give clients ([`Metrics::record_throttle`]). [`encode`] writes them
//!   out for a scrape.
//! - **Read at scrape time** (by `scrape`, from the broker's state): log start/end offsets and sizes per partition,
//!   consumer-group lag in records and seconds with a time-to-drain estimate, share-group
//!   record counts and lock ages. They cost nothing between scrapes.
//!
//! Everything labelled by something a client chooses is bounded: topics by
//! `max.broker.partitions` (a topic's series go when it is deleted), APIs and versions by the
//! served table (anything else is `api="unknown"`), client ids of throttle figures by
//! [`MAX_THROTTLED_CLIENTS`] (later ones are counted under `client_id="other"`).

pub(crate) mod encode;
pub(crate) mod errors;
mod histogram;
mod storage;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;

use self::histogram::LatencyHistogram;
use kafka_protocol::messages::ApiKey;
pub use storage::TimedStorage;
use vocabulary::is_dead_letter_topic;

/// Client ids with throttle figures of their own; throttles of further clients are added to
/// `client_id="other"` (a client picks its id: the label set must stay bounded).
pub const MAX_THROTTLED_CLIENTS: usize = 1000;

/// The label value throttles of clients beyond [`MAX_THROTTLED_CLIENTS`] are counted under.
pub const OTHER_CLIENTS: &str = "other";

/// Counters of one topic, updated with relaxed atomics.
#[derive(Debug, Default)]
pub struct TopicTraffic {
    /// Bytes of record batches appended by producers (a retried duplicate not counted again)
    /// or written as a share group's dead letters (`lograil_topic_bytes_in`).
    pub bytes_in: AtomicU64,
    /// Records of those batches (`lograil_topic_records_in`).
    pub records_in: AtomicU64,
    /// Bytes of record batches Fetch and ShareFetch responses carried
    /// (`lograil_topic_bytes_out`).
    pub bytes_out: AtomicU64,
    /// Records in the whole batches Fetch responses carried, and records ShareFetch acquired
    /// (`lograil_topic_records_out`).
    pub records_out: AtomicU64,
    /// Records that arrived as dead letters: appended to a topic named as a retry chain's
    /// dead-letter topic (`…-dlt`, Spring Kafka's default, or `….DLT`, its older one), or
    /// written by the broker into a share group's `errors.deadletterqueue.topic.name`.
    pub dead_letters: AtomicU64,
}

/// How a share-group tenant (the bytes of a record key or header) is shown, in `/metrics`
/// labels and in `lograil queue describe`: as UTF-8, invalid bytes replaced, control
/// characters escaped (`\u{1b}`), the empty tenant as `""` (quotes included).
pub fn tenant_label(tenant: &[u8]) -> String {
    if tenant.is_empty() {
        return "\"\"".to_string();
    }
    let mut out = String::with_capacity(tenant.len());
    for c in String::from_utf8_lossy(tenant).chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// One API version's request figures.
#[derive(Debug)]
struct RequestStats {
    count: Counter,
    errors: Counter,
    latency: LatencyHistogram,
    /// Error codes in responses, and how many times each was answered.
    codes: Mutex<Vec<(i16, u64)>>,
}

impl RequestStats {
    fn new() -> RequestStats {
        RequestStats {
            count: Counter::default(),
            errors: Counter::default(),
            codes: Mutex::new(Vec::new()),
            // 100 µs to ~52 s.
            latency: LatencyHistogram::doubling(Duration::from_micros(100), 20),
        }
    }
}

/// One API the broker serves, with the versions it serves.
#[derive(Debug, Clone, Copy)]
pub struct Api {
    /// The API, as a request header's `api_key` names it; requests of a key not in the table
    /// are counted under `api="unknown"`.
    pub key: ApiKey,
    /// The lowest version served, as ApiVersions advertises it.
    pub min: i16,
    /// The highest version served (inclusive), as ApiVersions advertises it.
    pub max: i16,
}

/// Request figures of every API and version served, plus one row for everything else.
#[derive(Debug)]
struct RequestTable {
    /// Per API served, one per version from its `min` to its `max`.
    served: Vec<(String, i16, Vec<RequestStats>)>,
    /// Indexed by API key: the index into `served` (API keys are small numbers).
    by_key: Vec<Option<usize>>,
    /// Requests naming an API or version not served.
    unknown: RequestStats,
}

impl RequestTable {
    fn new(apis: &[Api]) -> RequestTable {
        let served: Vec<(String, i16, Vec<RequestStats>)> = apis
            .iter()
            .map(|api| {
                let versions = (api.min..=api.max).map(|_| RequestStats::new()).collect();
                (format!("{:?}", api.key), api.min, versions)
            })
            .collect();
        let mut by_key = Vec::new();
        for (i, api) in apis.iter().enumerate() {
            let key = usize::try_from(api.key as i16).unwrap_or(0);
            if by_key.len() <= key {
                by_key.resize(key + 1, None);
            }
            by_key[key] = Some(i);
        }
        RequestTable {
            served,
            by_key,
            unknown: RequestStats::new(),
        }
    }

    fn stats(&self, key: i16, version: i16) -> &RequestStats {
        usize::try_from(key)
            .ok()
            .and_then(|key| self.by_key.get(key).copied().flatten())
            .and_then(|i| {
                let (_, min, versions) = &self.served[i];
                usize::try_from(version - min)
                    .ok()
                    .and_then(|v| versions.get(v))
            })
            .unwrap_or(&self.unknown)
    }
}

/// Throttle figures of one client.
#[derive(Debug, Default)]
struct Throttle {
    responses: u64,
    millis: u64,
}

/// The broker's metrics that are counted as things happen (see the module doc).
#[derive(Debug)]
pub struct Metrics {
    topics: RwLock<HashMap<String, Arc<TopicTraffic>>>,
    requests: RequestTable,
    fsync: LatencyHistogram,
    connections: AtomicI64,
    throttles: Mutex<HashMap<String, Throttle>>,
    /// Connections that failed their TLS handshake or SASL exchange, by which.
    authentication_failures: [AtomicU64; 2],
    /// Records archived without the dead letter their share group configured, by why.
    dead_letters_failed: [AtomicU64; 2],
}

/// Which step of a connection's authentication failed.
#[derive(Debug, Clone, Copy)]
pub enum AuthFailure {
    /// The TLS handshake failed or did not finish within `--authentication-timeout-ms`
    /// (`step="tls"`).
    Tls = 0,
    /// SASL authentication was refused or not done within `--authentication-timeout-ms`
    /// (`step="sasl"`).
    Sasl = 1,
}

/// Why a share group's dead letters were not written.
#[derive(Debug, Clone, Copy)]
pub enum DeadLetterFailure {
    /// The dead-letter topic failed Kafka's checks (name, prefix, topic config, existence).
    Refused = 0,
    /// Creating the topic, reading the records or appending the dead letters failed.
    Error = 1,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Metrics {
    /// Counts requests of `apis` by API and version (others as unknown).
    pub fn new(apis: &[Api]) -> Metrics {
        Metrics {
            topics: RwLock::new(HashMap::new()),
            requests: RequestTable::new(apis),
            // 10 µs to ~5 s.
            fsync: LatencyHistogram::doubling(Duration::from_micros(10), 20),
            connections: AtomicI64::new(0),
            throttles: Mutex::new(HashMap::new()),
            authentication_failures: Default::default(),
            dead_letters_failed: Default::default(),
        }
    }

    /// The counters of `topic`, created on first use.
    pub fn topic(&self, topic: &str) -> Arc<TopicTraffic> {
        if let Some(traffic) = self
            .topics
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(topic)
        {
            return traffic.clone();
        }
        self.topics
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(topic.to_string())
            .or_default()
            .clone()
    }

    /// `topic` was deleted: its counters go (a topic re-created under its name starts at 0).
    pub fn forget_topic(&self, topic: &str) {
        self.topics
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(topic);
    }

    /// Runs `f` on the counters of `topic` (no allocation once the topic has counters).
    fn with_topic(&self, topic: &str, f: impl FnOnce(&TopicTraffic)) {
        if let Some(traffic) = self
            .topics
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(topic)
        {
            f(traffic);
            return;
        }
        f(&self.topic(topic));
    }

    /// A producer's batches of `records` records and `bytes` bytes were appended to `topic`
    /// (a retried duplicate is not counted again).
    pub fn appended(&self, topic: &str, records: u64, bytes: u64) {
        self.with_topic(topic, |t| {
            t.bytes_in.fetch_add(bytes, Ordering::Relaxed);
            t.records_in.fetch_add(records, Ordering::Relaxed);
            if is_dead_letter_topic(topic) {
                t.dead_letters.fetch_add(records, Ordering::Relaxed);
            }
        });
    }

    /// The broker copied `records` dead letters into `topic` (a share group's dead-letter
    /// topic). Counted as bytes and records in too.
    pub fn dead_lettered(&self, topic: &str, records: u64, bytes: u64) {
        self.with_topic(topic, |t| {
            t.bytes_in.fetch_add(bytes, Ordering::Relaxed);
            t.records_in.fetch_add(records, Ordering::Relaxed);
            t.dead_letters.fetch_add(records, Ordering::Relaxed);
        });
    }

    /// A fetch returned `records` (whole batches of `bytes` bytes) of `topic`.
    pub fn fetched(&self, topic: &str, records: u64, bytes: u64) {
        if bytes == 0 {
            return;
        }
        self.with_topic(topic, |t| {
            t.bytes_out.fetch_add(bytes, Ordering::Relaxed);
            t.records_out.fetch_add(records, Ordering::Relaxed);
        });
    }

    /// A request of API `key` (raw, as on the wire) and `version` took `elapsed`; `failed`
    /// when the broker could not answer it (malformed, not served, over a cap: the connection
    /// is closed).
    pub fn request(&self, key: i16, version: i16, elapsed: Duration, failed: bool) {
        let stats = self.requests.stats(key, version);
        stats.count.inc();
        if failed {
            stats.errors.inc();
        }
        stats.latency.observe(elapsed);
    }

    /// The response to a request of API `key` and `version` is ready: counts the error codes
    /// in it (top level, per topic, partition, group). Locks nothing when there is none.
    /// `each_error` calls its argument with every error code in the response.
    pub(crate) fn response(
        &self,
        key: i16,
        version: i16,
        each_error: impl FnOnce(&mut dyn FnMut(i16)),
    ) {
        let mut found: Vec<(i16, u64)> = Vec::new();
        each_error(&mut |code| {
            if code != 0 {
                match found.iter_mut().find(|(c, _)| *c == code) {
                    Some((_, n)) => *n += 1,
                    None => found.push((code, 1)),
                }
            }
        });
        if found.is_empty() {
            return;
        }
        let stats = self.requests.stats(key, version);
        let mut codes = lock(&stats.codes);
        for (code, n) in found {
            match codes.iter_mut().find(|(c, _)| *c == code) {
                Some((_, total)) => *total += n,
                None => codes.push((code, n)),
            }
        }
    }

    /// An fsync took `elapsed`.
    pub fn fsynced(&self, elapsed: Duration) {
        self.fsync.observe(elapsed);
    }

    /// A connection failed to authenticate at `step`.
    pub fn authentication_failed(&self, step: AuthFailure) {
        self.authentication_failures[step as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// `records` that a share group archived went without their dead letter, for `why`.
    pub fn dead_letters_failed(&self, why: DeadLetterFailure, records: u64) {
        self.dead_letters_failed[why as usize].fetch_add(records, Ordering::Relaxed);
    }

    /// A client connection was accepted; it counts as open until the guard is dropped.
    pub fn connection_opened(self: &Arc<Self>) -> OpenConnection {
        self.connections.fetch_add(1, Ordering::Relaxed);
        OpenConnection(self.clone())
    }

    /// For client quotas: a response to `client_id` carried `throttle_ms` of throttle time
    /// (Kafka's `throttle_time_ms`; the connection is muted that long). Exposed as
    /// `lograil_client_throttle_seconds_total` and `lograil_client_throttled_responses_total`
    /// per client id (the first [`MAX_THROTTLED_CLIENTS`] ids; later ones under
    /// [`OTHER_CLIENTS`]). A zero throttle is not counted.
    pub fn record_throttle(&self, client_id: &str, throttle_ms: u64) {
        if throttle_ms == 0 {
            return;
        }
        let mut throttles = lock(&self.throttles);
        let key = if throttles.contains_key(client_id) || throttles.len() < MAX_THROTTLED_CLIENTS {
            client_id
        } else {
            OTHER_CLIENTS
        };
        let entry = match throttles.get_mut(key) {
            Some(entry) => entry,
            None => throttles.entry(key.to_string()).or_default(),
        };
        entry.responses += 1;
        entry.millis = entry.millis.saturating_add(throttle_ms);
    }

    /// Throttles given so far, per client id in order: (client id, responses, milliseconds).
    pub fn throttles(&self) -> Vec<(String, u64, u64)> {
        let mut rows: Vec<(String, u64, u64)> = lock(&self.throttles)
            .iter()
            .map(|(c, t)| (c.clone(), t.responses, t.millis))
            .collect();
        rows.sort();
        rows
    }
}

/// An open client connection, counted until dropped.
#[derive(Debug)]
pub struct OpenConnection(Arc<Metrics>);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Records and bytes in `records`, whole record batches as stored (a fetch response's
/// records), from their headers alone: no decoding, no CRC check.
pub fn count_records(records: &[u8]) -> u64 {
    use record_batch::layout::{i32_at, LAST_OFFSET_DELTA_AT, LENGTH_AT, LOG_OVERHEAD};
    let mut at = 0usize;
    let mut count = 0u64;
    // Counted once its header is there as far as the last offset delta (a torn tail batch too).
    while let Some(delta) = i32_at(records, at + LAST_OFFSET_DELTA_AT) {
        let length = i32_at(records, at + LENGTH_AT).unwrap_or(-1);
        let (Ok(length), Ok(delta)) = (usize::try_from(length), u64::try_from(delta)) else {
            break;
        };
        count += delta + 1;
        at += LOG_OVERHEAD + length;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Produce 0–9 and ShareFetch 1–2, as the broker serves them.
    const SERVED: &[Api] = &[
        Api {
            key: ApiKey::Produce,
            min: 0,
            max: 9,
        },
        Api {
            key: ApiKey::ShareFetch,
            min: 1,
            max: 2,
        },
    ];

    #[test]
    fn request_figures_land_in_their_api_and_version_or_in_unknown() {
        let metrics = Metrics::new(SERVED);
        metrics.request(0, 9, Duration::from_millis(2), false);
        metrics.request(0, 9, Duration::from_millis(3), true);
        metrics.request(0, 99, Duration::from_millis(1), true);
        metrics.request(9999, 0, Duration::from_millis(1), false);
        metrics.request(-1, -1, Duration::from_millis(1), false);
        // ShareFetch (key 78) v1, its lowest served version.
        metrics.request(78, 1, Duration::from_millis(1), false);
        assert_eq!(metrics.requests.stats(78, 1).count.get(), 1);
        let produce = metrics.requests.stats(0, 9);
        assert_eq!(produce.count.get(), 2);
        assert_eq!(produce.errors.get(), 1);
        assert_eq!(metrics.requests.unknown.count.get(), 3);
        assert_eq!(metrics.requests.unknown.errors.get(), 1);
    }

    #[test]
    fn throttled_clients_are_bounded() {
        let metrics = Metrics::new(SERVED);
        for i in 0..MAX_THROTTLED_CLIENTS + 5 {
            metrics.record_throttle(&format!("c{i}"), 10);
        }
        metrics.record_throttle("c0", 5);
        metrics.record_throttle("c1", 0);
        let throttles = lock(&metrics.throttles);
        assert_eq!(throttles.len(), MAX_THROTTLED_CLIENTS + 1);
        assert_eq!(throttles["c0"].millis, 15);
        assert_eq!(throttles["c0"].responses, 2);
        assert_eq!(throttles["c1"].responses, 1);
        assert_eq!(throttles[OTHER_CLIENTS].responses, 5);
        assert_eq!(throttles[OTHER_CLIENTS].millis, 50);
    }

    #[test]
    fn records_are_counted_from_batch_headers() {
        use log_core::batch::build;
        let record = |v: &'static str| (None, Some(v.as_bytes()), 0);
        let one = build(&[record("a")]);
        let three = build(&[record("a"), record("b"), record("c")]);
        let both = [one.as_ref(), three.as_ref()].concat();
        assert_eq!(count_records(&both), 4);
        assert_eq!(
            count_records(&both[..both.len() - 1]),
            4,
            "a torn tail batch still has a header"
        );
        assert_eq!(count_records(&[]), 0);
        assert_eq!(count_records(&both[..10]), 0);
    }

    #[test]
    fn tenants_show_as_text_with_control_characters_escaped() {
        assert_eq!(super::tenant_label(b"acme"), "acme");
        assert_eq!(super::tenant_label(b""), "\"\"");
        assert_eq!(super::tenant_label(b"a\x1bb\n"), "a\\u{1b}b\\u{a}");
        assert_eq!(super::tenant_label(b"x\xffy"), "x\u{fffd}y");
    }
}
