//! The Kafka APIs the broker serves: one [`Handler`] per request type, implemented in the
//! file of its API (versions served, what the request counts against the bounds, where its
//! response carries `throttle_time_ms` and error codes, and the handler itself), and the
//! [`apis!`] table below that lists them once. ApiVersions, dispatch and the request metrics
//! all read that table; [`request`] takes a frame through it.
//!
//! A new API is a file here with its `impl Handler` and one line in the table.

use std::future::Future;
use std::sync::{Arc, LazyLock};

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::Request;

use crate::broker::Broker;
pub use crate::metrics::Api;
use bounds::Counts;
pub use request::{handle, RequestContext, RequestError, Session, SCRATCH_IDLE_RELEASE};

mod bounds;
pub(crate) mod errors;
#[cfg(test)]
mod internal_failures;
mod produce_legacy;
mod request;
mod throttle;

/// One API: how its requests are answered. `Self` is the decoded request; the response type
/// is kafka-protocol's for it.
pub(crate) trait Handler: Request + Send + 'static
where
    Self::Response: Send,
{
    /// The versions advertised in ApiVersions (`min..=max`); a request in any other version
    /// closes the connection (ApiVersions answers it: KIP-511).
    const SERVED: (i16, i16);

    /// What the request names, checked against the broker's caps before it is handled
    /// ([`bounds`]).
    fn counts(&self) -> Counts {
        Counts::default()
    }

    /// Whether the request gets a response at all: only a Produce with acks=0 does not.
    fn answered(&self) -> bool {
        true
    }

    /// Answers the request. Every failure is an answer: a Kafka error code in the response.
    fn handle(
        broker: &Arc<Broker>,
        request: Self,
        ctx: &RequestContext,
    ) -> impl Future<Output = Self::Response> + Send;

    /// The response's `throttle_time_ms` (KIP-219: every response lograil sends has one in its
    /// recent versions; older versions drop it when encoded).
    fn throttle_time_ms(response: &mut Self::Response) -> &mut i32;

    /// Calls `f` with every error code in the response (top level, per topic, partition,
    /// group, member), 0 included: counted in `lograil_response_errors_total`.
    fn each_error(response: &Self::Response, f: &mut dyn FnMut(i16));

    /// The record slices of the response, written from where they lie instead of copied
    /// (see [`crate::response`]).
    fn shared(_: &Self::Response) -> Vec<Bytes> {
        Vec::new()
    }
}

/// The served APIs: each entry is a handler module and its request type. Generates the
/// module declarations, [`APIS`], the dispatch by API key and a test that each module's
/// header names the versions its handler serves.
macro_rules! apis {
    ($($module:ident: $request:ident),* $(,)?) => {
        $(mod $module;)*

        /// Every API served, as ApiVersions advertises it.
        pub static APIS: LazyLock<Vec<Api>> = LazyLock::new(|| {
            vec![$(api::<kafka_protocol::messages::$request>()),*]
        });

        /// Runs the handler of `key` on the request `call` carries.
        async fn dispatch(
            key: ApiKey,
            call: request::Call<'_>,
        ) -> Result<Option<crate::response::Response>, RequestError> {
            $(if key as i16 == <kafka_protocol::messages::$request as Request>::KEY {
                return call.run::<kafka_protocol::messages::$request>().await;
            })*
            Err(RequestError::UnknownApi(key as i16))
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
    share_group_heartbeat: ShareGroupHeartbeatRequest,
    share_group_describe: ShareGroupDescribeRequest,
    share_fetch: ShareFetchRequest,
    share_acknowledge: ShareAcknowledgeRequest,
    describe_share_group_offsets: DescribeShareGroupOffsetsRequest,
    alter_share_group_offsets: AlterShareGroupOffsetsRequest,
    delete_share_group_offsets: DeleteShareGroupOffsetsRequest,
    describe_client_quotas: DescribeClientQuotasRequest,
    alter_client_quotas: AlterClientQuotasRequest,
    describe_user_scram_credentials: DescribeUserScramCredentialsRequest,
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
        assert!(served(ApiKey::WriteTxnMarkers as i16).is_none());
    }
}
