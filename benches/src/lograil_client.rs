//! `--client lograil`: the same producer and consumer jobs as [`crate::produce`] and
//! [`crate::consume`], run with lograil's own client (the `consumer` crate) instead of
//! librdkafka, so the two are measured on the same broker with the same harness.
//!
//! Each job thread runs a tokio runtime of its own (`--tokio-workers`, default 2; 0 for a
//! current-thread runtime that runs the loop and the client's background tasks on the job's
//! thread). The librdkafka settings the harness builds are handed over as
//! Java client properties (the names shared by both clients); librdkafka-only ones are dropped.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Barrier, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::Bytes;
use consumer::{ClientConfig, Consumer, Producer, ProducerRecord, TopicPartition};

use crate::consume::{ConsumerJob, ConsumerOutcome};
use crate::payload::{read_stamp, wall_us_now, Payload};
use crate::produce::{ProducerJob, ProducerOutcome};

/// librdkafka settings the harness sets that the Java client (and lograil's) has no name for.
const LIBRDKAFKA_ONLY: &[&str] = &["statistics.interval.ms", "enable.auto.offset.store"];

fn translate(config: &rdkafka::ClientConfig) -> ClientConfig {
    let mut out = ClientConfig::new();
    // The keys from `config_map`, the values from `get`: `config_map` masks the sensitive ones
    // (sasl.password, ssl.key.password, ...).
    for k in config.config_map().into_keys() {
        if let (false, Some(v)) = (LIBRDKAFKA_ONLY.contains(&k), config.get(k)) {
            out.set(k, v);
        }
    }
    out
}

