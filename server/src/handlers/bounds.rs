//! How many things one decoded request names, checked against the broker's caps before its
//! handler runs. The decode itself is bounded by the request's size (the per-API size caps in
//! `frame`), but what a handler builds per name (a response entry, a lookup) is not: ten
//! million one-byte group ids in a 10 MB DescribeGroups became 2.4 GB of response. Over a cap
//! the connection is closed with the reason logged: Kafka has no such caps nor an error code
//! for them, and no real client comes near them.
//!
//! - topics and partitions: at most `max.broker.partitions` (a request cannot name more
//!   partitions, or topics, than the broker may hold);
//! - group ids (DescribeGroups, DeleteGroups, OffsetFetch v8+): `--max-groups-per-request`;
//! - members (LeaveGroup, SyncGroup assignments): `group.max.size`.

use crate::config::BrokerConfig;

/// What a request names.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub topics: usize,
    pub partitions: usize,
    pub groups: usize,
    pub members: usize,
}

impl std::ops::Add for Counts {
    type Output = Counts;

    fn add(self, other: Counts) -> Counts {
        Counts {
            topics: self.topics + other.topics,
            partitions: self.partitions + other.partitions,
            groups: self.groups + other.groups,
            members: self.members + other.members,
        }
    }
}

/// A count over its cap: what, how many, the cap and the setting that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverCap {
    pub what: &'static str,
    pub count: usize,
    pub max: usize,
    pub setting: &'static str,
}

/// Checks what a request names against the caps in `config`.
pub fn check(counts: &Counts, config: &BrokerConfig) -> Result<(), OverCap> {
    let partitions = usize::try_from(config.limits.max_broker_partitions).unwrap_or(usize::MAX);
    let caps = [
        (
            "topics",
            counts.topics,
            partitions,
            "--max-broker-partitions",
        ),
        (
            "partitions",
            counts.partitions,
            partitions,
            "--max-broker-partitions",
        ),
        (
            "group ids",
            counts.groups,
            config.limits.max_groups_per_request,
            "--max-groups-per-request",
        ),
        (
            "members",
            counts.members,
            config.groups.max_size,
            "--group-max-size",
        ),
    ];
    match caps.into_iter().find(|(_, count, max, _)| count > max) {
        Some((what, count, max, setting)) => Err(OverCap {
            what,
            count,
            max,
            setting,
        }),
        None => Ok(()),
    }
}

/// What a Produce request (v3–9) names, read off its frame (header included) without decoding
/// it, stopping once either count passes `stop_after`. Produce is the one API whose requests
/// may be large (`--max-request-bytes`), and one of empty partitions decodes to about ten times
/// its size: this lets such a request be refused before it is decoded. `None` when the frame
/// is malformed: the decoder then says why.
pub fn scan_produce(frame: &[u8], version: i16, stop_after: usize) -> Option<Counts> {
    let flexible = version >= 9;
    let mut c = Cursor(frame);
    c.skip(8)?; // api key, version, correlation id
    c.string(false)?; // client id: never compact
    if flexible {
        c.tagged_fields()?;
    }
    c.string(flexible)?; // transactional id
    c.skip(6)?; // acks, timeout
    let mut counts = Counts::default();
    for _ in 0..c.array_len(flexible)? {
        counts.topics += 1;
        c.string(flexible)?;
        for _ in 0..c.array_len(flexible)? {
            counts.partitions += 1;
            if counts.partitions > stop_after {
                return Some(counts);
            }
            c.skip(4)?; // index
            c.bytes(flexible)?; // records
            if flexible {
                c.tagged_fields()?;
            }
        }
        if flexible {
            c.tagged_fields()?;
        }
        if counts.topics > stop_after {
            return Some(counts);
        }
    }
    Some(counts)
}

