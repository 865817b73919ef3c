//! The consumer's embedded protocol inside classic JoinGroup and SyncGroup (Kafka's
//! `ConsumerProtocol`): a member's subscription in its protocol metadata, its assignment in
//! SyncGroup's bytes, each a version (i16) then the message. The broker reads them only where
//! a classic member meets a consumer-protocol group (KIP-848's online migration) and for
//! OffsetDelete's subscribed-topic check.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedTopic;
use kafka_protocol::messages::{
    ConsumerProtocolAssignment, ConsumerProtocolSubscription, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The highest version of either message.
const MAX_VERSION: i16 = 3;

/// What a classic member's protocol metadata says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subscription {
    pub topics: Vec<String>,
    /// The partitions it owns (v1+; an eager member owns none when it joins).
    pub owned: Vec<(String, i32)>,
    /// v3+.
    pub rack_id: Option<String>,
}

/// The version a message starts with (clamped to those known), and the rest.
fn split(bytes: &[u8]) -> Option<(i16, &[u8])> {
    let mut buf = bytes;
    if buf.remaining() < 2 {
        return None;
    }
    let version = buf.get_i16().clamp(0, MAX_VERSION);
    Some((version, buf))
}

/// A member's subscription; `None` when it does not decode.
pub fn subscription(metadata: &[u8]) -> Option<Subscription> {
    let (version, mut buf) = split(metadata)?;
    let s = ConsumerProtocolSubscription::decode(&mut buf, version).ok()?;
    Some(Subscription {
        topics: s.topics.iter().map(ToString::to_string).collect(),
        owned: s
            .owned_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.to_string(), *p)))
            .collect(),
        rack_id: s.rack_id.map(|r| r.to_string()),
    })
}

/// An assignment's partitions; `None` when it does not decode (empty bytes: none assigned).
pub fn assignment(bytes: &[u8]) -> Option<Vec<(String, i32)>> {
    if bytes.is_empty() {
        return Some(Vec::new());
    }
    let (version, mut buf) = split(bytes)?;
    let a = ConsumerProtocolAssignment::decode(&mut buf, version).ok()?;
    Some(
        a.assigned_partitions
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.to_string(), *p)))
            .collect(),
    )
}

/// The version of a member's metadata, which its assignment is written in (as Kafka does).
pub fn version(metadata: &[u8]) -> i16 {
    split(metadata).map_or(0, |(v, _)| v)
}

/// An assignment of `partitions` (by topic name), in `version`.
pub fn encode_assignment(partitions: &[(String, i32)], version: i16) -> Bytes {
    let mut by_topic: std::collections::BTreeMap<&str, Vec<i32>> = Default::default();
    for (topic, p) in partitions {
        by_topic.entry(topic).or_default().push(*p);
    }
    let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
        by_topic
            .into_iter()
            .map(|(t, ps)| {
                AssignedTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(t.to_string())))
                    .with_partitions(ps)
            })
            .collect(),
    );
    let version = version.clamp(0, MAX_VERSION);
    let mut out = BytesMut::new();
    out.put_i16(version);
    // An assignment of names and numbers always encodes.
    if assignment.encode(&mut out, version).is_err() {
        return Bytes::new();
    }
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::consumer_protocol_subscription::TopicPartition as Owned;

    #[test]
    fn a_subscription_and_an_assignment_read_back() {
        let s = ConsumerProtocolSubscription::default()
            .with_topics(vec![StrBytes::from_static_str("t")])
            .with_owned_partitions(vec![Owned::default()
                .with_topic(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![0, 2])])
            .with_rack_id(Some(StrBytes::from_static_str("r1")));
        let mut bytes = BytesMut::new();
        bytes.put_i16(3);
        s.encode(&mut bytes, 3).unwrap();
        let read = subscription(&bytes).unwrap();
        assert_eq!(read.topics, vec!["t"]);
        assert_eq!(read.owned, vec![("t".to_string(), 0), ("t".to_string(), 2)]);
        assert_eq!(read.rack_id.as_deref(), Some("r1"));
        assert_eq!(version(&bytes), 3);
        assert_eq!(subscription(&[0, 1, 9]), None);

        let parts = vec![("a".to_string(), 1), ("b".to_string(), 0)];
        for v in 0..=3 {
            assert_eq!(
                assignment(&encode_assignment(&parts, v)),
                Some(parts.clone())
            );
        }
        assert_eq!(assignment(&[]), Some(Vec::new()));
    }
}
