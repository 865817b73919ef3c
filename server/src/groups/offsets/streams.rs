//! A streams group's record (KIP-1071) in `__consumer_offsets`: key `(group, "", -5)`, value a
//! [`StreamsGroupRecord`] (the group whole, members included; `groups::streams::stored`).

use std::collections::HashMap;

use super::{Key, Value};
use crate::groups::streams::StreamsGroupRecord;

const STREAMS_PARTITION: i32 = -5;

impl Key {
    pub(super) fn streams(group: &str) -> Key {
        Key::new(group, "", STREAMS_PARTITION)
    }

    pub(super) fn is_streams(&self) -> bool {
        self.topic.is_empty() && self.partition == STREAMS_PARTITION
    }
}

/// Each streams group's record, with the log offset that wrote it.
pub(super) type StoredStreams = HashMap<String, (StreamsGroupRecord, i64)>;

/// Sets (or, `None`, deletes) `group`'s record as written at `at`, unless a later write is there.
pub(super) fn apply(
    stored: &mut StoredStreams,
    group: String,
    record: Option<StreamsGroupRecord>,
    at: i64,
) {
    if stored.get(&group).is_some_and(|(_, was)| *was > at) {
        return;
    }
    match record {
        Some(record) => {
            stored.insert(group, (record, at));
        }
        None => {
            stored.remove(&group);
        }
    }
}

/// The records to write for `writes` (`None`: the group is gone), leaving out those the log
/// already has.
pub(super) fn changes(
    stored: &StoredStreams,
    writes: Vec<(String, Option<StreamsGroupRecord>)>,
) -> Vec<(Key, Option<Value>)> {
    writes
        .into_iter()
        .filter_map(|(group, record)| {
            let have = stored.get(&group).map(|(r, _)| r);
            if have == record.as_ref() {
                return None;
            }
            let value = record.map(|r| Value::Streams(Box::new(r)));
            Some((Key::streams(&group), value))
        })
        .collect()
}
