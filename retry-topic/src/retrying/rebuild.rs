//! After a rebalance, ordered keys' chains are rebuilt from the retry topics before a
//! partition's records are handled.

use super::*;

/// Retry-topic partition → the offsets to read, `(start, end)`.
type Ranges = BTreeMap<TopicPartition, (i64, i64)>;

impl RetryingConsumer {
    /// Reads partition `partition` of every retry topic from the group's committed offset to
    /// its end: the records there are the key chains in flight.
    pub(super) async fn rebuild(&mut self, partition: i32) -> Result<(), RetryError> {
        let fail = |reason: String| RetryError::Rebuild { partition, reason };
        let tps: Vec<TopicPartition> = self
            .topology
            .stages
            .iter()
            .map(|s| TopicPartition::new(s.topic.as_str(), partition))
            .collect();
        if tps.is_empty() {
            self.rebuilt.insert(partition);
            return Ok(());
        }
        let committed = self
            .consumer
            .committed(&tps)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut reader_config = self.base.clone().with("auto.offset.reset", "earliest");
        if self.config.exactly_once {
            reader_config.set("isolation.level", "read_committed");
        }
        let reader = Consumer::from_config(&reader_config)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let wanted = unread_ranges(&reader, partition, &tps, &committed).await?;
        let assigned: Vec<TopicPartition> = wanted.keys().cloned().collect();
        reader.assign(&assigned).map_err(|e| fail(e.to_string()))?;
        for (tp, (start, _)) in &wanted {
            reader.seek(tp, *start).map_err(|e| fail(e.to_string()))?;
        }
        let found = self.read_chains(&reader, partition, &wanted).await?;
        reader.close().await;
        tracing::info!(
            partition,
            records = found,
            "per-key chains rebuilt from the retry topics"
        );
        self.rebuilt.insert(partition);
        self.publish();
        Ok(())
    }

    /// Reads `wanted` to its ends (within 60 s) and hands each keyed record's chain to the
    /// key chains; returns how many it handed.
    async fn read_chains(
        &mut self,
        reader: &Consumer,
        partition: i32,
        wanted: &Ranges,
    ) -> Result<usize, RetryError> {
        let fail = |reason: String| RetryError::Rebuild { partition, reason };
        let mut remaining: BTreeSet<TopicPartition> = wanted.keys().cloned().collect();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        let mut found = 0usize;
        while !remaining.is_empty() {
            let record = tokio::time::timeout_at(deadline, reader.recv())
                .await
                .map_err(|_| {
                    fail(format!(
                        "{} partitions not read within 60 s",
                        remaining.len()
                    ))
                })?
                .map_err(|e| fail(e.to_string()))?;
            let tp = TopicPartition::new(&*record.topic, record.partition);
            let Some((_, end)) = wanted.get(&tp) else {
                continue;
            };
            if record.offset + 1 >= *end {
                remaining.remove(&tp);
            }
            if record.offset >= *end {
                continue;
            }
            let (Some(key), Some(Place::Retry(stage)), Some(keys)) = (
                &record.key,
                self.topology.place(&record.topic),
                &mut self.keys,
            ) else {
                continue;
            };
            keys.found(
                partition,
                key,
                original_offset(&record),
                stage,
                record.timestamp,
                chain_reason(&record),
            );
            found += 1;
        }
        Ok(found)
    }
}

/// The offsets of `tps` not yet processed: from the group's committed offset (or the log
/// start, if later) to the end; partitions with none left out.
async fn unread_ranges(
    reader: &Consumer,
    partition: i32,
    tps: &[TopicPartition],
    committed: &BTreeMap<TopicPartition, i64>,
) -> Result<Ranges, RetryError> {
    let fail = |reason: String| RetryError::Rebuild { partition, reason };
    let ends = reader
        .end_offsets(tps)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let starts = reader
        .beginning_offsets(tps)
        .await
        .map_err(|e| fail(e.to_string()))?;
    let mut wanted: Ranges = BTreeMap::new();
    for tp in tps {
        let end = ends.get(tp).copied().unwrap_or(0);
        let start = committed
            .get(tp)
            .copied()
            .filter(|o| *o >= 0)
            .unwrap_or(0)
            .max(starts.get(tp).copied().unwrap_or(0));
        if start < end {
            wanted.insert(tp.clone(), (start, end));
        }
    }
    Ok(wanted)
}

/// Why a chain's record is in the retry topic: nothing for a record parked behind its key,
/// else its exception's class and message.
fn chain_reason(record: &ConsumerRecord) -> String {
    match headers::get(record, headers::PARKED_BEHIND) {
        Some(_) => String::new(),
        None => {
            let e = headers::exception(record);
            format!(
                "{}: {}",
                e.class.unwrap_or_default(),
                e.message.unwrap_or_default()
            )
        }
    }
}