/// Reads through a frame without allocating.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn skip(&mut self, n: usize) -> Option<()> {
        self.0 = self.0.get(n..)?;
        Some(())
    }

    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let bytes = self.0.get(..N)?.try_into().ok()?;
        self.0 = &self.0[N..];
        Some(bytes)
    }

    fn varint(&mut self) -> Option<u32> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let [b] = self.take::<1>()?;
            value |= u32::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }

    /// A length: compact (varint, plus one, 0 for null) or `i16`/`i32` (-1 for null).
    fn len(&mut self, flexible: bool, wide: bool) -> Option<usize> {
        if flexible {
            return usize::try_from(self.varint()?.saturating_sub(1)).ok();
        }
        let n = if wide {
            i32::from_be_bytes(self.take()?)
        } else {
            i32::from(i16::from_be_bytes(self.take()?))
        };
        Some(usize::try_from(n).unwrap_or(0))
    }

    fn string(&mut self, flexible: bool) -> Option<()> {
        let n = self.len(flexible, false)?;
        self.skip(n)
    }

    fn bytes(&mut self, flexible: bool) -> Option<()> {
        let n = self.len(flexible, true)?;
        self.skip(n)
    }

    fn array_len(&mut self, flexible: bool) -> Option<usize> {
        self.len(flexible, true)
    }

    fn tagged_fields(&mut self) -> Option<()> {
        for _ in 0..self.varint()? {
            self.varint()?;
            let size = usize::try_from(self.varint()?).ok()?;
            self.skip(size)?;
        }
        Some(())
    }
}

/// What a request naming `topics`, each with `partitions(topic)` partitions, names.
pub fn topics_and_partitions<T>(topics: &[T], partitions: impl Fn(&T) -> usize) -> Counts {
    Counts {
        topics: topics.len(),
        partitions: topics.iter().map(partitions).sum(),
        ..Counts::default()
    }
}

#[cfg(test)]
mod tests {
    use bytes::{BufMut, Bytes, BytesMut};
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ApiKey, GroupId, RequestHeader};
    use kafka_protocol::protocol::{Encodable, StrBytes};

    use super::*;
    use crate::handlers::Handler;
    use kafka_protocol::messages as m;

    fn produce_frame(version: i16, topics: usize, partitions: usize) -> Bytes {
        let request = m::ProduceRequest::default()
            .with_transactional_id(Some(StrBytes::from_static_str("tx").into()))
            .with_acks(-1)
            .with_topic_data(
                (0..topics)
                    .map(|t| {
                        TopicProduceData::default()
                            .with_name(StrBytes::from_string(format!("topic-{t}")).into())
                            .with_partition_data(
                                (0..partitions)
                                    .map(|p| {
                                        PartitionProduceData::default()
                                            .with_index(p as i32)
                                            .with_records(Some(Bytes::from_static(b"records")))
                                            .with_unknown_tagged_field(7, Bytes::from_static(b"x"))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let header = RequestHeader::default()
            .with_request_api_key(ApiKey::Produce as i16)
            .with_request_api_version(version)
            .with_client_id(Some(StrBytes::from_static_str("client")))
            .with_unknown_tagged_field(3, Bytes::from_static(b"abc"));
        let mut buf = BytesMut::new();
        header
            .encode(&mut buf, ApiKey::Produce.request_header_version(version))
            .unwrap();
        request.encode(&mut buf, version).unwrap();
        buf.freeze()
    }

    #[test]
    fn produce_requests_are_counted_without_decoding_them() {
        for version in 3..=9 {
            let frame = produce_frame(version, 3, 4);
            let expected = Counts {
                topics: 3,
                partitions: 12,
                ..Counts::default()
            };
            assert_eq!(
                scan_produce(&frame, version, 100),
                Some(expected),
                "v{version}"
            );
            let stopped = scan_produce(&frame, version, 5).unwrap();
            assert_eq!(stopped.partitions, 6, "v{version} stops past the cap");
            // Cut short: malformed, left to the decoder.
            assert_eq!(scan_produce(&frame[..frame.len() - 3], version, 100), None);
        }
        let mut garbage = BytesMut::from(&produce_frame(7, 1, 1)[..]);
        garbage.put_bytes(0xff, 3);
        assert!(
            scan_produce(&garbage, 7, 100).is_some(),
            "trailing bytes are the decoder's"
        );
    }

    #[test]
    fn counts_over_a_cap_are_refused_with_the_setting_named() {
        let mut config = BrokerConfig::default();
        config.limits.max_groups_per_request = 2;
        let ids = |n: usize| {
            (0..n)
                .map(|i| GroupId(StrBytes::from_string(format!("g{i}"))))
                .collect::<Vec<_>>()
        };
        let two = m::DescribeGroupsRequest::default().with_groups(ids(2));
        assert_eq!(check(&two.counts(), &config), Ok(()));
        let three = m::DeleteGroupsRequest::default().with_groups_names(ids(3));
        assert_eq!(
            check(&three.counts(), &config),
            Err(OverCap {
                what: "group ids",
                count: 3,
                max: 2,
                setting: "--max-groups-per-request"
            })
        );
    }
}
