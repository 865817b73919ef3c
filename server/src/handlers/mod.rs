//! From a request frame to a response frame: the registration table (which is also what
//! ApiVersions advertises), header decoding, dispatch to one handler per API, and encoding.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable};
use tracing::Instrument;

use crate::broker::Broker;
use crate::response::{Response, SharingBuf};

mod alter_client_quotas;
mod alter_configs;
mod alter_share_group_offsets;
mod api_versions;
mod bounds;
mod create_partitions;
mod create_topics;
mod delete_groups;
mod delete_records;
mod delete_share_group_offsets;
mod delete_topics;
mod describe_client_quotas;
mod describe_cluster;
mod describe_configs;
mod describe_groups;
mod describe_log_dirs;
mod describe_producers;
mod describe_share_group_offsets;
mod describe_user_scram_credentials;
pub(crate) mod errors;
mod fetch;
mod find_coordinator;
mod heartbeat;
mod incremental_alter_configs;
mod init_producer_id;
mod join_group;
mod leave_group;
mod list_groups;
mod list_offsets;
mod metadata;
mod offset_commit;
mod offset_delete;
mod offset_fetch;
mod produce;
mod produce_legacy;
mod share_acknowledge;
pub(crate) mod share_fetch;
mod share_group_describe;
mod share_group_heartbeat;
mod sync_group;

/// One API the broker serves, with the versions it serves.
#[derive(Debug, Clone, Copy)]
pub struct Api {
    pub key: ApiKey,
    pub min: i16,
    pub max: i16,
}

const fn api(key: ApiKey, min: i16, max: i16) -> Api {
    Api { key, min, max }
}

/// Every API served. ApiVersions advertises exactly this table.
pub const APIS: &[Api] = &[
    // Produce 0–2 are advertised (older librdkafka turns compression off otherwise) and
    // answered with UNSUPPORTED_VERSION.
    api(ApiKey::Produce, 0, 9),
    api(ApiKey::Fetch, 4, 12),
    api(ApiKey::ListOffsets, 1, 7),
    api(ApiKey::Metadata, 0, 12),
    api(ApiKey::ApiVersions, 0, 3),
    api(ApiKey::CreateTopics, 2, 5),
    api(ApiKey::DeleteTopics, 1, 5),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::InitProducerId, 0, 4),
    api(ApiKey::FindCoordinator, 0, 3),
    api(ApiKey::JoinGroup, 0, 5),
    api(ApiKey::SyncGroup, 0, 3),
    api(ApiKey::Heartbeat, 0, 3),
    api(ApiKey::LeaveGroup, 0, 3),
    api(ApiKey::OffsetCommit, 2, 8),
    api(ApiKey::OffsetFetch, 1, 7),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::DescribeGroups, 0, 5),
    api(ApiKey::DeleteGroups, 0, 2),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::DescribeLogDirs, 1, 4),
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::ShareGroupHeartbeat, 1, 1),
    api(ApiKey::ShareGroupDescribe, 1, 1),
    api(ApiKey::ShareFetch, 1, 2),
    api(ApiKey::ShareAcknowledge, 1, 2),
    api(ApiKey::DescribeShareGroupOffsets, 0, 1),
    api(ApiKey::AlterShareGroupOffsets, 0, 0),
    api(ApiKey::DeleteShareGroupOffsets, 0, 0),
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
];

/// Why a request could not be answered; the connection is closed with this logged.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("unknown API key {0}")]
    UnknownApi(i16),
    #[error("{key:?} v{version} is not served (versions {min}–{max})")]
    UnsupportedVersion {
        key: ApiKey,
        version: i16,
        min: i16,
        max: i16,
    },
    #[error("malformed {key:?} v{version} {part}: {source}")]
    Malformed {
        key: ApiKey,
        version: i16,
        part: Part,
        source: BoxError,
    },
    #[error("malformed Produce v{version}: {reason}")]
    MalformedLegacyProduce { version: i16, reason: &'static str },
    #[error("{key:?} v{version} names {count} {what}, over the cap of {max} ({setting})")]
    TooMany {
        key: ApiKey,
        version: i16,
        what: &'static str,
        count: usize,
        max: usize,
        setting: &'static str,
    },
    #[error("{key:?} v{version} response could not be encoded: {source}")]
    Encode {
        key: ApiKey,
        version: i16,
        source: BoxError,
    },
}

