//! The `/metrics` scrapes ([`http`] serves them): every metric family, encoded by
//! `prometheus-client` from the counters of [`crate::metrics::Metrics`] and from the broker's state as it is now (partitions, consumer groups, share
//! groups, streams groups). Reads the log (the timestamp of each group's oldest unconsumed record): run it on
//! the blocking pool.
//!
//! Lag, per consumer group and partition it has committed an offset for:
//!
//! - `lograil_consumer_group_lag_records`: log end offset − committed offset (the committed
//!   offset raised to the log start offset when retention deleted past it), never negative.
//! - `lograil_consumer_group_lag_seconds`: now − the timestamp of the record at the committed
//!   offset, the oldest the group has not consumed; 0 when caught up. Omitted when that record
//!   cannot be read (a damaged segment).
//! - `lograil_consumer_group_consume_rate`: records a second the committed offset advanced
//!   over about the last minute ([`crate::metrics::CONSUME_RATE_WINDOW`]), from samples taken at scrapes; no
//!   series before two scrapes a second apart, nor after the offset went backwards (a reset).
//! - `lograil_consumer_group_time_to_drain_seconds`: lag records / consume rate; 0 when caught
//!   up. **Omitted when the rate is 0 or unknown** (a stalled group never drains: alert on
//!   `lag_seconds` for that), rather than exposed as +Inf or NaN, which break `avg`/`sum` and
//!   alert thresholds alike.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt::Error;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use log_core::{batch, Partition};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::metrics::encode::{counter, family, gauge};

pub mod http;
mod shares;
mod streams;
use crate::broker::Broker;

/// How far back the consume rate of a group's partition looks (the rate of its committed
/// offset), for the time-to-drain estimate.
pub const CONSUME_RATE_WINDOW: Duration = Duration::from_secs(60);

/// A group's partition: (group, topic, partition).
type GroupPartition = (String, String, i32);
/// Offsets sampled at scrapes (or console page loads), oldest first.
pub(crate) type OffsetSamples = VecDeque<(Instant, i64)>;

/// What scrapes keep of a group's partition.
#[derive(Debug, Default)]
struct Tracked {
    samples: OffsetSamples,
    /// The timestamp of the record at the committed offset, once read: (topic id, offset,
    /// timestamp). Read again only when the offset moves (or the topic was re-created).
    oldest: Option<(log_core::Uuid, i64, i64)>,
}

/// Most bytes the records of one batch may decompress to when looking up a timestamp.
const TIMESTAMP_DECODE_MAX: usize = 8 << 20;

/// The scrapes of one broker: what they read, and what they keep from one scrape to the next
/// (committed-offset samples for consume rates, the timestamps of oldest records).
#[derive(Debug)]
pub struct Scraper {
    broker: Arc<Broker>,
    tracked: Mutex<HashMap<GroupPartition, Tracked>>,
}

impl Scraper {
    pub fn new(broker: Arc<Broker>) -> Scraper {
        Scraper {
            broker,
            tracked: Mutex::new(HashMap::new()),
        }
    }

    /// The whole exposition: OpenMetrics text, ending in `# EOF`. Reads the log: call it on
    /// the blocking pool.
    pub fn encode(self: &Arc<Self>) -> Result<String, Error> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape(self.clone())));
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &registry)?;
        Ok(out)
    }

    /// Every consumer group partition's lag now, groups in order: what the `lag` families
    /// expose, also for the web console. Notes a consume-rate sample (see [`consume_rate`]).
    /// Reads the log: call it on the blocking pool.
    pub fn lag(&self) -> Vec<Lag> {
        let broker = &self.broker;
        let now_ms = log_core::now_ms();
        let now = Instant::now();
        let mut rows = Vec::new();
        let mut consumed = self.tracked.lock().unwrap_or_else(PoisonError::into_inner);
        let mut seen = HashSet::new();
        let mut groups = broker.groups().offsets.groups();
        groups.sort();
        for group in groups {
            for ((topic, index), committed) in broker.groups().offsets.group_offsets(&group) {
                let Some(partition) = broker.storage().partition(&topic, index) else {
                    continue;
                };
                if committed.offset < 0 {
                    continue;
                }
                let start = partition.log_start_offset();
                let end = partition.log_end_offset();
                let next = committed.offset.max(start);
                let records = (end - next).max(0);
                let key = (group.clone(), topic.clone(), index);
                seen.insert(key.clone());
                let tracked = consumed.entry(key).or_default();
                let seconds = if records == 0 {
                    Some(0.0)
                } else {
                    let id = broker.storage().log.topic(&topic).map(|t| t.id());
                    let timestamp = match tracked.oldest {
                        Some((was, at, ts)) if Some(was) == id && at == next => Some(ts),
                        _ => {
                            let ts = timestamp_at(&partition, next);
                            tracked.oldest = id.zip(ts).map(|(id, ts)| (id, next, ts));
                            ts
                        }
                    };
                    timestamp.map(|ts| (now_ms - ts).max(0) as f64 / 1000.0)
                };
                let rate = consume_rate(&mut tracked.samples, committed.offset, now);
                rows.push(Lag {
                    group: group.clone(),
                    topic,
                    partition: index.to_string(),
                    committed: committed.offset,
                    end,
                    records,
                    seconds,
                    rate,
                });
            }
        }
        consumed.retain(|key, _| seen.contains(key));
        rows
    }
}

