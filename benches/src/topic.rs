//! The topic under test: created with CreateTopics (AdminClient) if missing, then its
//! partitions read from Metadata, waiting until every partition has a leader.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::RDKafkaErrorCode;

use crate::args::RunArgs;
use crate::clients;
use crate::librdkafka::StderrLog;

/// How long topic creation and metadata may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Creates `args.topic` with `args.partitions` partitions unless it exists, and returns the
/// partition count the broker reports for it.
pub fn ensure_topic(args: &RunArgs, overrides: &[(String, String)]) -> anyhow::Result<i32> {
    if args.partitions < 1 {
        bail!("--partitions must be at least 1");
    }
    let admin: AdminClient<StderrLog> = clients::admin_config(args, overrides)
        .create_with_context(StderrLog)
        .context("creating the admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .context("starting a tokio runtime for the admin client")?;
    let new_topic = NewTopic::new(&args.topic, args.partitions, TopicReplication::Fixed(1));
    let options = AdminOptions::new().operation_timeout(Some(SETUP_TIMEOUT));
    match runtime.block_on(admin.create_topics([&new_topic], &options)) {
        Ok(results) => {
            for result in results {
                match result {
                    Ok(_) => {}
                    Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((name, code)) => {
                        // Some brokers refuse CreateTopics but auto-create on Metadata.
                        eprintln!("CreateTopics {name}: {code}; falling back to Metadata");
                    }
                }
            }
        }
        Err(e) => eprintln!("CreateTopics failed: {e}; falling back to Metadata"),
    }
    drop(admin);
    partitions(args, overrides)
}

/// Partitions of `args.topic` from Metadata, once each has a leader.
fn partitions(args: &RunArgs, overrides: &[(String, String)]) -> anyhow::Result<i32> {
    let consumer: BaseConsumer<StderrLog> = clients::consumer_config(args, overrides)
        .create_with_context(StderrLog)
        .context("creating a metadata client")?;
    let deadline = Instant::now() + SETUP_TIMEOUT;
    let mut last_problem;
    loop {
        match consumer.fetch_metadata(Some(&args.topic), Duration::from_secs(5)) {
            Ok(metadata) => match metadata.topics().iter().find(|t| t.name() == args.topic) {
                Some(topic) if topic.error().is_none() && !topic.partitions().is_empty() => {
                    let led = topic.partitions().iter().all(|p| p.leader() >= 0);
                    if led {
                        let count =
                            i32::try_from(topic.partitions().len()).context("partition count")?;
                        if count != args.partitions {
                            eprintln!(
                                "topic {} exists with {count} partitions (--partitions {} ignored)",
                                args.topic, args.partitions
                            );
                        }
                        return Ok(count);
                    }
                    last_problem = "some partitions have no leader yet".to_string();
                }
                Some(topic) => {
                    last_problem = format!("topic error {:?}", topic.error());
                }
                None => last_problem = "topic not in metadata".to_string(),
            },
            Err(e) => last_problem = e.to_string(),
        }
        if Instant::now() > deadline {
            bail!(
                "topic {} not ready after {SETUP_TIMEOUT:?}: {last_problem}",
                args.topic
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Low and high watermarks (first offset, next offset) of each partition `0..partitions`.
pub fn watermarks(
    args: &RunArgs,
    overrides: &[(String, String)],
    partitions: i32,
) -> anyhow::Result<Vec<(i64, i64)>> {
    let consumer: BaseConsumer<StderrLog> = clients::consumer_config(args, overrides)
        .create_with_context(StderrLog)
        .context("creating a watermark client")?;
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(&args.topic, p, Duration::from_secs(10))
                .with_context(|| format!("offsets of {}-{p}", args.topic))
        })
        .collect()
}