/// Which part of a request could not be decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Header,
    Body,
}

impl std::fmt::Display for Part {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Part::Header => "header",
            Part::Body => "body",
        })
    }
}

/// kafka-protocol's decoding and encoding errors, kept boxed at this edge.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Who sent a request, and in which version.
#[derive(Debug, Clone)]
pub struct RequestContext {
    pub version: i16,
    pub client_id: String,
    pub peer: SocketAddr,
}

/// A response buffer up to this size is kept from one response to the next; a larger one only
/// while responses stay larger (see [`Session::recycle`]).
const SCRATCH_KEEP: usize = 1024 * 1024;
/// A connection quiet for this long gives back a large response buffer.
pub const SCRATCH_IDLE_RELEASE: std::time::Duration = std::time::Duration::from_secs(1);

/// What a connection keeps from one request to the next.
#[derive(Debug)]
pub struct Session {
    pub peer: SocketAddr,
    /// The client id of the last request (recorded on the connection's span when it changes).
    client_id: Option<String>,
    /// The buffer responses are encoded into and split off: once a response is written and
    /// dropped, the next `reserve` reclaims the same memory, so a consumer's large fetches do
    /// not fault in fresh pages for every response.
    scratch: BytesMut,
    /// `scratch` grew past [`SCRATCH_KEEP`] for a response.
    large: bool,
    /// How long the connection stays muted after the last response (KIP-219): the client went
    /// over a quota.
    throttle: Option<Duration>,
}

impl Session {
    pub fn new(peer: SocketAddr) -> Session {
        Session {
            peer,
            client_id: None,
            scratch: BytesMut::new(),
            large: false,
            throttle: None,
        }
    }

    /// The throttle the last request earned, if any: the connection reads nothing for that
    /// long once its response is out.
    pub fn take_throttle(&mut self) -> Option<Duration> {
        self.throttle.take()
    }

    /// Called once a response of `len` bytes is written and dropped. A buffer that grew past
    /// [`SCRATCH_KEEP`] is kept while responses stay that large (a consumer catching up with
    /// large fetches reuses it: see BENCHMARKS.md, "large fetches"), and given back at the first
    /// smaller one, or when the connection goes quiet ([`SCRATCH_IDLE_RELEASE`]), so that one
    /// large response does not hold its memory for the life of the connection.
    pub fn recycle(&mut self, len: usize) {
        if len > SCRATCH_KEEP {
            self.large = true;
        } else if self.large {
            self.release_buffer();
        }
    }

    /// Whether the response buffer is one to give back when the connection goes quiet.
    pub fn holds_large_buffer(&self) -> bool {
        self.large
    }

    /// Gives the response buffer's memory back.
    pub fn release_buffer(&mut self) {
        self.scratch = BytesMut::new();
        self.large = false;
    }
}

/// Handles one request frame in a span naming the API, version and correlation id. Returns the
/// response frame (length prefix included), or `None` when the request gets no response
/// (Produce with acks=0). Counted and timed per API and version in the broker's metrics.
pub async fn handle(
    broker: &Arc<Broker>,
    frame: Bytes,
    session: &mut Session,
) -> Result<Option<Response>, RequestError> {
    let started = std::time::Instant::now();
    // Frames are at least 8 bytes (the frame reader checks): key and version are there.
    let (key, version) = match frame.get(..4) {
        Some(&[k0, k1, v0, v1]) => (i16::from_be_bytes([k0, k1]), i16::from_be_bytes([v0, v1])),
        _ => (-1, -1),
    };
    let handled = handle_frame(broker, frame, session).await;
    broker
        .metrics
        .request(key, version, started.elapsed(), handled.is_err());
    handled
}

