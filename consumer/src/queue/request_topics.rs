//! The share requests' topic lists: the partitions a ShareFetch fetches with the
//! acknowledgements it carries, the partitions it forgets, and a ShareAcknowledge's
//! acknowledgements, each grouped by topic id.

use std::collections::BTreeMap;

use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckRequestBatch,
};
use kafka_protocol::messages::share_fetch_request::{
    AcknowledgementBatch as FetchAckBatch, FetchPartition, FetchTopic, ForgottenTopic,
};

use super::acks::{Batch, RELEASE_DELAY_TAG};
use super::membership::IdPartition;

/// ShareFetch's topics: the partitions added to the session, and those with acknowledgements
/// to carry (with them).
pub(super) fn fetch_topics(
    add: &[IdPartition],
    acks: &BTreeMap<IdPartition, Vec<Batch>>,
) -> Vec<FetchTopic> {
    let mut listed: BTreeMap<IdPartition, Vec<FetchAckBatch>> =
        add.iter().map(|p| (*p, Vec::new())).collect();
    for (p, batches) in acks {
        listed
            .entry(*p)
            .or_default()
            .extend(batches.iter().map(|b| {
                let batch = FetchAckBatch::default()
                    .with_first_offset(b.first)
                    .with_last_offset(b.last)
                    .with_acknowledge_types(b.types.clone());
                match &b.delay_tag {
                    Some(tag) => batch.with_unknown_tagged_field(RELEASE_DELAY_TAG, tag.clone()),
                    None => batch,
                }
            }));
    }
    group_by_topic(
        listed,
        |(p, batches)| {
            FetchPartition::default()
                .with_partition_index(p)
                .with_acknowledgement_batches(batches)
        },
        |id, partitions| {
            FetchTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        },
    )
}

/// ShareFetch's forgotten topics: the partitions the session no longer fetches.
pub(super) fn forgotten_topics(forget: &[IdPartition]) -> Vec<ForgottenTopic> {
    group_by_topic(
        forget.iter().map(|p| (*p, ())).collect(),
        |(p, ())| p,
        |id, partitions| {
            ForgottenTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        },
    )
}

/// ShareAcknowledge's topics: the acknowledgements of each partition.
pub(super) fn acknowledge_topics(
    acks: &BTreeMap<IdPartition, Vec<Batch>>,
) -> Vec<AcknowledgeTopic> {
    group_by_topic(
        acks.clone(),
        |(p, batches)| {
            AcknowledgePartition::default()
                .with_partition_index(p)
                .with_acknowledgement_batches(
                    batches
                        .into_iter()
                        .map(|b| {
                            let batch = AckRequestBatch::default()
                                .with_first_offset(b.first)
                                .with_last_offset(b.last)
                                .with_acknowledge_types(b.types);
                            match b.delay_tag {
                                Some(tag) => {
                                    batch.with_unknown_tagged_field(RELEASE_DELAY_TAG, tag)
                                }
                                None => batch,
                            }
                        })
                        .collect(),
                )
        },
        |id, partitions| {
            AcknowledgeTopic::default()
                .with_topic_id(id)
                .with_partitions(partitions)
        },
    )
}

/// Groups per-partition items into per-topic request entries, in topic id order.
fn group_by_topic<V, P, T>(
    items: BTreeMap<IdPartition, V>,
    partition: impl Fn((i32, V)) -> P,
    topic: impl Fn(uuid::Uuid, Vec<P>) -> T,
) -> Vec<T> {
    let mut by_topic: BTreeMap<uuid::Uuid, Vec<P>> = BTreeMap::new();
    for ((id, p), v) in items {
        by_topic.entry(id).or_default().push(partition((p, v)));
    }
    by_topic
        .into_iter()
        .map(|(id, partitions)| topic(id, partitions))
        .collect()
}
