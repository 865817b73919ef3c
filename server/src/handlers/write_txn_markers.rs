//! WriteTxnMarkers, versions 1–2 (v2, KIP-1228, adds each marker's transaction version, which
//! lograil takes and does not need: a partition checks a marker's epoch the same way for
//! every version, not older than the producer's): writes a COMMIT or ABORT marker of
//! the given producer, epoch and coordinator epoch to each partition named, each durable
//! before the answer. lograil's own coordinator writes its markers without this request; what
//! sends it is `kafka-transactions abort` (Admin's abortTransaction), to end a hanging
//! transaction on a partition. The checks are the partition's (`Appender::write_marker`): an
//! older producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch
//! TRANSACTION_COORDINATOR_FENCED, an unknown partition UNKNOWN_TOPIC_OR_PARTITION, an
//! internal topic INVALID_TOPIC_EXCEPTION. Authorization: CLUSTER_ACTION on the cluster, else
//! CLUSTER_AUTHORIZATION_FAILED for every partition.

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use record_batch::ControlType;

use super::bounds::Counts;
use super::Handler;
use super::{errors, RequestContext};
use crate::appender::{AppendMode, Appended, Marker, ProduceError};
use crate::broker::Storage;

impl Handler for WriteTxnMarkersRequest {
    const SERVED: (i16, i16) = (1, 2);
    type Needs = Arc<Storage>;

    fn counts(&self) -> Counts {
        let topics = self.markers.iter().flat_map(|m| &m.topics);
        Counts {
            topics: topics.clone().count(),
            partitions: topics.map(|t| t.partition_indexes.len()).sum(),
            ..Counts::default()
        }
    }

    async fn handle(
        storage: Self::Needs,
        request: WriteTxnMarkersRequest,
        ctx: &RequestContext,
    ) -> WriteTxnMarkersResponse {
        let allowed = ctx.authorize_cluster(Operation::ClusterAction);
        let mut results = Vec::with_capacity(request.markers.len());
        for marker in request.markers {
            let kind = if marker.transaction_result {
                ControlType::Commit
            } else {
                ControlType::Abort
            };
            let (producer_id, epoch, coordinator_epoch) = (
                marker.producer_id.0,
                marker.producer_epoch,
                marker.coordinator_epoch,
            );
            let mut topics = Vec::with_capacity(marker.topics.len());
            for topic in marker.topics {
                let name = topic.name.to_string();
                let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
                for index in topic.partition_indexes {
                    let code = if !allowed {
                        ResponseError::ClusterAuthorizationFailed.code()
                    } else {
                        let (owner, topic) = (storage.clone(), name.clone());
                        let written = crate::blocking::spawn(move || {
                            owner.appender().write_marker(
                                &topic,
                                index,
                                Marker {
                                    producer_id,
                                    producer_epoch: epoch,
                                    coordinator_epoch,
                                    kind,
                                },
                                AppendMode::Blocking,
                            )
                        })
                        .await
                        .unwrap_or_else(|e| Err(ProduceError::TaskFailed(e.to_string())));
                        let durable = match written {
                            Ok(appended) => durable(&storage, &appended).await,
                            Err(e) => Err(e),
                        };
                        durable.err().map_or(0, |e| errors::produce(&e, 9).code())
                    };
                    partitions.push(
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(index)
                            .with_error_code(code),
                    );
                }
                topics.push(
                    WritableTxnMarkerTopicResult::default()
                        .with_name(topic.name)
                        .with_partitions(partitions),
                );
            }
            results.push(
                WritableTxnMarkerResult::default()
                    .with_producer_id(marker.producer_id)
                    .with_topics(topics),
            );
        }
        storage.appended.notify_waiters();
        WriteTxnMarkersResponse::default().with_markers(results)
    }

    /// WriteTxnMarkers carries no throttle time (brokers send it to brokers).
    fn throttle_time_ms(_: &mut WriteTxnMarkersResponse) -> Option<&mut i32> {
        None
    }

    fn each_error(r: &WriteTxnMarkersResponse, f: &mut dyn FnMut(i16)) {
        r.markers
            .iter()
            .flat_map(|m| &m.topics)
            .flat_map(|t| &t.partitions)
            .for_each(|p| f(p.error_code))
    }
}

async fn durable(storage: &Arc<Storage>, appended: &Appended) -> Result<(), ProduceError> {
    appended.durable(&storage.syncer).await
}
