//! Reading a topic to its end offsets, from the start or from given offsets: what listing a
//! dead-letter topic, the ledger and the redrive targets needs.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use consumer::{
    Admin, AdminError, ClientConfig, ConsumeError, Consumer, ConsumerRecord, TopicPartition,
};

use super::DltError;

/// Every record of `topic` (or those from `since` per partition) up to the end offsets it has
/// now. Fails with [`DltError::NoTopic`] when the topic does not exist.
pub async fn read_topic(
    client: &ClientConfig,
    topic: &str,
    since: Option<&BTreeMap<i32, i64>>,
) -> Result<Vec<ConsumerRecord>, DltError> {
    let mut admin = Admin::from_config(client).await?;
    let count = partition_count(&mut admin, topic).await?;
    let reader = reader(client).await?;
    let tps: Vec<TopicPartition> = (0..count).map(|p| TopicPartition::new(topic, p)).collect();
    let read_err = |e: &dyn std::fmt::Display| DltError::Read {
        topic: topic.to_string(),
        reason: e.to_string(),
    };
    let ends = reader.end_offsets(&tps).await.map_err(|e| read_err(&e))?;
    let starts = reader
        .beginning_offsets(&tps)
        .await
        .map_err(|e| read_err(&e))?;
    let mut wanted = BTreeMap::new();
    for tp in &tps {
        let from = since
            .and_then(|s| s.get(&tp.partition).copied())
            .unwrap_or(0)
            .max(starts.get(tp).copied().unwrap_or(0));
        let end = ends.get(tp).copied().unwrap_or(0);
        if from < end {
            wanted.insert(tp.clone(), (from, end));
        }
    }
    let records = read_ranges(&reader, &wanted)
        .await
        .map_err(|e| read_err(&e))?;
    reader.close().await;
    Ok(records)
}

pub(super) async fn partition_count(admin: &mut Admin, topic: &str) -> Result<i32, DltError> {
    match admin.describe_topic(topic).await {
        Ok(t) if t.partitions > 0 => Ok(t.partitions),
        Ok(_) => Err(DltError::NoTopic(topic.to_string())),
        Err(AdminError::Call(c))
            if c.code() == Some(consumer::ErrorCode::UnknownTopicOrPartition) =>
        {
            Err(DltError::NoTopic(topic.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}

async fn reader(client: &ClientConfig) -> Result<Consumer, DltError> {
    Consumer::from_config(&client.clone().with("auto.offset.reset", "earliest"))
        .await
        .map_err(|e| DltError::Client(e.to_string()))
}

/// Reads `[from, end)` of each partition.
async fn read_ranges(
    reader: &Consumer,
    wanted: &BTreeMap<TopicPartition, (i64, i64)>,
) -> Result<Vec<ConsumerRecord>, String> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let tps: Vec<TopicPartition> = wanted.keys().cloned().collect();
    reader.assign(&tps).map_err(|e| e.to_string())?;
    for (tp, (from, _)) in wanted {
        reader.seek(tp, *from).map_err(|e| e.to_string())?;
    }
    let mut remaining: BTreeSet<TopicPartition> = tps.into_iter().collect();
    let mut out = Vec::new();
    while !remaining.is_empty() {
        let record = match tokio::time::timeout(Duration::from_secs(30), reader.recv()).await {
            Err(_) => {
                return Err(format!(
                    "no record for 30 s with {} partitions not read to their end",
                    remaining.len()
                ))
            }
            Ok(Err(ConsumeError::Closed)) => return Err("reader closed".to_string()),
            Ok(Err(e)) => return Err(e.to_string()),
            Ok(Ok(r)) => r,
        };
        let tp = TopicPartition::new(&*record.topic, record.partition);
        let Some((_, end)) = wanted.get(&tp) else {
            continue;
        };
        if record.offset + 1 >= *end {
            remaining.remove(&tp);
        }
        if record.offset < *end {
            out.push(record);
        }
    }
    out.sort_by_key(|r| (r.partition, r.offset));
    Ok(out)
}

/// The first offset at or after `ms` of each partition of `topic`.
pub(super) async fn offsets_since(
    client: &ClientConfig,
    topic: &str,
    ms: i64,
) -> Result<BTreeMap<i32, i64>, DltError> {
    let mut admin = Admin::from_config(client).await?;
    let count = partition_count(&mut admin, topic).await?;
    let reader = reader(client).await?;
    let tps: Vec<TopicPartition> = (0..count).map(|p| TopicPartition::new(topic, p)).collect();
    let read_err = |e: &dyn std::fmt::Display| DltError::Read {
        topic: topic.to_string(),
        reason: e.to_string(),
    };
    let found = reader
        .offsets_for_times(&tps, ms)
        .await
        .map_err(|e| read_err(&e))?;
    let ends = reader.end_offsets(&tps).await.map_err(|e| read_err(&e))?;
    reader.close().await;
    Ok(tps
        .iter()
        .map(|tp| {
            let at = found.get(tp).or_else(|| ends.get(tp)).copied().unwrap_or(0);
            (tp.partition, at)
        })
        .collect())
}
