//! After a rebalance, ordered keys' chains are rebuilt from the retry topics before a
//! partition's records are handled.

use super::*;

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
        let ends = reader
            .end_offsets(&tps)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let starts = reader
            .beginning_offsets(&tps)
            .await
            .map_err(|e| fail(e.to_string()))?;
        let mut wanted: BTreeMap<TopicPartition, (i64, i64)> = BTreeMap::new();
        for tp in &tps {
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
        let assigned: Vec<TopicPartition> = wanted.keys().cloned().collect();
        reader.assign(&assigned).map_err(|e| fail(e.to_string()))?;
        for (tp, (start, _)) in &wanted {
            reader.seek(tp, *start).map_err(|e| fail(e.to_string()))?;
        }
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
            let reason = match headers::get(&record, headers::PARKED_BEHIND) {
                Some(_) => String::new(),
                None => {
                    let e = headers::exception(&record);
                    format!(
                        "{}: {}",
                        e.class.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    )
                }
            };
            keys.found(
                partition,
                key,
                original_offset(&record),
                stage,
                record.timestamp,
                reason,
            );
            found += 1;
        }
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
}
