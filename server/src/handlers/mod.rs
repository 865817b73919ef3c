//! The Kafka APIs the broker serves: one [`Handler`] per request type, implemented in the
//! file of its API (versions served, what the request counts against the bounds, where its
//! response carries `throttle_time_ms` and error codes, and the handler itself), and the
//! [`apis!`] table below that lists them once. ApiVersions, dispatch and the request metrics
//! all read that table; [`request`] takes a frame through it. Files import downwards only:
//! `request` → this table → `handler` (the trait), and each API's file → `handler`.
//!
//! A new API is a file here with its `impl Handler`, its `mod` line and one line in the table.

use std::sync::LazyLock;

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Request;

pub use crate::metrics::Api;
pub(crate) use handler::{Handler, RequestContext, Route};

mod assignment;
mod authorize;
mod bounds;
pub(crate) mod errors;
mod handler;
#[cfg(test)]
mod internal_failures;
mod pattern;
mod produce_legacy;
pub mod request;
mod throttle;

// One file per API (declared here, not by the macro, so that rustfmt sees them).
mod add_offsets_to_txn;
mod add_partitions_to_txn;
mod alter_client_quotas;
mod alter_configs;
mod alter_share_group_offsets;
mod alter_user_scram_credentials;
mod api_versions;
mod consumer_group_describe;
mod consumer_group_heartbeat;
mod create_acls;
mod create_partitions;
mod create_topics;
mod delete_acls;
mod delete_groups;
mod delete_records;
mod delete_share_group_offsets;
mod delete_topics;
mod describe_acls;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_share_group_offsets;
mod describe_transactions;
mod describe_user_scram_credentials;
mod end_txn;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod list_transactions;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod produce;
mod sasl_authenticate;
mod sasl_handshake;
mod share_acknowledge;
mod share_fetch;
mod share_group_describe;
mod share_group_heartbeat;
mod streams_beat;
mod streams_group_describe;
mod streams_group_heartbeat;
mod sync_group;
mod transaction;
mod txn_offset_commit;
mod write_txn_markers;

/// The served APIs: each entry is a handler module and its request type. Generates [`APIS`],
/// the dispatch by API key and a test that each module's header names the versions its
/// handler serves.
macro_rules! apis {
    ($($module:ident: $request:ident),* $(,)?) => {
        /// Every API served, as ApiVersions advertises it.
        pub static APIS: LazyLock<Vec<Api>> = LazyLock::new(|| {
            vec![$(api::<kafka_protocol::messages::$request>()),*]
        });

        /// Takes `route` to the handler of API `key`; `None` when no API of that key is served.
        async fn dispatch<R: Route>(key: i16, route: R) -> Option<R::Output> {
            $(if key == <kafka_protocol::messages::$request as Request>::KEY {
                return Some(route.route::<kafka_protocol::messages::$request>().await);
            })*
            None
        }

        #[cfg(test)]
        const HEADERS: &[(&str, &str)] = &[
            $((stringify!($request), include_str!(concat!(stringify!($module), ".rs")))),*
        ];
    };
}

apis! {
    produce: ProduceRequest,
    fetch: FetchRequest,
    list_offsets: ListOffsetsRequest,
    metadata: MetadataRequest,
    api_versions: ApiVersionsRequest,
    create_topics: CreateTopicsRequest,
    delete_topics: DeleteTopicsRequest,
    describe_configs: DescribeConfigsRequest,
    init_producer_id: InitProducerIdRequest,
    find_coordinator: FindCoordinatorRequest,
    join_group: JoinGroupRequest,
    sync_group: SyncGroupRequest,
    heartbeat: HeartbeatRequest,
    leave_group: LeaveGroupRequest,
    offset_commit: OffsetCommitRequest,
    offset_fetch: OffsetFetchRequest,
    list_groups: ListGroupsRequest,
    describe_groups: DescribeGroupsRequest,
    delete_groups: DeleteGroupsRequest,
    offset_delete: OffsetDeleteRequest,
    incremental_alter_configs: IncrementalAlterConfigsRequest,
    alter_configs: AlterConfigsRequest,
    create_partitions: CreatePartitionsRequest,
    delete_records: DeleteRecordsRequest,
    describe_cluster: DescribeClusterRequest,
    describe_log_dirs: DescribeLogDirsRequest,
    describe_producers: DescribeProducersRequest,
    add_partitions_to_txn: AddPartitionsToTxnRequest,
    add_offsets_to_txn: AddOffsetsToTxnRequest,
    end_txn: EndTxnRequest,
    txn_offset_commit: TxnOffsetCommitRequest,
    describe_transactions: DescribeTransactionsRequest,
    list_transactions: ListTransactionsRequest,
    write_txn_markers: WriteTxnMarkersRequest,
    consumer_group_heartbeat: ConsumerGroupHeartbeatRequest,
    consumer_group_describe: ConsumerGroupDescribeRequest,
    share_group_heartbeat: ShareGroupHeartbeatRequest,
    share_group_describe: ShareGroupDescribeRequest,
    streams_group_heartbeat: StreamsGroupHeartbeatRequest,
    streams_group_describe: StreamsGroupDescribeRequest,
    share_fetch: ShareFetchRequest,
    share_acknowledge: ShareAcknowledgeRequest,
    describe_share_group_offsets: DescribeShareGroupOffsetsRequest,
    alter_share_group_offsets: AlterShareGroupOffsetsRequest,
    delete_share_group_offsets: DeleteShareGroupOffsetsRequest,
    describe_client_quotas: DescribeClientQuotasRequest,
    alter_client_quotas: AlterClientQuotasRequest,
    describe_user_scram_credentials: DescribeUserScramCredentialsRequest,
    alter_user_scram_credentials: AlterUserScramCredentialsRequest,
    sasl_handshake: SaslHandshakeRequest,
    sasl_authenticate: SaslAuthenticateRequest,
    create_acls: CreateAclsRequest,
    describe_acls: DescribeAclsRequest,
    delete_acls: DeleteAclsRequest,
}

fn api<H: Handler>() -> Api
where
    H::Response: Send,
{
    let (min, max) = H::SERVED;
    match ApiKey::try_from(H::KEY) {
        Ok(key) => Api { key, min, max },
        // kafka-protocol's request types each carry their own key.
        Err(()) => unreachable!("request type with API key {} unknown to ApiKey", H::KEY),
    }
}

/// The API served under `key`, if any.
fn served(key: i16) -> Option<&'static Api> {
    APIS.iter().find(|api| api.key as i16 == key)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// Each handler file opens with "<Api>, version N" or "<Api>, versions A–B": the versions
    /// its `impl Handler` serves.
    #[test]
    fn every_handler_header_names_the_versions_it_serves() {
        assert_eq!(HEADERS.len(), APIS.len());
        for ((request, source), api) in HEADERS.iter().zip(APIS.iter()) {
            let name = request.strip_suffix("Request").unwrap();
            let versions = if api.min == api.max {
                format!("{name}, version {}", api.min)
            } else {
                format!("{name}, versions {}–{}", api.min, api.max)
            };
            let header = source.lines().next().unwrap();
            assert!(
                header.starts_with(&format!("//! {versions}")),
                "the header of the {name} handler should start with \"{versions}\": {header:?}"
            );
        }
    }

    #[test]
    fn each_api_is_listed_once() {
        let mut keys: Vec<i16> = APIS.iter().map(|a| a.key as i16).collect();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), APIS.len());
        assert!(served(ApiKey::Produce as i16).is_some());
        assert!(served(ApiKey::OffsetForLeaderEpoch as i16).is_none());
    }
}