/// The job's tokio runtime: `threads` workers, or a current-thread runtime for 0.
fn runtime(threads: usize) -> anyhow::Result<tokio::runtime::Runtime> {
    if threads == 0 {
        return tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting a tokio runtime");
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .context("starting a tokio runtime")
}

/// As [`crate::produce::run_producer`], with lograil's producer.
pub fn run_producer(job: ProducerJob, start: &Barrier) -> anyhow::Result<ProducerOutcome> {
    let rt = match runtime(job.tokio_workers) {
        Ok(rt) => rt,
        Err(e) => {
            start.wait();
            return Err(e);
        }
    };
    let setup = rt.block_on(setup(&job));
    start.wait();
    let producer = setup?;
    let precise = job.tokio_workers > 0;
    rt.block_on(produce(job, producer, precise))
}

/// `--shared-runtime`: every producer job a task of one runtime of `--tokio-workers` threads
/// (at least one), so that a thousand producers are a thousand connections, not a thousand
/// threads; all released at once when every one has its producer. Outcomes in job order.
pub fn run_producers_shared(jobs: Vec<ProducerJob>) -> anyhow::Result<Vec<ProducerOutcome>> {
    let workers = jobs.first().map_or(1, |job| job.tokio_workers.max(1));
    let rt = runtime(workers)?;
    rt.block_on(async {
        let start = Arc::new(tokio::sync::Barrier::new(jobs.len()));
        // Connecting a thousand at the same instant overflows a broker's accept queue (Kafka's
        // `socket.listen.backlog.size` is 50): a few dozen at a time, as clients that start
        // one by one do.
        let connecting = Arc::new(tokio::sync::Semaphore::new(SETUPS_AT_ONCE));
        let tasks: Vec<_> = jobs
            .into_iter()
            .map(|job| {
                let (start, connecting) = (start.clone(), connecting.clone());
                tokio::spawn(async move {
                    let permit = connecting.acquire_owned().await;
                    let producer = setup(&job).await;
                    drop(permit);
                    start.wait().await;
                    // Paced by tokio's timer alone: a sleeping task must not hold a worker.
                    produce(job, producer?, false).await
                })
            })
            .collect();
        let mut outcomes = Vec::with_capacity(tasks.len());
        for task in tasks {
            outcomes.push(task.await.context("a producer task panicked")??);
        }
        Ok(outcomes)
    })
}

/// Producers of `--shared-runtime` that connect and fetch metadata at once.
const SETUPS_AT_ONCE: usize = 32;

/// The job's producer, with the topic's metadata.
async fn setup(job: &ProducerJob) -> anyhow::Result<Producer> {
    let producer = Producer::from_config(&translate(&job.config))
        .await
        .context("creating the producer (lograil client)")?;
    producer
        .partitions_for(&job.topic)
        .await
        .context("producer metadata")?;
    Ok(producer)
}

/// The job's records sent (paced with `--rate`; `precise`: see [`pace`]) and acknowledged.
async fn produce(
    job: ProducerJob,
    producer: Producer,
    precise: bool,
) -> anyhow::Result<ProducerOutcome> {
    // Delivery callbacks (run on the producer's task) record each acknowledgement, as
    // librdkafka's delivery reports do in the other client's jobs.
    let deliveries: Arc<Mutex<ProducerOutcome>> = Arc::default();
    let mut payload = Payload::new(job.message_size);
    let mut sent = 0u64;
    let mut first_send = None;
    let mut timed_out = false;
    let topic: Arc<str> = Arc::from(job.topic.as_str());
    let run_start = Instant::now();
    for n in 0..job.messages {
        let intended = match job.interval {
            Some(interval) => {
                let at = run_start + job.phase + interval.mul_f64(n as f64);
                pace(at, precise).await;
                at
            }
            None => Instant::now(),
        };
        if intended > job.deadline {
            timed_out = true;
            break;
        }
        first_send.get_or_insert(intended);
        payload.stamp(job.clock.wall_us(intended));
        let mut record =
            ProducerRecord::new(topic.clone()).value(Bytes::copy_from_slice(payload.bytes()));
        let mut bytes = payload.bytes().len() as u64;
        if let Some(key) = job.keys.get(n) {
            bytes += key.len() as u64;
            record = record.key(Bytes::copy_from_slice(key.as_bytes()));
        }
        let d = deliveries.clone();
        let acked_total = job.acked_total.clone();
        let epoch = job.epoch;
        let (clock, keep_samples, measure_from_us) =
            (job.clock, job.keep_samples, job.measure_from_us);
        producer
            .send_with_callback(record, move |result| {
                let now = Instant::now();
                let mut d = d.lock().unwrap_or_else(PoisonError::into_inner);
                match result {
                    Ok(_) => {
                        let latency = now.saturating_duration_since(intended);
                        if clock.wall_us(intended) >= measure_from_us {
                            d.latency.record(latency);
                        }
                        if keep_samples {
                            let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
                            d.samples.push((clock.wall_us(intended), us));
                        }
                        d.acked += 1;
                        d.acked_bytes += bytes;
                        d.last_ack = Some(now);
                        d.per_second.record(epoch, now);
                        acked_total.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => {
                        d.failed += 1;
                        d.first_error.get_or_insert(e.to_string());
                    }
                }
            })
            .await
            .context("producing a record")?;
        sent += 1;
    }
    let remaining = job.deadline.saturating_duration_since(Instant::now());
    if tokio::time::timeout(remaining, producer.flush())
        .await
        .is_err()
    {
        timed_out = true;
    }
    producer.close().await;
    let mut outcome =
        std::mem::take(&mut *deliveries.lock().unwrap_or_else(PoisonError::into_inner));
    outcome.sent = sent;
    outcome.first_send = first_send;
    outcome.timed_out |= timed_out;
    Ok(outcome)
}

/// Waits until `at`. Tokio's timer ticks in whole milliseconds, so an open-loop producer paced
/// by it alone sends each millisecond's records late by up to 1 ms (its records' latencies count
/// from `at`); the librdkafka jobs pace with `std::thread::sleep`. With `precise`, the last
/// stretch is slept the same way here; without, the runtime's threads must not block (a
/// current-thread runtime, or one shared by every producer).
async fn pace(at: Instant, precise: bool) {
    let now = Instant::now();
    if at <= now {
        return;
    }
    if !precise {
        tokio::time::sleep_until(at.into()).await;
        return;
    }
    if at - now > Duration::from_millis(2) {
        tokio::time::sleep_until((at - Duration::from_millis(2)).into()).await;
    }
    std::thread::sleep(at.saturating_duration_since(Instant::now()));
}

/// As [`crate::consume::run_consumer`], with lograil's consumer (assign, no group).
pub fn run_consumer(job: ConsumerJob, ready: &Barrier) -> anyhow::Result<ConsumerOutcome> {
    let rt = match runtime(job.tokio_workers) {
        Ok(rt) => rt,
        Err(e) => {
            ready.wait();
            return Err(e);
        }
    };
    let setup = rt.block_on(assign(&job));
    ready.wait();
    let (consumer, mut outcome) = setup?;
    if outcome.assigned_at.is_none() {
        return Ok(outcome);
    }
    rt.block_on(async {
        // Partition → end offset still to reach.
        let mut open: std::collections::HashMap<i32, i64> = job
            .partitions
            .iter()
            .filter_map(|r| r.end.filter(|e| *e > r.start).map(|e| (r.partition, e)))
            .collect();
        let bounded = job.partitions.iter().all(|r| r.end.is_some());
        loop {
            if bounded && open.is_empty() {
                break;
            }
            if job.stop.reached() {
                break;
            }
            if Instant::now() > job.stop.deadline {
                outcome.timed_out = true;
                break;
            }
            let record =
                match tokio::time::timeout(Duration::from_millis(100), consumer.recv()).await {
                    Err(_) => continue,
                    Ok(Err(e)) => {
                        outcome.errors += 1;
                        outcome.first_error.get_or_insert(e.to_string());
                        continue;
                    }
                    Ok(Ok(r)) => r,
                };
            let now = Instant::now();
            if job.measure_latency {
                if let Some(sent_us) = record
                    .value
                    .as_deref()
                    .and_then(read_stamp)
                    .filter(|us| *us >= job.measure_from_us)
                {
                    outcome
                        .latency
                        .record_micros(wall_us_now().saturating_sub(sent_us));
                }
            }
            outcome.records += 1;
            outcome.bytes += (record.value.as_ref().map_or(0, Bytes::len)
                + record.key.as_ref().map_or(0, Bytes::len)) as u64;
            outcome.first_record.get_or_insert(now);
            outcome.last_record = Some(now);
            outcome.per_second.record(job.epoch, now);
            job.stop.consumed_total.fetch_add(1, Ordering::Relaxed);
            if open
                .get(&record.partition)
                .is_some_and(|end| record.offset + 1 >= *end)
            {
                open.remove(&record.partition);
            }
        }
        consumer.close().await;
    });
    Ok(outcome)
}

async fn assign(job: &ConsumerJob) -> anyhow::Result<(Consumer, ConsumerOutcome)> {
    let consumer = Consumer::from_config(&translate(&job.config))
        .await
        .context("creating the consumer (lograil client)")?;
    let ranges: Vec<_> = job
        .partitions
        .iter()
        .filter(|r| r.end.is_none_or(|end| end > r.start))
        .collect();
    let mut outcome = ConsumerOutcome::default();
    if ranges.is_empty() {
        return Ok((consumer, outcome));
    }
    let partitions: Vec<TopicPartition> = ranges
        .iter()
        .map(|r| TopicPartition::new(&job.topic, r.partition))
        .collect();
    consumer.assign(&partitions)?;
    for (tp, r) in partitions.iter().zip(&ranges) {
        consumer.seek(tp, r.start)?;
    }
    outcome.assigned_at = Some(Instant::now());
    Ok((consumer, outcome))
}
