//! Share-group membership (KIP-932): the member id this client makes up, and a task that
//! heartbeats the group's coordinator with ShareGroupHeartbeat, keeps the member in the group
//! and publishes the partitions it is assigned. Leaving is a heartbeat at epoch -1.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::share_group_heartbeat_response::Assignment as HeartbeatAssignment;
use kafka_protocol::messages::{
    ApiKey, GroupId, ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, TopicName,
};
use tokio::sync::watch;
use uuid::Uuid;

use crate::cluster::Cluster;
use crate::error::{CallError, ErrorCode};
use crate::util::{backoff, text};

/// A partition by topic id, as share groups address it.
pub(crate) type IdPartition = (Uuid, i32);

/// What the coordinator last said about this member.
#[derive(Debug, Clone, Default)]
pub(crate) struct Assignment {
    pub partitions: BTreeSet<IdPartition>,
    /// A heartbeat failure that will not go away by retrying (the group cannot be joined).
    pub fatal: Option<CallError>,
}

/// A member id as the Java client makes one: a random UUID in URL-safe base64, no padding.
pub(crate) fn new_member_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = Uuid::new_v4().into_bytes();
    let mut out = String::with_capacity(22);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
        }
    }
    out
}

/// Heartbeats until `closing` turns true, then leaves the group.
pub(crate) async fn run(
    cluster: Arc<Cluster>,
    group: String,
    member: String,
    mut topics: watch::Receiver<Vec<String>>,
    assignment: watch::Sender<Assignment>,
    mut closing: watch::Receiver<bool>,
) {
    let mut epoch = 0;
    let mut send_topics = true;
    let mut failures: u32 = 0;
    loop {
        if *closing.borrow() {
            break;
        }
        let subscribed = topics.borrow_and_update().clone();
        let wait = if subscribed.is_empty() {
            Duration::from_secs(3600)
        } else {
            match heartbeat(
                &cluster,
                &group,
                &member,
                epoch,
                send_topics.then_some(&subscribed),
            )
            .await
            {
                Ok(response) => {
                    failures = 0;
                    epoch = response.member_epoch;
                    send_topics = false;
                    if let Some(a) = response.assignment {
                        publish_assignment(&cluster, &assignment, &a).await;
                    }
                    Duration::from_millis(
                        u64::try_from(response.heartbeat_interval_ms).unwrap_or(0),
                    )
                    .max(Duration::from_millis(100))
                }
                Err(e) => {
                    failures += 1;
                    if handle_failure(&cluster, &group, &assignment, e) {
                        epoch = 0;
                        send_topics = true;
                    }
                    backoff(
                        cluster.net.retry_backoff,
                        cluster.net.retry_backoff_max,
                        failures.saturating_sub(1),
                    )
                }
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            changed = topics.changed() => {
                if changed.is_err() {
                    break;
                }
                send_topics = true;
            }
            _ = closing.changed() => {}
        }
    }
    if epoch > 0 {
        // Leaving: the coordinator gives this member's partitions to the others at once.
        let _ = heartbeat(&cluster, &group, &member, -1, None).await;
    }
}

/// Publishes the partitions a heartbeat assigned, once the metadata names their topics.
async fn publish_assignment(
    cluster: &Cluster,
    assignment: &watch::Sender<Assignment>,
    assigned: &HeartbeatAssignment,
) {
    let partitions: BTreeSet<IdPartition> = assigned
        .topic_partitions
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| (t.topic_id, *p)))
        .collect();
    // The assignment names topics by id: learn the names.
    let metadata = cluster.metadata();
    if partitions
        .iter()
        .any(|(id, _)| metadata.topic_name(*id).is_none())
    {
        let _ = cluster.refresh(metadata.version).await;
    }
    assignment.send_replace(Assignment {
        partitions,
        fatal: None,
    });
}

/// Acts on a failed heartbeat: the coordinator forgotten when it moved or was not reached, the
/// failure published when it is for good. True when this is not (or no longer) a member, which
/// joins again with a fresh epoch (no partitions meanwhile).
fn handle_failure(
    cluster: &Cluster,
    group: &str,
    assignment: &watch::Sender<Assignment>,
    e: CallError,
) -> bool {
    match e.code() {
        // Not (or no longer) a member: join again with a fresh epoch.
        Some(ErrorCode::UnknownMemberId | ErrorCode::FencedMemberEpoch) => {
            assignment.send_replace(Assignment::default());
            return true;
        }
        Some(
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::CoordinatorLoadInProgress,
        )
        | None => cluster.forget_coordinator(group),
        Some(_) if !e.is_retriable() => {
            tracing::warn!(group, error = %e, "share group heartbeat refused");
            assignment.send_replace(Assignment {
                partitions: BTreeSet::new(),
                fatal: Some(e),
            });
        }
        Some(_) => {}
    }
    false
}

async fn heartbeat(
    cluster: &Cluster,
    group: &str,
    member: &str,
    epoch: i32,
    topics: Option<&Vec<String>>,
) -> Result<ShareGroupHeartbeatResponse, CallError> {
    let request = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_member_id(text(member))
        .with_member_epoch(epoch)
        .with_subscribed_topic_names(
            topics.map(|ts| ts.iter().map(|t| TopicName(text(t))).collect()),
        );
    let (_, connection) = cluster.coordinator(group).await?;
    let response = connection.call(&request, 1).await?;
    crate::error::check(response.error_code, ApiKey::ShareGroupHeartbeat, || {
        format!("share group {group}")
    })?;
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_ids_are_22_url_safe_characters_and_differ() {
        let a = new_member_id();
        let b = new_member_id();
        assert_eq!(a.len(), 22);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
        assert_ne!(a, b);
    }
}