#[derive(Debug)]
struct Scrape(Arc<Scraper>);

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), Error> {
        let broker = &self.0.broker;
        let metrics = &broker.metrics();
        let existing: HashSet<String> = broker
            .storage()
            .log
            .topics()
            .iter()
            .map(|t| t.name().to_string())
            .collect();
        metrics.encode_counters(&existing, &mut encoder)?;
        partitions(broker, &mut encoder)?;
        lag(&self.0, &mut encoder)?;
        backlogs(broker, &mut encoder)?;
        shares::encode(broker, &mut encoder)?;
        streams::encode(broker, &mut encoder)?;
        Ok(())
    }
}

/// The log cleaner's view of each partition of the topics that compact.
fn cleaner(topics: &[Arc<log_core::Topic>], encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let now = log_core::now_ms();
    let compacted: Vec<(&str, String, log_core::Dirtiness, log_core::CleanerStats)> = topics
        .iter()
        .filter(|t| t.config().cleanup.compact)
        .flat_map(|t| {
            t.partitions()
                .iter()
                .enumerate()
                .map(move |(i, p)| (t.name(), i.to_string(), p.dirtiness(now), p.cleaner_stats()))
        })
        .collect();
    let mut f = family(
        encoder,
        "lograil_partition_cleaner_dirty_ratio",
        "Share of a compacted partition's closed segments not cleaned yet (the cleaner runs \
         at the topic's min.cleanable.dirty.ratio).",
        MetricType::Gauge,
    )?;
    for (topic, p, dirtiness, _) in &compacted {
        gauge(
            &mut f,
            &[("topic", *topic), ("partition", p.as_str())],
            dirtiness.ratio(),
        )?;
    }
    let mut f = family(
        encoder,
        "lograil_partition_cleaner_lag_seconds",
        "Age of the oldest record of a compacted partition the cleaner has not cleaned yet.",
        MetricType::Gauge,
    )?;
    for (topic, p, dirtiness, _) in &compacted {
        let lag = dirtiness.lag_ms(now) as f64 / 1000.0;
        gauge(&mut f, &[("topic", *topic), ("partition", p.as_str())], lag)?;
    }
    type Counter = (
        &'static str,
        &'static str,
        fn(&log_core::CleanerStats) -> u64,
    );
    let counters: [Counter; 3] = [
        (
            "lograil_partition_cleaner_runs",
            "Cleaner passes that compacted the partition since start-up.",
            |s| s.runs,
        ),
        (
            "lograil_partition_cleaner_bytes_cleaned",
            "Bytes of segments the cleaner read to compact the partition since start-up.",
            |s| s.bytes_read,
        ),
        (
            "lograil_partition_cleaner_records_removed",
            "Records compaction removed from the partition since start-up.",
            |s| s.records_removed,
        ),
    ];
    for (name, help, value) in counters {
        let mut f = family(encoder, name, help, MetricType::Counter)?;
        for (topic, p, _, stats) in &compacted {
            counter(
                &mut f,
                &[("topic", *topic), ("partition", p.as_str())],
                value(stats),
            )?;
        }
    }
    Ok(())
}

