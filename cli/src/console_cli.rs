//! `lograil produce` and `lograil consume`: Kafka's console producer and consumer (kcat-like),
//! built on lograil's own client (the `consumer` crate), so they work against any
//! Kafka-compatible cluster. Client properties go in with `--config NAME=VALUE` under the Java
//! client's names.

use std::io::{BufRead, Write};
use std::time::Duration;

use anyhow::{bail, Context};
use consumer::{
    ClientConfig, ConsumeError, Consumer, ConsumerRecord, Producer, ProducerRecord, TimestampType,
    TopicPartition,
};
use serde_json::json;

#[derive(Debug, clap::Args)]
pub struct Common {
    /// Bootstrap brokers, `host:port[,host:port…]` [default: the command config's
    /// bootstrap.servers, else 127.0.0.1:9092].
    #[arg(long)]
    bootstrap_server: Option<String>,
    /// A Java properties file of client properties (security.protocol, sasl.*, ssl.*, …), as
    /// Kafka's tools take it; `--config` values override it.
    #[arg(long, value_name = "FILE")]
    command_config: Option<std::path::PathBuf>,
    /// A client property under its Java client name, e.g. `--config linger.ms=20`; repeatable.
    #[arg(long = "config", value_name = "NAME=VALUE")]
    configs: Vec<String>,
}

impl Common {
    fn client_config(&self) -> anyhow::Result<ClientConfig> {
        let mut config = crate::client_props::client_config(
            self.bootstrap_server.as_deref(),
            self.command_config.as_deref(),
        )?;
        for c in &self.configs {
            let (k, v) = c
                .split_once('=')
                .with_context(|| format!("--config {c}: expected NAME=VALUE"))?;
            config.set(k.trim(), v.trim());
        }
        Ok(config)
    }
}

#[derive(Debug, clap::Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    common: Common,
    /// The topic to write to.
    #[arg(long)]
    topic: String,
    /// Split each line at the first SEPARATOR into key and value (a line without it is an
    /// error). Without it, lines are values with no key.
    #[arg(long, value_name = "SEPARATOR")]
    key_separator: Option<String>,
    /// A header for every record, `NAME=VALUE`; repeatable.
    #[arg(long = "header", value_name = "NAME=VALUE")]
    headers: Vec<String>,
    /// Write every record to this partition instead of partitioning by key.
    #[arg(long)]
    partition: Option<i32>,
    /// `acks`: 0, 1 or all.
    #[arg(long)]
    acks: Option<String>,
    /// `compression.type`: none, gzip, snappy, lz4 or zstd.
    #[arg(long)]
    compression: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    common: Common,
    /// The topic to read.
    #[arg(long)]
    topic: String,
    /// Read as a member of this consumer group (committing as it goes); without it every
    /// partition is read directly and nothing is committed.
    #[arg(long)]
    group: Option<String>,
    /// Start at the beginning (with --group: where the group has no committed offset).
    #[arg(long, conflicts_with_all = ["offset", "from_time"])]
    from_beginning: bool,
    /// Start at this offset (of --partition, or of every partition). Not with --group.
    #[arg(long, conflicts_with_all = ["group", "from_time"])]
    offset: Option<i64>,
    /// Start at the first record at or after this time: `YYYY-MM-DDTHH:MM:SS[.sss][Z|±HH:MM]`
    /// (UTC without an offset) or epoch milliseconds. Not with --group.
    #[arg(long, conflicts_with = "group")]
    from_time: Option<String>,
    /// Read only this partition. Not with --group.
    #[arg(long, conflicts_with = "group")]
    partition: Option<i32>,
    /// Exit after this many records.
    #[arg(long)]
    max_messages: Option<u64>,
    /// Exit when no record arrives for this many milliseconds.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// `text`: Kafka's console consumer layout with every field (timestamp, partition,
    /// offset, headers, key, value; tab-separated); `json`: one object per line.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// Reads lines from stdin and sends each as a record; fails if any record was not delivered.
pub fn produce(args: &ProduceArgs) -> anyhow::Result<()> {
    let mut config = args.common.client_config()?;
    if let Some(acks) = &args.acks {
        config.set("acks", acks.as_str());
    }
    if let Some(c) = &args.compression {
        config.set("compression.type", c.as_str());
    }
    let headers: Vec<(String, String)> = args
        .headers
        .iter()
        .map(|h| {
            h.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .with_context(|| format!("--header {h}: expected NAME=VALUE"))
        })
        .collect::<anyhow::Result<_>>()?;
    runtime()?.block_on(async {
        let producer = Producer::from_config(&config).await?;
        // Deliveries are awaited in order by a second task, so memory stays bounded by the
        // producer's buffer.memory however long stdin is.
        let (tx, mut rx) = tokio::sync::mpsc::channel::<consumer::DeliveryFuture>(10_000);
        let checker = tokio::spawn(async move {
            let mut failed = 0u64;
            let mut first_error = None;
            while let Some(d) = rx.recv().await {
                if let Err(e) = d.await {
                    failed += 1;
                    first_error.get_or_insert(e.to_string());
                }
            }
            (failed, first_error)
        });
        // stdin is read on a thread of its own (blocking reads), a bounded channel apart.
        let (line_tx, mut lines) = tokio::sync::mpsc::channel::<std::io::Result<String>>(1024);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                if line_tx.blocking_send(line).is_err() {
                    return;
                }
            }
        });
        let mut number = 0u64;
        while let Some(line) = lines.recv().await {
            let line = line?;
            number += 1;
            let mut record = ProducerRecord::new(&args.topic);
            match &args.key_separator {
                Some(sep) => {
                    let (key, value) = line.split_once(sep.as_str()).with_context(|| {
                        format!("line {number}: no key separator {sep:?} in {line:?}")
                    })?;
                    record = record.key(key.to_string()).value(value.to_string());
                }
                None => record = record.value(line),
            }
            for (k, v) in &headers {
                record = record.header(k.clone(), v.clone());
            }
            if let Some(p) = args.partition {
                record = record.partition(p);
            }
            let delivery = producer.send(record).await?;
            if tx.send(delivery).await.is_err() {
                break;
            }
        }
        drop(tx);
        producer.flush().await;
        let (failed, first_error) = checker.await?;
        producer.close().await;
        if failed > 0 {
            bail!(
                "{failed} of {number} records not delivered; first error: {}",
                first_error.unwrap_or_default()
            );
        }
        Ok(())
    })
}

