//! The webhook workers: a retrying consumer (the `retry-topic` crate) on the webhook topic.
//! Each worker parses the event and stores it downstream, which takes the plan's latency. The
//! poison record fails every attempt, so the chain moves it through the retry topics into the
//! dead-letter topic while its partition goes on; while the downstream is down every record
//! fails, and the chain's outage budget pauses it and probes instead of spending attempts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use consumer::ClientConfig;
use retry_topic::{Delivery, Event, HandlerError, OutageBudget, RetryConfig, RetryingConsumer};

use super::plan::Plan;
use super::stats::Shared;
use super::tenants::POISON_TYPE;

/// The error classes the workers fail with, as the dead-letter topic names them.
pub const UNSUPPORTED: &str = "demo.UnsupportedMessageType";
pub const UNAVAILABLE: &str = "demo.DownstreamUnavailable";

/// The chain's settings: two retry stages (0.5 s, 1 s), three attempts, and an outage budget
/// small enough to notice a few seconds' outage of this traffic.
pub fn config(topic: &str, group: &str) -> RetryConfig {
    RetryConfig::new(topic, group)
        .delays([Duration::from_millis(500), Duration::from_millis(1000)])
        .max_attempts(3)
        .commit_interval(Duration::from_millis(200))
        .outage(Some(OutageBudget {
            window: 10,
            failure_ratio: 0.8,
            probe_interval: Duration::from_millis(500),
            probe_max: Duration::from_millis(1000),
        }))
}

/// Handles one delivery: the poison record and every record during the outage fail.
async fn handle(
    d: Delivery,
    plan: Arc<Plan>,
    start: Instant,
    stats: Shared,
    main: Arc<str>,
) -> Result<(), HandlerError> {
    let value = d.record.value.as_deref().unwrap_or_default();
    let event: serde_json::Value = serde_json::from_slice(value).map_err(|e| {
        HandlerError::fatal(HandlerError::new("demo.MalformedEvent", e.to_string()))
    })?;
    let seq = event["seq"].as_u64().unwrap_or(u64::MAX);
    let latency = plan.events.get(seq as usize).map_or(1000, |e| e.chain_us);
    tokio::time::sleep(Duration::from_micros(latency)).await;
    if event["type"] == POISON_TYPE {
        let mut s = stats.lock();
        s.poison.attempts = s.poison.attempts.max(d.attempt);
        if d.attempt == 1 {
            s.poison.partition = Some(d.record.partition);
            s.poison.offset = Some(d.record.offset);
        }
        return Err(HandlerError::new(
            UNSUPPORTED,
            format!("no renderer for message type {POISON_TYPE} (event {seq})"),
        ));
    }
    // A record no renderer takes fails as such, whether or not the store is up.
    let elapsed = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    if plan.down(elapsed) {
        return Err(HandlerError::new(
            UNAVAILABLE,
            format!("the message store answered 503 (event {seq})"),
        ));
    }
    let mut s = stats.lock();
    s.chain_done.insert(seq);
    let behind_poison = match (s.poison.partition, s.poison.offset) {
        (Some(p), Some(o)) => {
            *d.record.topic == *main && d.record.partition == p && d.record.offset > o
        }
        _ => false,
    };
    if behind_poison && !s.poison.dead_lettered {
        s.poison.passed_by += 1;
    }
    Ok(())
}

/// Counts what the chain did, from its events.
fn on_event(event: &Event, plan: &Plan, start: Instant, stats: &Shared) {
    let elapsed = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
    let mut s = stats.lock();
    match event {
        Event::Forwarded { .. } => {
            s.retried += 1;
            if plan.down(elapsed) {
                s.retried_in_outage += 1;
            }
        }
        Event::DeadLettered {
            topic,
            partition,
            offset,
            class,
            message,
            ..
        } => {
            if s.dead_lettered.insert((topic.clone(), *partition, *offset)) {
                *s.dead_classes.entry(class.clone()).or_default() += 1;
                if plan.down(elapsed) {
                    s.dead_in_outage += 1;
                }
            }
            if message.ends_with(&format!("(event {})", plan.poison)) {
                s.poison.dead_lettered = true;
            }
        }
        Event::OutageStarted { .. } => {
            s.paused = true;
            s.outage_detected_ms.get_or_insert(elapsed);
        }
        Event::ProbeFailed { .. } => s.failed_probes += 1,
        Event::OutageEnded => {
            s.paused = false;
            s.outage_ended_ms = Some(elapsed);
        }
        _ => {}
    }
}

/// The retrying consumer of the webhook topic, counting into `stats`.
pub async fn workers(
    client: &ClientConfig,
    config: RetryConfig,
    plan: Arc<Plan>,
    start: Instant,
    stats: Shared,
) -> anyhow::Result<RetryingConsumer> {
    let main: Arc<str> = Arc::from(config.topic.as_str());
    let (p, s) = (plan.clone(), stats.clone());
    let handler = move |d: Delivery| handle(d, p.clone(), start, s.clone(), main.clone());
    let consumer = RetryingConsumer::new(client, config, handler)
        .await?
        .on_event(move |e| on_event(e, &plan, start, &stats));
    Ok(consumer)
}