async fn handle_frame(
    broker: &Arc<Broker>,
    frame: Bytes,
    session: &mut Session,
) -> Result<Option<Response>, RequestError> {
    let mut peek = &frame[..];
    let raw_key = peek.get_i16();
    let version = peek.get_i16();
    let correlation_id = peek.get_i32();
    let key = ApiKey::try_from(raw_key).map_err(|_| RequestError::UnknownApi(raw_key))?;
    let api = APIS
        .iter()
        .find(|a| a.key == key)
        .ok_or(RequestError::UnknownApi(raw_key))?;
    if !(api.min..=api.max).contains(&version) {
        if key == ApiKey::ApiVersions {
            // KIP-511: answer with a v0 body listing our ranges, so the client can pick one.
            return Ok(Some(api_versions::unsupported(correlation_id)));
        }
        return Err(RequestError::UnsupportedVersion {
            key,
            version,
            min: api.min,
            max: api.max,
        });
    }
    if key == ApiKey::Produce && version < produce_legacy::MIN_VERSION {
        return produce_legacy::reject(frame, version).map(|r| r.map(Response::from));
    }

    if key == ApiKey::Produce {
        // Counted before it is decoded: a large Produce of empty partitions decodes to ten
        // times its size.
        let cap = usize::try_from(broker.config.limits.max_broker_partitions).unwrap_or(usize::MAX);
        if let Some(counts) = bounds::scan_produce(&frame, version, cap) {
            let named = counts.topics.max(counts.partitions);
            if named > cap {
                return Err(RequestError::TooMany {
                    key,
                    version,
                    what: if counts.partitions > cap {
                        "partitions"
                    } else {
                        "topics"
                    },
                    count: named,
                    max: cap,
                    setting: "--max-broker-partitions",
                });
            }
        }
    }
    let request_bytes = frame.len();
    let mut body = frame;
    let malformed = |part, e: anyhow::Error| RequestError::Malformed {
        key,
        version,
        part,
        source: e.into(),
    };
    let header = RequestHeader::decode(&mut body, key.request_header_version(version))
        .map_err(|e| malformed(Part::Header, e))?;
    let responder = Responder {
        key,
        version,
        correlation_id: header.correlation_id,
    };
    let client_id = header.client_id.as_deref().unwrap_or_default();
    if session.client_id.as_deref() != Some(client_id) {
        tracing::Span::current().record("client_id", client_id);
        session.client_id = Some(client_id.to_string());
    }
    let request_context = RequestContext {
        version,
        client_id: client_id.to_string(),
        peer: session.peer,
    };
    // A Produce or Fetch waits until its quota entity is out of debt (all its connections
    // share the quota); a Produce's bytes are taken out then.
    let produce_throttle = if broker.quotas.any() {
        wait_for_quota(broker, key, client_id, request_bytes).await
    } else {
        Duration::ZERO
    };
    let span = tracing::info_span!("request", api = ?key, version, correlation_id);
    let scratch = &mut session.scratch;
    // `shared`: the record slices of the response, written to the socket from where they lie
    // rather than copied into it (see [`crate::response`]).
    macro_rules! route {
        ($module:ident, $request:ty) => {
            route!($module, $request, |_| Vec::new())
        };
        ($module:ident, $request:ty, $shared:expr) => {{
            let request =
                <$request>::decode(&mut body, version).map_err(|e| malformed(Part::Body, e))?;
            bounds::check(&request, &broker.config).map_err(|over| RequestError::TooMany {
                key,
                version,
                what: over.what,
                count: over.count,
                max: over.max,
                setting: over.setting,
            })?;
            let future = $module::handle(broker, request, &request_context).instrument(span);
            let (handled, busy) = if broker.quotas.any_request_quota() {
                // request_percentage counts the time the handler runs, not the time it waits.
                let mut future = std::pin::pin!(future);
                let mut busy = Duration::ZERO;
                let handled = std::future::poll_fn(|cx| {
                    let started = Instant::now();
                    let polled = future.as_mut().poll(cx);
                    busy += started.elapsed();
                    polled
                })
                .await;
                (handled, Some(busy))
            } else {
                (future.await, None)
            };
            match handled {
                Some(mut response) => {
                    broker.metrics.response(raw_key, version, &response);
                    // A handler's own throttle (a backlog-bounded topic's), and the quotas'.
                    let own = u64::try_from(response.throttle_time_ms()).unwrap_or(0);
                    let mut throttle = Duration::from_millis(own);
                    if broker.quotas.any() {
                        let response_bytes = (key == ApiKey::Fetch)
                            .then(|| response.compute_size(version).unwrap_or(0));
                        throttle = throttle.max(produce_throttle).max(throttle_of(
                            broker,
                            key,
                            &request_context.client_id,
                            response_bytes,
                            busy,
                        ));
                    }
                    if !throttle.is_zero() {
                        let ms = i32::try_from(throttle.as_millis()).unwrap_or(i32::MAX);
                        broker
                            .metrics
                            .record_throttle(&request_context.client_id, ms.unsigned_abs().into());
                        response.set_throttle_time_ms(ms);
                        session.throttle = Some(throttle);
                    }
                    let shared = $shared(&response);
                    responder.respond(&response, scratch, shared).map(Some)
                }
                None => {
                    if broker.quotas.any() {
                        // Produce with acks=0: no response, but the connection is muted.
                        let throttle = produce_throttle.max(throttle_of(
                            broker,
                            key,
                            &request_context.client_id,
                            None,
                            busy,
                        ));
                        let ms = u64::try_from(throttle.as_millis()).unwrap_or(u64::MAX);
                        broker
                            .metrics
                            .record_throttle(&request_context.client_id, ms);
                        session.throttle = (!throttle.is_zero()).then_some(throttle);
                    }
                    Ok(None)
                }
            }
        }};
    }
    use kafka_protocol::messages as m;
    match key {
        ApiKey::Produce => route!(produce, m::ProduceRequest),
        ApiKey::Fetch => route!(fetch, m::FetchRequest, fetch::records),
        ApiKey::ListOffsets => route!(list_offsets, m::ListOffsetsRequest),
        ApiKey::Metadata => route!(metadata, m::MetadataRequest),
        ApiKey::ApiVersions => route!(api_versions, m::ApiVersionsRequest),
        ApiKey::CreateTopics => route!(create_topics, m::CreateTopicsRequest),
        ApiKey::DeleteTopics => route!(delete_topics, m::DeleteTopicsRequest),
        ApiKey::DescribeConfigs => route!(describe_configs, m::DescribeConfigsRequest),
        ApiKey::InitProducerId => route!(init_producer_id, m::InitProducerIdRequest),
        ApiKey::FindCoordinator => route!(find_coordinator, m::FindCoordinatorRequest),
        ApiKey::JoinGroup => route!(join_group, m::JoinGroupRequest),
        ApiKey::SyncGroup => route!(sync_group, m::SyncGroupRequest),
        ApiKey::Heartbeat => route!(heartbeat, m::HeartbeatRequest),
        ApiKey::LeaveGroup => route!(leave_group, m::LeaveGroupRequest),
        ApiKey::OffsetCommit => route!(offset_commit, m::OffsetCommitRequest),
        ApiKey::OffsetFetch => route!(offset_fetch, m::OffsetFetchRequest),
        ApiKey::ListGroups => route!(list_groups, m::ListGroupsRequest),
        ApiKey::DescribeGroups => route!(describe_groups, m::DescribeGroupsRequest),
        ApiKey::DeleteGroups => route!(delete_groups, m::DeleteGroupsRequest),
        ApiKey::OffsetDelete => route!(offset_delete, m::OffsetDeleteRequest),
        ApiKey::IncrementalAlterConfigs => {
            route!(incremental_alter_configs, m::IncrementalAlterConfigsRequest)
        }
        ApiKey::AlterConfigs => route!(alter_configs, m::AlterConfigsRequest),
        ApiKey::CreatePartitions => route!(create_partitions, m::CreatePartitionsRequest),
        ApiKey::DeleteRecords => route!(delete_records, m::DeleteRecordsRequest),
        ApiKey::DescribeCluster => route!(describe_cluster, m::DescribeClusterRequest),
        ApiKey::DescribeLogDirs => route!(describe_log_dirs, m::DescribeLogDirsRequest),
        ApiKey::DescribeProducers => route!(describe_producers, m::DescribeProducersRequest),
        ApiKey::ShareGroupHeartbeat => route!(share_group_heartbeat, m::ShareGroupHeartbeatRequest),
        ApiKey::ShareGroupDescribe => route!(share_group_describe, m::ShareGroupDescribeRequest),
        ApiKey::ShareFetch => route!(share_fetch, m::ShareFetchRequest, share_fetch::records),
        ApiKey::ShareAcknowledge => route!(share_acknowledge, m::ShareAcknowledgeRequest),
        ApiKey::DescribeShareGroupOffsets => {
            route!(
                describe_share_group_offsets,
                m::DescribeShareGroupOffsetsRequest
            )
        }
        ApiKey::AlterShareGroupOffsets => {
            route!(alter_share_group_offsets, m::AlterShareGroupOffsetsRequest)
        }
        ApiKey::DeleteShareGroupOffsets => {
            route!(
                delete_share_group_offsets,
                m::DeleteShareGroupOffsetsRequest
            )
        }
        ApiKey::DescribeClientQuotas => {
            route!(describe_client_quotas, m::DescribeClientQuotasRequest)
        }
        ApiKey::AlterClientQuotas => route!(alter_client_quotas, m::AlterClientQuotasRequest),
        ApiKey::DescribeUserScramCredentials => route!(
            describe_user_scram_credentials,
            m::DescribeUserScramCredentialsRequest
        ),
        _ => Err(RequestError::UnknownApi(raw_key)),
    }
}

