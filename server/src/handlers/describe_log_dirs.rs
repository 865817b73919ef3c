//! DescribeLogDirs, versions 1–4 (`kafka-log-dirs --describe`): the one log dir is the data
//! directory; each partition's size is the bytes of its segment files. Null topics ask for
//! every topic; a named topic that does not exist is left out, as Kafka does. Offset lag is 0
//! and no partition is a "future" replica (there are no other dirs to move to). Deviation: the
//! volume's total and usable bytes (v4) are -1, Kafka's "unknown". Authorization: DESCRIBE on
//! the cluster, else no dirs and (v3+) CLUSTER_AUTHORIZATION_FAILED, as Kafka.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};
use kafka_protocol::protocol::StrBytes;
use log_core::Topic;

use super::bounds::{topics_and_partitions, Counts};
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;

fn describe(topic: &Topic, wanted: Option<&[i32]>) -> DescribeLogDirsTopic {
    let partitions = (0..)
        .zip(topic.partitions())
        .filter(|(index, _)| wanted.is_none_or(|w| w.contains(index)))
        .map(|(index, partition)| {
            DescribeLogDirsPartition::default()
                .with_partition_index(index)
                .with_partition_size(i64::try_from(partition.size_bytes()).unwrap_or(i64::MAX))
                .with_offset_lag(0)
                .with_is_future_key(false)
        })
        .collect();
    DescribeLogDirsTopic::default()
        .with_name(StrBytes::from_string(topic.name().to_string()).into())
        .with_partitions(partitions)
}

impl Handler for DescribeLogDirsRequest {
    const SERVED: (i16, i16) = (1, 4);
    type Needs = Arc<Storage>;

    fn counts(&self) -> Counts {
        let topics = self.topics.as_deref().unwrap_or_default();
        topics_and_partitions(topics, |t| t.partitions.len())
    }

    async fn handle(
        storage: Self::Needs,
        request: DescribeLogDirsRequest,
        ctx: &RequestContext,
    ) -> DescribeLogDirsResponse {
        if !ctx.authorize_cluster(Operation::Describe) {
            return DescribeLogDirsResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        }
        let topics: Vec<DescribeLogDirsTopic> = match &request.topics {
            None => storage
                .log
                .topics()
                .iter()
                .map(|t| describe(t, None))
                .collect(),
            Some(asked) => asked
                .iter()
                .filter_map(|a| {
                    let topic = storage.log.topic(&a.topic)?;
                    Some(describe(&topic, Some(&a.partitions)))
                })
                .collect(),
        };
        let dir = std::fs::canonicalize(storage.log.dir())
            .unwrap_or_else(|_| storage.log.dir().to_path_buf());
        let result = DescribeLogDirsResult::default()
            .with_log_dir(StrBytes::from_string(dir.display().to_string()))
            .with_topics(topics)
            .with_total_bytes(-1)
            .with_usable_bytes(-1);
        DescribeLogDirsResponse::default().with_results(vec![result])
    }

    fn throttle_time_ms(response: &mut DescribeLogDirsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeLogDirsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.results.iter().for_each(|d| f(d.error_code));
    }
}
