//! The load: open-loop producers at the base rate and the spike, each record stamped with its
//! intended send time, and the retries of `share-spike`'s clients; their deliveries counted.

use std::collections::VecDeque;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

use super::{count, Clients, Counts, SpikeArgs};
use crate::librdkafka::{log_to_stderr, parse_properties};
use crate::payload::{Clock, Payload};

struct Deliveries {
    counts: Counts,
    start: Instant,
}

impl ClientContext for Deliveries {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, fac: &str, message: &str) {
        log_to_stderr(level, fac, message);
    }
}

impl ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        let second = self.start.elapsed().as_secs() as usize;
        count(&self.counts, second, |s| match result {
            Ok(_) => s.acked += 1,
            Err(_) => s.failed += 1,
        });
    }
}

pub(super) fn producer_config(args: &SpikeArgs) -> ClientConfig {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &args.brokers)
        .set("client.id", &args.client_id)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set(
            "message.timeout.ms",
            (args.deadline_ms / 2).max(1).to_string(),
        );
    config
}

/// Open loop: `base_rate` records/s, times `--spike` during the spike; each record stamped with
/// its intended send time. With `clients`, also the retries of tasks not completed in time.
pub(super) fn produce(
    args: &SpikeArgs,
    base_rate: f64,
    start: Instant,
    total_secs: u64,
    counts: &Counts,
    clients: Option<&Clients>,
) -> anyhow::Result<()> {
    let mut config = producer_config(args);
    for (k, v) in parse_properties(&args.config)? {
        config.set(k, v);
    }
    let context = Deliveries {
        counts: counts.clone(),
        start,
    };
    let producer: BaseProducer<Deliveries> = config.create_with_context(context)?;
    let clock = Clock::new();
    let mut payload = Payload::new(args.message_size);
    let spike = (args.before_secs, args.before_secs + args.spike_secs);
    let end = start + Duration::from_secs(total_secs);
    let mut next = start;
    let deadline = Duration::from_millis(args.deadline_ms);
    // Attempts in send order (so by due time): (due, task, attempt).
    let mut due: VecDeque<(Instant, u64, u32)> = VecDeque::new();
    let mut tasks = 0u64;
    let mut value = payload.bytes().to_vec();
    while next < end {
        let now = Instant::now();
        if let Some(c) = clients {
            // A task whose attempt reached its deadline uncompleted is resubmitted, now.
            while due.front().is_some_and(|d| d.0 <= now) {
                let Some((_, task, attempt)) = due.pop_front() else {
                    break;
                };
                let done = c
                    .completed
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .contains(&task);
                if done || attempt >= c.retries {
                    continue;
                }
                let second = now.duration_since(start).as_secs();
                let refused =
                    send_task(&producer, args, c, &mut value, clock.wall_us(now), task).is_err();
                count(counts, second as usize, |s| {
                    s.offered += 1;
                    s.retried += 1;
                    s.refused += u64::from(refused);
                });
                due.push_back((now + deadline, task, attempt + 1));
            }
        }
        if next > now {
            let wake = due.front().map_or(next, |d| d.0.min(next));
            producer.poll(wake.saturating_duration_since(now));
            continue;
        }
        let second = next.duration_since(start).as_secs();
        let rate = if (spike.0..spike.1).contains(&second) {
            base_rate * args.spike
        } else {
            base_rate
        };
        let refused = match clients {
            Some(c) => {
                tasks += 1;
                due.push_back((next + deadline, tasks, 0));
                send_task(&producer, args, c, &mut value, clock.wall_us(next), tasks).is_err()
            }
            None => {
                payload.stamp(clock.wall_us(next));
                let record = BaseRecord::<(), [u8]>::to(&args.topic).payload(payload.bytes());
                producer.send(record).is_err()
            }
        };
        count(counts, second as usize, |s| {
            s.offered += 1;
            s.refused += u64::from(refused);
        });
        next += Duration::from_secs_f64(1.0 / rate);
        producer.poll(Duration::ZERO);
    }
    // Deliveries still pending time out within the deadline.
    let _ = producer.flush(Duration::from_millis(args.deadline_ms + 1000));
    Ok(())
}

/// Sends one attempt of `task` stamped `wall_us` (its intended send time), with its id and, if
/// asked, its deadline header; `Err` if the client refused it at once (its queue was full).
fn send_task(
    producer: &BaseProducer<Deliveries>,
    args: &SpikeArgs,
    clients: &Clients,
    value: &mut [u8],
    wall_us: u64,
    task: u64,
) -> Result<(), ()> {
    value[..8].copy_from_slice(&wall_us.to_le_bytes());
    value[8..16].copy_from_slice(&task.to_le_bytes());
    let mut record = BaseRecord::<(), [u8]>::to(&args.topic).payload(&*value);
    if clients.deadline_header {
        let deadline_ms = (wall_us / 1000 + args.deadline_ms) as i64;
        record = record.headers(OwnedHeaders::new().insert(Header {
            key: "deadline",
            value: Some(&deadline_ms.to_be_bytes()),
        }));
    }
    producer.send(record).map_err(|_| ())
}