/// Before a Produce or Fetch is handled: waits until the byte-rate bucket of its quota entity
/// is out of debt (every connection of the entity waits on the same bucket; shutdown ends the
/// wait). A Produce's request bytes are then taken out; returns the throttle they earned.
async fn wait_for_quota(
    broker: &Broker,
    key: ApiKey,
    client_id: &str,
    request_bytes: usize,
) -> Duration {
    use crate::quotas::QuotaKind;
    let kind = match key {
        ApiKey::Produce => QuotaKind::ProducerByteRate,
        ApiKey::Fetch => QuotaKind::ConsumerByteRate,
        _ => return Duration::ZERO,
    };
    let quotas = &broker.quotas;
    let mut shutdown = broker.shutdown.clone();
    // Ends when the debt is paid: each round sleeps until then, and the bucket fills at its
    // quota meanwhile.
    loop {
        let debt = quotas.debt(kind, client_id, Instant::now());
        if debt.is_zero() || broker.is_shutting_down() {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(debt) => {}
            _ = shutdown.changed() => break,
        }
    }
    if kind == QuotaKind::ProducerByteRate {
        quotas.record(kind, client_id, request_bytes as f64, Instant::now())
    } else {
        Duration::ZERO
    }
}

/// The throttle a request earned after it was handled (KIP-219): the longest of its Fetch
/// byte-rate quota's (response bytes) and its `request_percentage` quota's (handler time).
/// (A Produce's bytes were counted before it was handled: [`wait_for_quota`].)
fn throttle_of(
    broker: &Broker,
    key: ApiKey,
    client_id: &str,
    response_bytes: Option<usize>,
    busy: Option<Duration>,
) -> Duration {
    use crate::quotas::QuotaKind;
    let quotas = &broker.quotas;
    let now = Instant::now();
    let bytes = match key {
        ApiKey::Fetch => response_bytes.map(|n| (QuotaKind::ConsumerByteRate, n)),
        _ => None,
    };
    let by_bytes = bytes.map_or(Duration::ZERO, |(kind, n)| {
        quotas.record(kind, client_id, n as f64, now)
    });
    let by_time = busy.map_or(Duration::ZERO, |busy| {
        quotas.record(
            QuotaKind::RequestPercentage,
            client_id,
            busy.as_secs_f64() * 100.0,
            now,
        )
    });
    by_bytes.max(by_time)
}

