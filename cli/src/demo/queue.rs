//! The task workers: share groups (task queues) on the task topic, each with the same workers
//! doing each reply task in the plan's time. One group takes the tenants in fair turns by the
//! `tenant` header; the other serves in offset order, for contrast. Each delivery's wait (its
//! record's timestamp to its delivery) is counted per tenant.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use consumer::{Admin, ClientConfig, QueueConsumer};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::plan::{Plan, TENANTS};
use super::stats::Shared;
use super::tenants::{SEQ_HEADER, TENANT_HEADER};

/// Workers per group: together they finish about 175 tasks a second, under the flood's rate.
pub const WORKERS: usize = 3;
/// Tasks a worker takes per receive.
const BATCH: usize = 5;

/// A share group of the story: its name suffix and its `lograil.share.fairness.key`.
#[derive(Debug, Clone, Copy)]
pub struct GroupKind {
    pub label: &'static str,
    pub fairness: &'static str,
}

/// The groups, in the order the stats, the table and the report keep them.
pub const GROUPS: [GroupKind; 2] = [
    GroupKind {
        label: "fair",
        fairness: "header:tenant",
    },
    GroupKind {
        label: "fifo",
        fairness: "none",
    },
];

/// Sets the group's configs: read from the start, and its fair turns (none: offset order, every
/// broker's default, left unset). A broker that refuses lograil's fairness setting (Apache
/// Kafka) still runs the group in offset order; the returned note says so.
pub async fn configure(
    admin: &mut Admin,
    group: &str,
    kind: GroupKind,
) -> anyhow::Result<Option<String>> {
    admin
        .alter_group_configs(group, &[("share.auto.offset.reset", "earliest")])
        .await
        .with_context(|| format!("configuring share group {group}"))?;
    if kind.fairness == "none" {
        return Ok(None);
    }
    match admin
        .alter_group_configs(group, &[("lograil.share.fairness.key", kind.fairness)])
        .await
    {
        Ok(()) => Ok(None),
        Err(e) => Ok(Some(format!(
            "share group {group}: lograil.share.fairness.key={} refused ({e}); it runs in offset order",
            kind.fairness
        ))),
    }
}

/// The tenant of a delivery, as one of [`TENANTS`].
fn tenant_of(value: Option<&[u8]>) -> Option<&'static str> {
    TENANTS.into_iter().find(|t| Some(t.as_bytes()) == value)
}

/// What every worker of the story shares.
#[derive(Debug, Clone)]
pub struct Crew {
    pub client: ClientConfig,
    pub topic: String,
    pub plan: Arc<Plan>,
    pub stats: Shared,
    pub stop: watch::Receiver<bool>,
}

/// One worker of group `index`: receives, waits the task's time, acknowledges; until `stop`
/// turns true.
async fn worker(mut crew: Crew, index: usize) -> anyhow::Result<()> {
    let queue =
        QueueConsumer::from_config(&crew.client.with("max.poll.records", BATCH.to_string()))
            .await
            .context("starting a task worker")?;
    queue.subscribe(&[crew.topic.as_str()]);
    while !*crew.stop.borrow() {
        let deliveries = tokio::select! {
            r = queue.receive(Duration::from_millis(200)) => r.context("receiving tasks")?,
            _ = crew.stop.changed() => break,
        };
        for d in deliveries {
            let now = log_core::now_ms();
            let wait = u64::try_from(now - d.timestamp).unwrap_or(0);
            let seq: Option<u64> = d
                .header(SEQ_HEADER)
                .and_then(|s| std::str::from_utf8(s).ok())
                .and_then(|s| s.parse().ok());
            let tenant = tenant_of(d.header(TENANT_HEADER));
            let event = seq.and_then(|s| crew.plan.events.get(s as usize));
            if let Some(e) = event {
                tokio::time::sleep(Duration::from_millis(e.task_ms)).await;
            }
            d.ack();
            let (Some(seq), Some(tenant), Some(e)) = (seq, tenant, event) else {
                continue;
            };
            let flood = crew.plan.flooding(e.at_ms);
            let mut s = crew.stats.lock();
            let q = &mut s.queues[index];
            if q.done.insert(seq) {
                q.second.entry(tenant).or_default().push(wait);
                q.all.entry(tenant).or_default().push(wait);
                if flood {
                    q.flood.entry(tenant).or_default().push(wait);
                }
            }
        }
    }
    queue.close().await.context("closing a task worker")?;
    Ok(())
}

/// Starts [`WORKERS`] workers of the share group `group` (index `index` in [`GROUPS`]).
pub fn start(crew: &Crew, group: &str, index: usize) -> Vec<JoinHandle<anyhow::Result<()>>> {
    (0..WORKERS)
        .map(|_| {
            let mut crew = crew.clone();
            crew.client.set("group.id", group);
            tokio::spawn(worker(crew, index))
        })
        .collect()
}