fn partitions(broker: &Broker, encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let topics = broker.storage().log.topics();
    let each = |encoder: &mut DescriptorEncoder,
                name: &str,
                help: &str,
                value: &dyn Fn(&Partition) -> i64|
     -> Result<(), Error> {
        let mut f = family(encoder, name, help, MetricType::Gauge)?;
        for topic in &topics {
            for (index, partition) in (0..).zip(topic.partitions()) {
                let index: u32 = index;
                let p = index.to_string();
                gauge(
                    &mut f,
                    &[("topic", topic.name()), ("partition", p.as_str())],
                    value(partition),
                )?;
            }
        }
        Ok(())
    };
    each(
        encoder,
        "lograil_partition_log_start_offset",
        "First offset the partition holds.",
        &|p| p.log_start_offset(),
    )?;
    each(
        encoder,
        "lograil_partition_log_end_offset",
        "Offset the next record appended to the partition gets.",
        &|p| p.log_end_offset(),
    )?;
    each(
        encoder,
        "lograil_partition_size_bytes",
        "Bytes of the partition's segment files.",
        &|p| i64::try_from(p.size_bytes()).unwrap_or(i64::MAX),
    )?;
    each(
        encoder,
        "lograil_partition_damaged_offsets",
        "Offsets of the partition that cannot be served: damaged data found by reads, \
         recovery or the scrubber (the broker's log and `topic describe` name file and bytes).",
        &|p| {
            p.damage()
                .iter()
                .map(|(_, d)| d.end_offset.saturating_sub(d.first_offset))
                .sum()
        },
    )?;
    cleaner(&topics, encoder)?;
    let mut f = family(
        encoder,
        "lograil_topics_offline",
        "Topics whose files could not be opened at start-up: not served (clients get \
         KAFKA_STORAGE_ERROR), their data kept.",
        MetricType::Gauge,
    )?;
    gauge(
        &mut f,
        &[("", ""); 0],
        broker.storage().log.offline_topics().len() as u64,
    )?;
    let stats = broker.storage().log.scrub_stats();
    let mut f = family(
        encoder,
        "lograil_log_scrub_passes",
        "Passes of the scrubber over every closed segment completed since start-up.",
        MetricType::Counter,
    )?;
    counter(&mut f, &[("", ""); 0], stats.passes.load(Ordering::Relaxed))?;
    let mut f = family(
        encoder,
        "lograil_log_scrubbed_bytes",
        "Bytes of closed segments the scrubber checked since start-up.",
        MetricType::Counter,
    )?;
    counter(&mut f, &[("", ""); 0], stats.bytes.load(Ordering::Relaxed))
}

/// The timestamp of the record at `offset` of `partition` (decoding the one batch holding it).
fn timestamp_at(partition: &Partition, offset: i64) -> Option<i64> {
    let read = partition.read(offset, 1).ok()?;
    let header = record_batch::BatchHeader::read(&read.records).ok()?;
    let whole = read.records.get(..header.size as usize)?;
    batch::decode_bounded(whole, TIMESTAMP_DECODE_MAX)
        .ok()?
        .into_iter()
        .find(|r| r.offset >= offset)
        .map(|r| r.timestamp)
}

/// Notes a group's committed `offset` on a partition at `now` in its `samples`, and
/// returns its consume rate (records a second) over about the last
/// [`CONSUME_RATE_WINDOW`]: `None` until two samples at least a second apart exist, or when
/// the offset went backwards (a reset). Samples are taken at scrapes.
pub(crate) fn consume_rate(samples: &mut OffsetSamples, offset: i64, now: Instant) -> Option<f64> {
    samples.push_back((now, offset));
    // Keep the newest sample older than the window, so the rate spans the whole window
    // once there is that much history.
    while samples.len() > 2
        && samples
            .get(1)
            .is_some_and(|(t, _)| now.duration_since(*t) >= CONSUME_RATE_WINDOW)
    {
        samples.pop_front();
    }
    let (t0, o0) = *samples.front()?;
    let elapsed = now.duration_since(t0).as_secs_f64();
    if elapsed < 1.0 || offset < o0 {
        return None;
    }
    Some((offset - o0) as f64 / elapsed)
}

/// One group partition's lag, computed for a scrape.
#[derive(Debug, Clone)]
pub struct Lag {
    pub group: String,
    pub topic: String,
    pub partition: String,
    pub committed: i64,
    /// The partition's log end offset.
    pub end: i64,
    pub records: i64,
    /// `None` when the oldest unconsumed record cannot be read (a damaged segment).
    pub seconds: Option<f64>,
    /// Records a second; `None` until known (see [`consume_rate`]).
    pub rate: Option<f64>,
}