/// A response's `throttle_time_ms` (every response lograil sends has one in its recent
/// versions; older versions drop it when encoded).
pub trait Throttled {
    fn set_throttle_time_ms(&mut self, ms: i32);
    /// What the handler set (the backlog bound's throttle of a Produce), 0 if nothing.
    fn throttle_time_ms(&self) -> i32;
}

macro_rules! throttled {
    ($($response:ident),* $(,)?) => {
        $(impl Throttled for kafka_protocol::messages::$response {
            fn set_throttle_time_ms(&mut self, ms: i32) {
                self.throttle_time_ms = ms;
            }

            fn throttle_time_ms(&self) -> i32 {
                self.throttle_time_ms
            }
        })*
    };
}

throttled!(
    ProduceResponse,
    FetchResponse,
    ListOffsetsResponse,
    MetadataResponse,
    ApiVersionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    DescribeConfigsResponse,
    InitProducerIdResponse,
    FindCoordinatorResponse,
    JoinGroupResponse,
    SyncGroupResponse,
    HeartbeatResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    ListGroupsResponse,
    DescribeGroupsResponse,
    DeleteGroupsResponse,
    OffsetDeleteResponse,
    IncrementalAlterConfigsResponse,
    AlterConfigsResponse,
    CreatePartitionsResponse,
    DeleteRecordsResponse,
    DescribeClusterResponse,
    DescribeLogDirsResponse,
    DescribeProducersResponse,
    ShareGroupHeartbeatResponse,
    ShareGroupDescribeResponse,
    ShareFetchResponse,
    ShareAcknowledgeResponse,
    DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsResponse,
    DescribeClientQuotasResponse,
    AlterClientQuotasResponse,
    DescribeUserScramCredentialsResponse,
);