/// Prints records until --max-messages, --timeout-ms or Ctrl-C; a group member commits and
/// leaves the group on the way out.
pub fn consume(args: &ConsumeArgs) -> anyhow::Result<()> {
    let mut config = args.common.client_config()?;
    if let Some(group) = &args.group {
        config.set("group.id", group.as_str());
    }
    if args.from_beginning {
        config.set("auto.offset.reset", "earliest");
    } else if config.get("auto.offset.reset").is_none() {
        config.set("auto.offset.reset", "latest");
    }
    let start_time = args
        .from_time
        .as_deref()
        .map(crate::admin_cli::datetime::parse_datetime)
        .transpose()?;
    runtime()?.block_on(async {
        let consumer = Consumer::from_config(&config).await?;
        if args.group.is_some() {
            consumer.subscribe(&[&args.topic])?;
        } else {
            let partitions: Vec<TopicPartition> = match args.partition {
                Some(p) => vec![TopicPartition::new(&args.topic, p)],
                None => {
                    let mut admin =
                        consumer::Admin::from_config(&args.common.client_config()?).await?;
                    let count = admin.describe_topic(&args.topic).await?.partitions;
                    (0..count)
                        .map(|p| TopicPartition::new(&args.topic, p))
                        .collect()
                }
            };
            consumer.assign(&partitions)?;
            if args.from_beginning {
                consumer.seek_to_beginning(&partitions)?;
            }
            for tp in &partitions {
                if let Some(offset) = args.offset {
                    consumer.seek(tp, offset)?;
                }
                if let Some(ms) = start_time {
                    consumer.seek_to_timestamp(tp, ms)?;
                }
            }
        }
        let result = print_records(&consumer, args).await;
        consumer.close().await;
        result
    })
}

async fn print_records(consumer: &Consumer, args: &ConsumeArgs) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut printed = 0u64;
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        if args.max_messages.is_some_and(|max| printed >= max) {
            return Ok(());
        }
        let next = async {
            match args.timeout_ms {
                Some(ms) => tokio::time::timeout(Duration::from_millis(ms), consumer.recv())
                    .await
                    .ok(),
                None => Some(consumer.recv().await),
            }
        };
        let record = tokio::select! {
            r = next => r,
            _ = &mut ctrl_c => return Ok(()),
        };
        let record = match record {
            None => return Ok(()),
            Some(Ok(r)) => r,
            Some(Err(ConsumeError::Closed)) => return Ok(()),
            Some(Err(e)) => return Err(e.into()),
        };
        let line = match args.format {
            Format::Text => text_line(&record),
            Format::Json => json_line(&record),
        };
        let mut out = stdout.lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        printed += 1;
    }
}

fn utf8(bytes: Option<&bytes::Bytes>) -> Option<String> {
    bytes.map(|b| String::from_utf8_lossy(b).into_owned())
}

/// Kafka's console consumer with every print option on.
fn text_line(r: &ConsumerRecord) -> String {
    let kind = match r.timestamp_type {
        TimestampType::CreateTime => "CreateTime",
        TimestampType::LogAppendTime => "LogAppendTime",
    };
    let headers = if r.headers.is_empty() {
        "NO_HEADERS".to_string()
    } else {
        r.headers
            .iter()
            .map(|(k, v)| format!("{k}:{}", utf8(v.as_ref()).unwrap_or_else(|| "null".into())))
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{kind}:{}\tPartition:{}\tOffset:{}\t{headers}\t{}\t{}",
        r.timestamp,
        r.partition,
        r.offset,
        utf8(r.key.as_ref()).unwrap_or_else(|| "null".into()),
        utf8(r.value.as_ref()).unwrap_or_else(|| "null".into()),
    )
}

fn json_line(r: &ConsumerRecord) -> String {
    json!({
        "topic": &*r.topic,
        "partition": r.partition,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "timestamp_type": match r.timestamp_type {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        },
        "key": utf8(r.key.as_ref()),
        "value": utf8(r.value.as_ref()),
        "headers": r.headers.iter().map(|(k, v)| json!({"key": k, "value": utf8(v.as_ref())})).collect::<Vec<_>>(),
    })
    .to_string()
}