impl Lag {
    /// Lag records / consume rate; 0 when caught up; `None` while the group does not advance.
    pub fn time_to_drain(&self) -> Option<f64> {
        match (self.records, self.rate) {
            (0, _) => Some(0.0),
            (records, Some(rate)) if rate > 0.0 => Some(records as f64 / rate),
            _ => None,
        }
    }
}

fn lag(scraper: &Scraper, encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let rows = scraper.lag();
    let labels = |l: &Lag| {
        [
            ("group", l.group.clone()),
            ("topic", l.topic.clone()),
            ("partition", l.partition.clone()),
        ]
    };
    {
        let mut f = family(
            encoder,
            "lograil_consumer_group_lag_records",
            "Records between the group's committed offset and the log end.",
            MetricType::Gauge,
        )?;
        for l in &rows {
            gauge(&mut f, &labels(l), l.records)?;
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_consumer_group_lag_seconds",
            "Age of the oldest record the group has not consumed (the one at its committed \
             offset); 0 when caught up.",
            MetricType::Gauge,
        )?;
        for l in &rows {
            if let Some(seconds) = l.seconds {
                gauge(&mut f, &labels(l), seconds)?;
            }
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_consumer_group_consume_rate",
            "Records a second the group's committed offset advanced over about the last minute.",
            MetricType::Gauge,
        )?;
        for l in &rows {
            if let Some(rate) = l.rate {
                gauge(&mut f, &labels(l), rate)?;
            }
        }
    }
    let mut f = family(
        encoder,
        "lograil_consumer_group_time_to_drain_seconds",
        "Lag records / consume rate: when the group catches up at its recent pace; 0 when caught \
         up; no series while the group does not advance.",
        MetricType::Gauge,
    )?;
    for l in &rows {
        if let Some(drain) = l.time_to_drain() {
            gauge(&mut f, &labels(l), drain)?;
        }
    }
    Ok(())
}

/// Backlog-bounded topics (`lograil.backlog.*`): the bounded group's backlog as measured now,
/// and the bound.
fn backlogs(broker: &Broker, encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let rows: Vec<_> = broker
        .storage()
        .log
        .topics()
        .into_iter()
        .filter_map(|topic| {
            let bound = crate::backlog::Bound::of(&topic.config())?;
            let state = broker.backlog().measure(&topic, &bound);
            Some((topic.name().to_string(), bound, state))
        })
        .collect();
    let labels = |(topic, bound, _): &(String, crate::backlog::Bound, _)| {
        [("topic", topic.clone()), ("group", bound.group.clone())]
    };
    {
        let mut f = family(
            encoder,
            "lograil_topic_backlog_records",
            "Records of a backlog-bounded topic its bounded group has not consumed.",
            MetricType::Gauge,
        )?;
        for row in &rows {
            gauge(&mut f, &labels(row), row.2.records)?;
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_topic_backlog_age_seconds",
            "Age of the oldest record of a backlog-bounded topic its group has not consumed (topics \
             with an age bound; 0 when none is unread).",
            MetricType::Gauge,
        )?;
        for row in rows.iter().filter(|r| r.1.max_age_ms.is_some()) {
            let age = row.2.age_ms.unwrap_or(0) as f64 / 1000.0;
            gauge(&mut f, &labels(row), age)?;
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_topic_backlog_max_records",
            "The topic's lograil.backlog.max.records.",
            MetricType::Gauge,
        )?;
        for row in &rows {
            if let Some(max) = row.1.max_records {
                gauge(&mut f, &labels(row), max)?;
            }
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_topic_backlog_max_age_seconds",
            "The topic's lograil.backlog.max.age.ms, in seconds.",
            MetricType::Gauge,
        )?;
        for row in &rows {
            if let Some(max) = row.1.max_age_ms {
                gauge(&mut f, &labels(row), max as f64 / 1000.0)?;
            }
        }
    }
    let mut f = family(
        encoder,
        "lograil_topic_backlog_over_bound",
        "1 while the topic's backlog is over its bound (producers are throttled or refused).",
        MetricType::Gauge,
    )?;
    for row in &rows {
        gauge(&mut f, &labels(row), i64::from(row.2.is_over()))?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::too_many_lines)]
mod tests;