struct Responder {
    key: ApiKey,
    version: i16,
    correlation_id: i32,
}

impl Responder {
    /// Encodes `body` into `scratch`, sharing the slices of `shared` (see
    /// [`Response::encode`]).
    fn respond<T: Encodable>(
        &self,
        body: &T,
        scratch: &mut BytesMut,
        shared: Vec<Bytes>,
    ) -> Result<Response, RequestError> {
        let header = ResponseHeader::default().with_correlation_id(self.correlation_id);
        let header_version = self.key.response_header_version(self.version);
        Response::encode(scratch, shared, |out| {
            encode_frame(&header, header_version, body, self.version, out)
        })
        .map_err(|source| RequestError::Encode {
            key: self.key,
            version: self.version,
            source,
        })
    }
}

/// Length prefix, header, body.
fn encode_frame<T: Encodable>(
    header: &ResponseHeader,
    header_version: i16,
    body: &T,
    version: i16,
    out: &mut SharingBuf,
) -> Result<(), BoxError> {
    let size = header.compute_size(header_version)? + body.compute_size(version)?;
    let prefix =
        i32::try_from(size).map_err(|_| format!("response of {size} bytes exceeds 2 GiB"))?;
    out.reserve(4 + size);
    out.put_i32(prefix);
    header.encode(out, header_version)?;
    body.encode(out, version)?;
    Ok(())
}
