//! What the coordinator takes and answers: the requests' parts it needs, its replies, and the
//! views DescribeGroups shows. Errors are Kafka's own ([`ResponseError`]).

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use tokio::sync::oneshot;

/// Group settings, Kafka's broker defaults.
#[derive(Debug, Clone)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms`: how long a new group waits for more members.
    pub initial_rebalance_delay: Duration,
    /// `group.min.session.timeout.ms`: a JoinGroup asking for a shorter session timeout gets
    /// INVALID_SESSION_TIMEOUT.
    pub min_session_timeout: Duration,
    /// `group.max.session.timeout.ms`: a JoinGroup asking for a longer one gets
    /// INVALID_SESSION_TIMEOUT.
    pub max_session_timeout: Duration,
    /// `group.max.size`: members of one group, pending member ids included.
    pub max_size: usize,
    /// Consumer-protocol groups' settings (`group.consumer.*`).
    pub consumer: super::consumer::ConsumerConfig,
    /// Streams groups' settings (`group.streams.*`).
    pub streams: super::streams::StreamsConfig,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay: Duration::from_millis(3000),
            min_session_timeout: Duration::from_millis(6000),
            max_session_timeout: Duration::from_millis(1_800_000),
            max_size: 1000,
            consumer: super::consumer::ConsumerConfig::default(),
            streams: super::streams::StreamsConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// The names Kafka's tools print.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// An answer now, or one to wait for.
#[derive(Debug)]
pub enum Reply<T> {
    Now(T),
    Later(oneshot::Receiver<T>),
}

/// A JoinGroup request, as the coordinator needs it.
#[derive(Debug, Clone)]
pub struct Join {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout: Duration,
    pub rebalance_timeout: Duration,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// JoinGroup v4+: a new member first gets its id with MEMBER_ID_REQUIRED.
    pub require_known_member_id: bool,
}

/// The answer to a JoinGroup.
#[derive(Debug, Clone, Default)]
pub struct Joined {
    pub error: Option<ResponseError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, instance id, metadata): for the leader only.
    pub members: Vec<(String, Option<String>, Bytes)>,
}

impl Joined {
    /// A refused join (MEMBER_ID_REQUIRED carries the member id the client must use).
    pub fn failed(error: ResponseError, member_id: &str) -> Joined {
        Joined {
            error: Some(error),
            generation: -1,
            member_id: member_id.to_string(),
            ..Joined::default()
        }
    }
}

/// The answer to a SyncGroup.
#[derive(Debug, Clone, Default)]
pub struct Synced {
    pub error: Option<ResponseError>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl Synced {
    pub fn failed(error: ResponseError) -> Synced {
        Synced {
            error: Some(error),
            ..Synced::default()
        }
    }
}

/// What DescribeGroups shows of a member.
#[derive(Debug, Clone)]
pub struct MemberView {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

#[derive(Debug, Clone)]
pub struct GroupView {
    pub state: GroupState,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<MemberView>,
}
