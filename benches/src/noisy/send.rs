//! Submitting a run's tasks: the flood split among producers, then the few tenants' tasks one
//! by one; or the throughput check's fill.

use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use consumer::{ClientConfig, Producer, ProducerRecord};

use super::NoisyArgs;
use crate::payload::{wall_us_now, Payload};

/// Producers the flood is split among, sending at once, so that it is in the queue before the
/// small tenants' tasks follow (one producer of one-record batches delivers ~1,000 a second).
const FLOOD_PRODUCERS: usize = 8;

/// Sends one task per entry of `order` (its tenant as the key), each stamped with its send
/// time. `one_by_one` (the noisy-neighbour runs): each task a batch of its own (a task queue's
/// producers submit tasks as they come, and share-group workers acquire whole batches), the
/// first `flood` tasks split among [`FLOOD_PRODUCERS`] producers and all acknowledged before
/// the rest is sent; else (the throughput fill) one producer, batches of about 20 tasks.
pub(super) async fn produce(
    args: &NoisyArgs,
    topic: &str,
    order: &[String],
    flood: usize,
    one_by_one: bool,
) -> anyhow::Result<()> {
    let topic: Arc<str> = Arc::from(topic);
    let (flood, rest) = order.split_at(flood.min(order.len()));
    if !one_by_one {
        let batch = (20 * (args.message_size + 30)).to_string();
        let producer = producer(args, &[("linger.ms", "5"), ("batch.size", &batch)]).await?;
        send_all(&producer, &topic, order, args.message_size).await?;
        producer.close().await;
        return Ok(());
    }
    let single = [("linger.ms", "0"), ("batch.size", "1")];
    let mut producers = Vec::new();
    for _ in 0..FLOOD_PRODUCERS {
        producers.push(Arc::new(producer(args, &single).await?));
    }
    let chunk = flood.len().div_ceil(FLOOD_PRODUCERS).max(1);
    let mut sends = Vec::new();
    for (producer, tasks) in producers.iter().zip(flood.chunks(chunk)) {
        let (producer, topic, tasks) = (producer.clone(), topic.clone(), tasks.to_vec());
        let size = args.message_size;
        sends.push(tokio::spawn(async move {
            send_all(&producer, &topic, &tasks, size).await
        }));
    }
    for send in sends {
        send.await??;
    }
    if let Some(first) = producers.first() {
        send_all(first, &topic, rest, args.message_size).await?;
    }
    for producer in producers {
        if let Ok(producer) = Arc::try_unwrap(producer) {
            producer.close().await;
        }
    }
    Ok(())
}

async fn producer(args: &NoisyArgs, extra: &[(&str, &str)]) -> anyhow::Result<Producer> {
    let mut config = ClientConfig::new()
        .with("bootstrap.servers", args.brokers.as_str())
        .with("acks", "1");
    for (k, v) in extra {
        config = config.with(*k, *v);
    }
    Producer::from_config(&config)
        .await
        .context("starting a producer")
}

/// Sends `tenants`' tasks in order and waits for every acknowledgement.
async fn send_all(
    producer: &Producer,
    topic: &Arc<str>,
    tenants: &[String],
    size: usize,
) -> anyhow::Result<()> {
    let mut payload = Payload::new(size);
    let mut pending = Vec::with_capacity(tenants.len());
    for tenant in tenants {
        payload.stamp(wall_us_now());
        let record = ProducerRecord::new(topic.clone())
            .partition(0)
            .key(Bytes::copy_from_slice(tenant.as_bytes()))
            .value(Bytes::copy_from_slice(payload.bytes()));
        pending.push(producer.send(record).await?);
    }
    for delivery in pending {
        delivery.await.context("a task was not acknowledged")?;
    }
    Ok(())
}
