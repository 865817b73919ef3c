//! What the consumer- and share-group heartbeat and describe handlers share: a member's
//! partitions grouped by topic id, as their responses carry them.

use std::collections::{BTreeMap, BTreeSet};

use log_core::Uuid;

/// `partitions` by topic id, each topic's partitions in order.
pub(super) fn by_topic(partitions: &BTreeSet<(Uuid, i32)>) -> BTreeMap<Uuid, Vec<i32>> {
    let mut by_topic: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    for (topic, partition) in partitions {
        by_topic.entry(*topic).or_default().push(*partition);
    }
    by_topic
}
