//! The three tenants' webhook traffic: each event of the plan, at its time, as a keyed record
//! to the webhook topic (for the retry chain) and to the task topic (for the task queue).

use std::time::Instant;

use anyhow::Context;
use consumer::{Producer, ProducerRecord};
use serde_json::json;

use super::plan::{Event, Plan};
use super::stats::Shared;

/// The header naming the tenant: the task queue's fair turns go by it.
pub const TENANT_HEADER: &str = "tenant";
/// The header holding the event's `seq`.
pub const SEQ_HEADER: &str = "demo-seq";

/// The message type every worker can handle, and the one the poison record has.
const TEXT: &str = "text";
pub const POISON_TYPE: &str = "sticker";

/// The record value of `event`: what a messaging provider's webhook would carry.
pub fn payload(event: &Event, poison: bool) -> String {
    json!({
        "seq": event.seq,
        "tenant": event.tenant,
        "conversation": event.key,
        "type": if poison { POISON_TYPE } else { TEXT },
        "text": format!("message {} of {}", event.seq, event.key),
    })
    .to_string()
}

fn now_ms() -> i64 {
    log_core::now_ms()
}

/// Sends every event of `plan` at its time after `start` to both topics; returns once all are
/// acknowledged (an unacknowledged record is an error: the counts would not add up).
pub async fn play(
    producer: &Producer,
    plan: &Plan,
    start: Instant,
    topics: (&str, &str),
    stats: &Shared,
) -> anyhow::Result<()> {
    let mut pending = Vec::with_capacity(plan.events.len() * 2);
    for event in &plan.events {
        let due = start + std::time::Duration::from_millis(event.at_ms);
        tokio::time::sleep_until(due.into()).await;
        let value = payload(event, event.seq == plan.poison);
        let ts = now_ms();
        for topic in [topics.0, topics.1] {
            let record = ProducerRecord::new(topic)
                .key(event.key.clone())
                .value(value.clone())
                .header(TENANT_HEADER, event.tenant)
                .header(SEQ_HEADER, event.seq.to_string())
                .timestamp(ts);
            let sent = producer
                .send(record)
                .await
                .with_context(|| format!("sending event {} to {topic}", event.seq))?;
            pending.push((event.seq, sent));
        }
        stats.lock().produced += 1;
    }
    for (seq, sent) in pending {
        sent.await
            .with_context(|| format!("event {seq} was not acknowledged"))?;
    }
    Ok(())
}
