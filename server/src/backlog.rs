//! Backlog-bounded topics (beyond Kafka): a topic config bounds how far a named consumer group
//! may fall behind, in records and/or in age, and producers to the topic are pushed back when
//! it has: throttled (a `throttle_time_ms` sized from the group's drain rate, the connection
//! muted as for a quota) or, in `reject` mode, refused with
//! POLICY_VIOLATION and a message saying why. When the group catches up, the push-back lifts.
//!
//! The throttle is sized like a quota's once the group's drain rate is known: the broker samples,
//! as it measures the backlog, the group's committed offsets and the topic's log end (all
//! partitions together, see [`RateMeter`]), and a producer over the bound gets the delay that
//! brings the topic's accepted rate down to the rate the group drains it (Kafka's quota rule,
//! `(observed - allowed) / allowed × window`), a little less while the backlog is over the bound
//! so that it shrinks back to it: producers are slowed to the consumers' pace rather than stopped
//! and then flushed in a burst. Until the drain rate is known (under a second of samples, or a
//! group whose commits did not advance in [`DRAIN_WINDOW`]: stopped, or committing rarely) the
//! throttle grows with how far over the bound the backlog is, as it always did.
//!
//! The group is a consumer group (its committed offsets) or a share group (its share-partition
//! start offsets, SPSO: every record below is finished; a share partition no member has fetched
//! yet counts from the log start, as a partition without a commit does).
//!
//! Topic configs (set like any other: CreateTopics, kafka-configs, `lograil topic create
//! --config`; kept with the topic):
//!
//! - `lograil.backlog.group`: the consumer or share group whose backlog is bounded (no bound
//!   without it);
//! - `lograil.backlog.max.records`: records the group may have left to read, all partitions
//!   together (log end minus committed offset or SPSO; a partition without either counts from
//!   its log start);
//! - `lograil.backlog.max.age.ms`: the age of its oldest unread record: how long ago the broker
//!   appended it (by an append clock sampled as produces arrive, see [`AppendClock`]; the first
//!   timestamp of the batch holding the committed offset when the clock started after it);
//! - `lograil.backlog.mode`: `throttle` (the default) or `reject`.
//!
//! The backlog is measured at most every [`REFRESH`] per topic (on the blocking pool: it may
//! read a segment), not per record.
//!
//! Why POLICY_VIOLATION for `reject`: it is not retriable, so every client reports it to the
//! application at once, with the broker's message where the client shows messages (the Java
//! client, Produce v8+); THROTTLING_QUOTA_EXCEEDED is retriable in the Java client, which would
//! retry quietly until its delivery timeout.

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use log_core::{ConfigError, Topic, TopicConfig};

pub const GROUP: &str = "lograil.backlog.group";
pub const MAX_RECORDS: &str = "lograil.backlog.max.records";
pub const MAX_AGE_MS: &str = "lograil.backlog.max.age.ms";
pub const MODE: &str = "lograil.backlog.mode";
/// The read-only entry of DescribeConfigs with the backlog now.
pub const STATE: &str = "lograil.backlog.state";
const NAMES: [&str; 4] = [GROUP, MAX_RECORDS, MAX_AGE_MS, MODE];

/// How old a measured backlog may be before the next produce measures it again.
pub const REFRESH: Duration = Duration::from_millis(100);
/// The throttle just over a records bound; it grows by [`THROTTLE_PER_OVER`] per bound's worth
/// over. Over an age bound, the throttle is the excess age itself: about the time the group
/// needs, at its own pace, to be back within the bound while producers wait; a coarser one
/// makes producers stop and then flood (measured with `lograil-bench spike`: with 1 s per
/// bound's worth, a 500 ms bound throttled for seconds at a time and goodput never recovered).
const THROTTLE_BASE: Duration = Duration::from_millis(100);
const THROTTLE_PER_OVER: Duration = Duration::from_secs(1);
/// The least throttle a producer over a bound gets.
const MIN_THROTTLE: Duration = Duration::from_millis(10);
/// How long the samples of the drain rate go back: long enough for a group committing every
/// few seconds (the Java consumer's auto-commit default is 5 s) to show an advance.
pub const DRAIN_WINDOW: Duration = Duration::from_secs(5);
/// The window the producers' accepted rate is measured over, and the `window` of the quota
/// rule: the throttle that would bring the rate over it down to the allowed rate.
pub const APPEND_WINDOW: Duration = Duration::from_secs(2);
/// Rates measured over less than this are not known yet.
const MIN_SPAN: Duration = Duration::from_secs(1);
/// Over the bound, the allowed rate is the drain rate less the excess backlog spread over this
/// long (the backlog is back at the bound in about that time), but at least
/// [`MIN_ALLOWED_SHARE`] of the drain rate.
const CATCH_UP: Duration = Duration::from_secs(2);
const MIN_ALLOWED_SHARE: f64 = 0.5;

