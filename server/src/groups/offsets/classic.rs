//! A classic group's own record in `__consumer_offsets` (Kafka's group metadata record): key
//! `(group, "", -1)`, value a [`GroupMeta`]: its protocol type and generation, so a group's
//! generation keeps counting across restarts, and, once it is Stable, its protocol, leader and
//! members with their subscriptions and assignments, so that after a restart they go on
//! without a rebalance. A record of an earlier lograil (type and generation only) still reads.

use log_core::StateLog;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupMeta {
    pub protocol_type: String,
    pub generation: i32,
    /// Set, with the leader and members, for a Stable group.
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub members: Vec<MemberMeta>,
}

/// A member of a Stable classic group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MemberMeta {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    /// Its metadata for the group's protocol.
    pub subscription: Vec<u8>,
    pub assignment: Vec<u8>,
}

/// The record earlier lograil versions wrote.
#[derive(Deserialize)]
struct TypeAndGeneration {
    protocol_type: String,
    generation: i32,
}

impl GroupMeta {
    /// A group's record without members (an Empty or rebalancing group's).
    pub fn of_type(protocol_type: &str, generation: i32) -> GroupMeta {
        GroupMeta {
            protocol_type: protocol_type.to_string(),
            generation,
            protocol: None,
            leader: None,
            members: Vec::new(),
        }
    }

    /// Decodes a stored value, of this version or the one before; `None` when it is neither.
    pub(super) fn decode(bytes: &[u8]) -> Option<GroupMeta> {
        // The older record is a prefix of this one, so this one is tried first.
        StateLog::decode::<GroupMeta>(bytes).or_else(|| {
            let old = StateLog::decode::<TypeAndGeneration>(bytes)?;
            Some(GroupMeta::of_type(&old.protocol_type, old.generation))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_of_either_version_reads() {
        #[derive(Serialize)]
        struct Old {
            protocol_type: String,
            generation: i32,
        }
        let old = Old {
            protocol_type: "consumer".into(),
            generation: 7,
        };
        assert_eq!(
            GroupMeta::decode(&StateLog::encode(&old).unwrap()),
            Some(GroupMeta::of_type("consumer", 7))
        );
        let new = GroupMeta {
            protocol: Some("range".into()),
            leader: Some("a".into()),
            members: vec![MemberMeta {
                member_id: "a".into(),
                instance_id: None,
                client_id: "c".into(),
                client_host: "/h".into(),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
                subscription: vec![0, 1],
                assignment: vec![0, 2],
            }],
            ..GroupMeta::of_type("consumer", 8)
        };
        assert_eq!(
            GroupMeta::decode(&StateLog::encode(&new).unwrap()),
            Some(new.clone())
        );
        assert_eq!(GroupMeta::decode(&[1, 2, 3]), None);
    }
}
