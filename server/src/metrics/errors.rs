//! The Kafka error codes a response carries, wherever the message puts them (top level, per
//! topic, per partition, per group, per member), for `lograil_response_errors_total`: one
//! implementation per response the broker sends, next to each other so a new API is one more
//! entry here (the dispatcher does not compile without it).

use kafka_protocol::messages::*;

/// A response whose error codes can be listed.
pub trait ResponseErrors {
    /// Calls `f` with every error code in the response, 0 included.
    fn each_error(&self, f: &mut dyn FnMut(i16));
}

macro_rules! errors {
    ($($t:ty => |$r:ident, $f:ident| $body:expr;)*) => {$(
        impl ResponseErrors for $t {
            fn each_error(&self, $f: &mut dyn FnMut(i16)) {
                let $r = self;
                $body
            }
        }
    )*};
}

errors! {
    ProduceResponse => |r, f| r.responses.iter().flat_map(|t| &t.partition_responses).for_each(|p| f(p.error_code));
    FetchResponse => |r, f| {
        f(r.error_code);
        r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    };
    ListOffsetsResponse => |r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    MetadataResponse => |r, f| {
        f(r.error_code);
        for t in &r.topics {
            f(t.error_code);
            t.partitions.iter().for_each(|p| f(p.error_code));
        }
    };
    ApiVersionsResponse => |r, f| f(r.error_code);
    CreateTopicsResponse => |r, f| r.topics.iter().for_each(|t| f(t.error_code));
    DeleteTopicsResponse => |r, f| r.responses.iter().for_each(|t| f(t.error_code));
    DescribeConfigsResponse => |r, f| r.results.iter().for_each(|t| f(t.error_code));
    InitProducerIdResponse => |r, f| f(r.error_code);
    FindCoordinatorResponse => |r, f| {
        f(r.error_code);
        r.coordinators.iter().for_each(|c| f(c.error_code));
    };
    JoinGroupResponse => |r, f| f(r.error_code);
    SyncGroupResponse => |r, f| f(r.error_code);
    HeartbeatResponse => |r, f| f(r.error_code);
    LeaveGroupResponse => |r, f| {
        f(r.error_code);
        r.members.iter().for_each(|m| f(m.error_code));
    };
    OffsetCommitResponse => |r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    OffsetFetchResponse => |r, f| {
        f(r.error_code);
        r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        for g in &r.groups {
            f(g.error_code);
            g.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }
    };
    ListGroupsResponse => |r, f| f(r.error_code);
    DescribeGroupsResponse => |r, f| r.groups.iter().for_each(|g| f(g.error_code));
    DeleteGroupsResponse => |r, f| r.results.iter().for_each(|g| f(g.error_code));
    OffsetDeleteResponse => |r, f| {
        f(r.error_code);
        r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    };
    IncrementalAlterConfigsResponse => |r, f| r.responses.iter().for_each(|c| f(c.error_code));
    AlterConfigsResponse => |r, f| r.responses.iter().for_each(|c| f(c.error_code));
    CreatePartitionsResponse => |r, f| r.results.iter().for_each(|t| f(t.error_code));
    DeleteRecordsResponse => |r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    DescribeClusterResponse => |r, f| f(r.error_code);
    DescribeLogDirsResponse => |r, f| {
        f(r.error_code);
        r.results.iter().for_each(|d| f(d.error_code));
    };
    DescribeProducersResponse => |r, f| r.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    ShareGroupHeartbeatResponse => |r, f| f(r.error_code);
    ShareGroupDescribeResponse => |r, f| r.groups.iter().for_each(|g| f(g.error_code));
    ShareFetchResponse => |r, f| {
        f(r.error_code);
        for p in r.responses.iter().flat_map(|t| &t.partitions) {
            f(p.error_code);
            f(p.acknowledge_error_code);
        }
    };
    ShareAcknowledgeResponse => |r, f| {
        f(r.error_code);
        r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    };
    DescribeShareGroupOffsetsResponse => |r, f| {
        for g in &r.groups {
            f(g.error_code);
            g.topics.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
        }
    };
    AlterShareGroupOffsetsResponse => |r, f| {
        f(r.error_code);
        r.responses.iter().flat_map(|t| &t.partitions).for_each(|p| f(p.error_code));
    };
    DescribeClientQuotasResponse => |r, f| f(r.error_code);
    AlterClientQuotasResponse => |r, f| r.entries.iter().for_each(|e| f(e.error_code));
    DescribeUserScramCredentialsResponse => |r, f| {
        f(r.error_code);
        r.results.iter().for_each(|u| f(u.error_code));
    };
    DeleteShareGroupOffsetsResponse => |r, f| {
        f(r.error_code);
        r.responses.iter().for_each(|t| f(t.error_code));
    };
}

/// Kafka's name of an error code, as its tools and metrics spell it (`UNKNOWN_TOPIC_OR_PARTITION`);
/// the number for a code kafka-protocol does not know.
pub fn error_name(code: i16) -> String {
    match kafka_protocol::error::ResponseError::try_from_code(code) {
        Some(kafka_protocol::error::ResponseError::Unknown(_)) | None => code.to_string(),
        Some(error) => {
            let camel = error.to_string();
            let mut out = String::with_capacity(camel.len() + 8);
            for (i, c) in camel.chars().enumerate() {
                if c.is_ascii_uppercase() && i > 0 {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
            }
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::produce_response::{
        PartitionProduceResponse, TopicProduceResponse,
    };

    use super::*;

    #[test]
    fn error_names_are_kafkas() {
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(2), "CORRUPT_MESSAGE");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(9999), "9999");
    }

    #[test]
    fn partition_errors_are_found() {
        let response =
            ProduceResponse::default().with_responses(vec![TopicProduceResponse::default()
                .with_partition_responses(vec![
                    PartitionProduceResponse::default().with_error_code(3),
                    PartitionProduceResponse::default(),
                    PartitionProduceResponse::default().with_error_code(2),
                ])]);
        let mut codes = Vec::new();
        response.each_error(&mut |c| codes.push(c));
        assert_eq!(codes, vec![3, 0, 2]);
    }
}