/// Whether `name` is one of the backlog configs.
pub fn is_backlog_config(name: &str) -> bool {
    NAMES.contains(&name)
}

/// Checks one backlog config and sets it in `config` (`-1`, or an empty group, unsets it).
pub fn set(config: &mut TopicConfig, name: &str, value: &str) -> Result<(), ConfigError> {
    let value = value.trim();
    let unset = match name {
        GROUP => value.is_empty(),
        MAX_RECORDS | MAX_AGE_MS => {
            let n: i64 = value.parse().map_err(|_| ConfigError::NotANumber {
                name: name.into(),
                value: value.into(),
            })?;
            if n != -1 && n < 1 {
                return Err(ConfigError::OutOfRange {
                    name: name.into(),
                    value: n,
                    min: 1,
                    max: i64::MAX,
                });
            }
            n == -1
        }
        MODE => {
            if !matches!(value, "throttle" | "reject") {
                return Err(ConfigError::Unsupported {
                    name: name.into(),
                    value: value.into(),
                    supported: "throttle or reject",
                });
            }
            false
        }
        _ => return Err(ConfigError::Unknown { name: name.into() }),
    };
    if unset {
        config.extra.remove(name);
    } else {
        config.extra.insert(name.to_string(), value.to_string());
    }
    Ok(())
}

/// Puts a backlog config back to its default (unset).
pub fn reset(config: &mut TopicConfig, name: &str) {
    config.extra.remove(name);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Throttle,
    Reject,
}

/// A topic's bound, from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bound {
    pub group: String,
    pub max_records: Option<i64>,
    pub max_age_ms: Option<i64>,
    pub mode: Mode,
}

impl Bound {
    /// `None` without a group or without a limit.
    pub fn of(config: &TopicConfig) -> Option<Bound> {
        if config.extra.is_empty() {
            return None;
        }
        let group = config.extra.get(GROUP)?.clone();
        let number = |name| config.extra.get(name).and_then(|v| v.parse::<i64>().ok());
        let bound = Bound {
            group,
            max_records: number(MAX_RECORDS),
            max_age_ms: number(MAX_AGE_MS),
            mode: match config.extra.get(MODE).map(String::as_str) {
                Some("reject") => Mode::Reject,
                _ => Mode::Throttle,
            },
        };
        (bound.max_records.is_some() || bound.max_age_ms.is_some()).then_some(bound)
    }
}

/// A topic's backlog as last measured.
#[derive(Debug, Clone)]
pub struct State {
    pub records: i64,
    /// Age of the oldest unread record; `None` when nothing is unread or no age bound is set.
    pub age_ms: Option<i64>,
    /// How far over the bound, in bounds (0.5: half a bound over); 0 or less within it.
    pub over: f64,
    /// How far over the records bound, in bounds (negative within it or without one).
    over_records: f64,
    /// Age past the age bound, ms (0 within it or without one).
    excess_age_ms: i64,
    /// Records per second the group's committed offsets advance; `None` until known.
    pub drain_per_sec: Option<f64>,
    /// Records per second appended to the topic, over about [`APPEND_WINDOW`], and that span.
    appended: Option<(f64, Duration)>,
    measured: Instant,
}

impl State {
    pub fn is_over(&self) -> bool {
        self.over > 0.0
    }

    /// The read-only DescribeConfigs value: `records=N [age_ms=N] over_bound=BOOL
    /// [drain_per_s=N]` (spaces: Kafka's tools print configs separated by commas); the drain
    /// rate once known, as the throttle is then sized from it.
    pub fn describe(&self) -> String {
        let mut text = format!("records={}", self.records);
        if let Some(age) = self.age_ms {
            text += &format!(" age_ms={age}");
        }
        text += &format!(" over_bound={}", self.is_over());
        if let Some(drain) = self.drain_per_sec {
            text += &format!(" drain_per_s={drain:.0}");
        }
        text
    }
}

/// What a produce to a bounded topic gets.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Accept,
    Throttle(Duration),
    Reject(String),
}

/// The last measured backlog of every bounded topic.
#[derive(Debug, Default)]
pub struct Backlogs {
    states: Mutex<HashMap<String, State>>,
    clocks: Mutex<HashMap<String, AppendClock>>,
    meters: Mutex<HashMap<String, RateMeter>>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Samples kept per partition by [`AppendClock`] (at one per produce, at most every
/// [`REFRESH`]: minutes of backlog).
const CLOCK_SAMPLES: usize = 4096;

/// When the broker last saw each bounded partition's log end at a value: (log end, instant)
/// samples, taken as produces measure the backlog (right before they append): the records
/// after a sample's log end were appended after its instant. The age bound is timed by it,
/// not by the records' own timestamps: a record that waited in a throttled producer is not old
/// to the group, and timing the bound by producers' timestamps throttles them for their own
/// waiting (measured with `lograil-bench spike`: throttles of seconds, then floods, goodput
/// never recovering).
#[derive(Debug, Default)]
struct AppendClock {
    partitions: Vec<VecDeque<(i64, Instant)>>,
}

impl AppendClock {
    /// Notes that partition `index` ends at `end` now and returns how long ago the record at
    /// `committed` was appended: at most since the last sample at or below it. `None` when the
    /// clock holds no such sample (it started with the backlog already there).
    fn age_of(&mut self, index: usize, committed: i64, end: i64, now: Instant) -> Option<Duration> {
        if self.partitions.len() <= index {
            self.partitions.resize_with(index + 1, VecDeque::new);
        }
        let samples = &mut self.partitions[index];
        if samples.back().is_some_and(|&(seen, _)| seen > end) {
            // Records deleted or the topic re-created: start again.
            samples.clear();
        }
        match samples.back_mut() {
            Some((seen, at)) if *seen == end => *at = now,
            _ => samples.push_back((end, now)),
        }
        while samples.len() > CLOCK_SAMPLES
            || samples.len() > 1 && samples.get(1).is_some_and(|&(seen, _)| seen <= committed)
        {
            samples.pop_front();
        }
        match samples.front() {
            Some(&(seen, at)) if seen <= committed && committed < end => {
                Some(now.saturating_duration_since(at))
            }
            _ => None,
        }
    }
}

/// Samples of a bounded topic's offsets, all partitions together: (instant, the group's
/// committed offsets summed, the log ends summed), one per measure of the backlog (at most
/// every [`REFRESH`] while producers produce), going back [`DRAIN_WINDOW`] (and one sample
/// before it, so that the span covers the window).
#[derive(Debug, Default)]
struct RateMeter {
    samples: VecDeque<(Instant, i64, i64)>,
}

impl RateMeter {
    fn note(&mut self, now: Instant, committed: i64, end: i64) {
        if self
            .samples
            .back()
            .is_some_and(|&(_, c, e)| committed < c || end < e)
        {
            // Offsets reset or records deleted: the old samples say nothing of the new pace.
            self.samples.clear();
        }
        self.samples.push_back((now, committed, end));
        while self
            .samples
            .get(1)
            .is_some_and(|&(at, _, _)| now.saturating_duration_since(at) >= DRAIN_WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// Records per second the group drains while it has records to drain: the committed
    /// offsets' advance over the spans between samples in which the group was busy throughout
    /// (it did not consume all it had at the span's start); `None` under [`MIN_SPAN`] of such
    /// spans or when they did not advance (a stopped group, or one committing more rarely than
    /// the window). A group that caught up drains only as fast as records arrive: counting
    /// those spans would take the producers' throttled pace for the group's, and throttle them
    /// further (measured with `lograil-bench spike`: stalls of 10 s).
    fn drain_per_sec(&self) -> Option<f64> {
        let (mut advance, mut busy) = (0i64, Duration::ZERO);
        for (&(from_at, from, from_end), &(to_at, to, _)) in
            self.samples.iter().zip(self.samples.iter().skip(1))
        {
            if from_end - from > to - from {
                advance += to - from;
                busy += to_at.saturating_duration_since(from_at);
            }
        }
        (busy >= MIN_SPAN && advance > 0).then(|| advance as f64 / busy.as_secs_f64())
    }

    /// Records per second appended, from the last sample at least [`APPEND_WINDOW`] old (or the
    /// oldest) to the newest, and that span; `None` under [`MIN_SPAN`].
    fn appended_per_sec(&self) -> Option<(f64, Duration)> {
        let &(last, _, to) = self.samples.back()?;
        let &(first, _, from) = self
            .samples
            .iter()
            .rev()
            .find(|&&(at, _, _)| last.saturating_duration_since(at) >= APPEND_WINDOW)
            .or(self.samples.front())?;
        let span = last.saturating_duration_since(first);
        (span >= MIN_SPAN).then(|| ((to - from) as f64 / span.as_secs_f64(), span))
    }
}

/// The rate producers may append at: the drain rate, less the backlog over the bound
/// (`excess_records`) spread over [`CATCH_UP`], at least [`MIN_ALLOWED_SHARE`] of the drain.
fn allowed_rate(drain_per_sec: f64, excess_records: f64) -> f64 {
    (drain_per_sec - excess_records.max(0.0) / CATCH_UP.as_secs_f64())
        .max(drain_per_sec * MIN_ALLOWED_SHARE)
}

/// Kafka's quota rule: the delay that brings a rate `observed` over `window` down to
/// `allowed` (`(observed - allowed) / allowed × window`; zero when within it).
fn rate_throttle(observed: f64, allowed: f64, window: Duration) -> Duration {
    if observed <= allowed || allowed <= 0.0 {
        return Duration::ZERO;
    }
    window.mul_f64(((observed - allowed) / allowed).min(1e6))
}

impl Backlogs {
    /// Measures `topic`'s backlog for `bound` now. With an age bound, a partition whose append
    /// clock started with a backlog reads the batch at the committed offset for its timestamp:
    /// call it off the async workers.
    /// `position(partition)` is where the group is on a partition (its committed offset or
    /// SPSO), `None` if nowhere yet.
    pub fn measure(
        &self,
        position: impl Fn(i32) -> Option<i64>,
        topic: &Topic,
        bound: &Bound,
    ) -> State {
        let now = now_ms();
        let now_instant = Instant::now();
        let mut records = 0i64;
        let (mut committed_sum, mut end_sum) = (0i64, 0i64);
        let mut oldest: Option<i64> = None;
        let mut clocks = self.clocks.lock().unwrap_or_else(PoisonError::into_inner);
        let clock = clocks.entry(topic.name().to_string()).or_default();
        for (index, partition) in (0..).zip(topic.partitions()) {
            let start = partition.log_start_offset();
            let end = partition.log_end_offset();
            let committed = position(index).unwrap_or(start).clamp(start, end);
            records += end - committed;
            committed_sum = committed_sum.saturating_add(committed);
            end_sum = end_sum.saturating_add(end);
            if committed < end && bound.max_age_ms.is_some() {
                let slot = usize::try_from(index).unwrap_or(usize::MAX);
                if let Some(age) = clock.age_of(slot, committed, end, now_instant) {
                    let appended = now - i64::try_from(age.as_millis()).unwrap_or(i64::MAX);
                    oldest = Some(oldest.map_or(appended, |o: i64| o.min(appended)));
                    continue;
                }
                let first = partition
                    .read(committed, 1)
                    .ok()
                    .and_then(|read| record_batch::BatchHeader::read(&read.records).ok())
                    .map(|header| header.base_timestamp);
                if let Some(ts) = first {
                    oldest = Some(oldest.map_or(ts, |o: i64| o.min(ts)));
                }
            }
        }
        drop(clocks);
        let (drain_per_sec, appended) = {
            let mut meters = self.meters.lock().unwrap_or_else(PoisonError::into_inner);
            let meter = meters.entry(topic.name().to_string()).or_default();
            meter.note(now_instant, committed_sum, end_sum);
            (meter.drain_per_sec(), meter.appended_per_sec())
        };
        let age_ms = oldest.map(|ts| (now - ts).max(0));
        let over_records = bound
            .max_records
            .map_or(f64::MIN, |max| (records - max) as f64 / max as f64);
        let over_age = match (bound.max_age_ms, age_ms) {
            (Some(max), Some(age)) => (age - max) as f64 / max as f64,
            _ => f64::MIN,
        };
        let excess_age_ms = match (bound.max_age_ms, age_ms) {
            (Some(max), Some(age)) => (age - max).max(0),
            _ => 0,
        };
        State {
            records,
            age_ms,
            over: over_records.max(over_age),
            over_records,
            excess_age_ms,
            drain_per_sec,
            appended,
            measured: Instant::now(),
        }
    }

    /// The last measure of `topic`'s backlog, unless older than [`REFRESH`].
    pub fn fresh(&self, topic: &str) -> Option<State> {
        let states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        states
            .get(topic)
            .filter(|s| s.measured.elapsed() < REFRESH)
            .cloned()
    }

    /// Keeps a measure of `topic`'s backlog.
    pub fn store(&self, topic: &str, state: State) {
        let mut states = self.states.lock().unwrap_or_else(PoisonError::into_inner);
        // Topics whose bound went away, or that were deleted, are dropped as they go stale.
        states.retain(|_, s| s.measured.elapsed() < REFRESH * 100);
        states.insert(topic.to_string(), state);
        let mut clocks = self.clocks.lock().unwrap_or_else(PoisonError::into_inner);
        clocks.retain(|name, _| states.contains_key(name));
        drop(clocks);
        let mut meters = self.meters.lock().unwrap_or_else(PoisonError::into_inner);
        meters.retain(|name, _| states.contains_key(name));
    }

    /// What a produce to `topic`, bounded by `bound` and measured at `state`, gets now; a
    /// throttle is at most `cap`.
    pub fn verdict(topic: &str, bound: &Bound, state: &State, cap: Duration) -> Verdict {
        if !state.is_over() {
            return Verdict::Accept;
        }
        match bound.mode {
            Mode::Reject => Verdict::Reject(format!(
                "topic {topic}: the backlog of group {} is over its bound ({}; \
                 lograil.backlog.max.records={}, lograil.backlog.max.age.ms={}); produce \
                 again once the group has caught up (lograil.backlog.mode=reject)",
                bound.group,
                state.describe(),
                bound.max_records.map_or("-1".into(), |n| n.to_string()),
                bound.max_age_ms.map_or("-1".into(), |n| n.to_string()),
            )),
            Mode::Throttle => Verdict::Throttle(Self::throttle(bound, state).min(cap)),
        }
    }

    /// The throttle of a produce over `bound` in throttle mode, measured at `state`: sized from
    /// the drain rate when it is known, else by how far over the bound the backlog is.
    fn throttle(bound: &Bound, state: &State) -> Duration {
        match (state.drain_per_sec, state.appended) {
            (Some(drain), Some((observed, window))) => {
                let excess_records = bound
                    .max_records
                    .map_or(0.0, |max| (state.records - max) as f64);
                let excess_by_age = drain * state.excess_age_ms as f64 / 1000.0;
                let allowed = allowed_rate(drain, excess_records.max(excess_by_age));
                // At most the time the group needs to drain the backlog it has: muted longer,
                // the group would sit idle while producers wait (measured with
                // `lograil-bench spike`: a slow second of the group's made for throttles of 8 s).
                let drain_time = Duration::from_secs_f64((state.records as f64 / drain).min(1e6));
                rate_throttle(observed, allowed, window.min(APPEND_WINDOW))
                    .min(drain_time)
                    .max(MIN_THROTTLE)
            }
            _ => {
                let by_records = match state.over_records > 0.0 {
                    true => THROTTLE_BASE + THROTTLE_PER_OVER.mul_f64(state.over_records.min(1e6)),
                    false => Duration::ZERO,
                };
                let by_age = Duration::from_millis(state.excess_age_ms.unsigned_abs());
                by_records.max(by_age).max(MIN_THROTTLE)
            }
        }
    }
}

#[cfg(test)]
mod tests;
