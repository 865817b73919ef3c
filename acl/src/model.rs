//! The vocabulary of Kafka's ACLs, with Kafka's wire codes: resource types, pattern types,
//! operations and permissions. Each enum holds only what a binding may hold; the filters' ANY
//! (and MATCH) are [`crate::AclBindingFilter`]'s.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The wire code of ANY in a filter, for every field that has it.
pub const ANY: i8 = 1;
/// The wire code of MATCH, a pattern-type filter.
pub const MATCH: i8 = 2;

/// What kind of thing an ACL is about (Kafka's `ResourceType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ResourceType {
    /// A topic, by name.
    Topic,
    /// A consumer or share group, by id.
    Group,
    /// The cluster: one resource, named `kafka-cluster`.
    Cluster,
    /// A transactional producer, by transactional id.
    TransactionalId,
    /// A delegation token, by id.
    DelegationToken,
    /// A user, by principal (tokens created for them).
    User,
}

/// How an ACL's resource name matches names (Kafka's `PatternType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PatternType {
    /// The name itself; the name `*` matches every name.
    Literal,
    /// Every name that starts with it.
    Prefixed,
}

/// What an ACL allows or denies (Kafka's `AclOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Operation {
    /// Every operation.
    All,
    /// Fetch, commit offsets, join a group.
    Read,
    /// Produce.
    Write,
    /// Create topics.
    Create,
    /// Delete topics, records, groups.
    Delete,
    /// Add partitions, create or delete ACLs.
    Alter,
    /// Metadata, offsets, group descriptions.
    Describe,
    /// Broker-to-broker requests.
    ClusterAction,
    /// Read configs.
    DescribeConfigs,
    /// Change configs.
    AlterConfigs,
    /// Idempotent producers.
    IdempotentWrite,
    /// Create delegation tokens for a user.
    CreateTokens,
    /// Describe a user's delegation tokens.
    DescribeTokens,
    /// Two-phase commit of transactions (KIP-939).
    TwoPhaseCommit,
}

/// Whether an ACL allows or denies (Kafka's `AclPermissionType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Permission {
    /// Denies: wins over every ALLOW.
    Deny,
    /// Allows.
    Allow,
}

/// Codes and names of one of the enums above.
macro_rules! coded {
    ($ty:ident { $($variant:ident = $code:literal, $name:literal),* $(,)? }) => {
        impl $ty {
            /// Every value, in code order.
            pub const VALUES: &'static [$ty] = &[$($ty::$variant),*];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($ty::$variant => $code),*
                }
            }

            /// The value of a wire code; `None` for UNKNOWN (0), ANY, MATCH and codes Kafka
            /// does not have.
            pub fn from_code(code: i8) -> Option<$ty> {
                match code {
                    $($code => Some($ty::$variant),)*
                    _ => None,
                }
            }

            /// Kafka's name (`TOPIC`, `DESCRIBE_CONFIGS`).
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),*
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

coded!(ResourceType {
    Topic = 2, "TOPIC",
    Group = 3, "GROUP",
    Cluster = 4, "CLUSTER",
    TransactionalId = 5, "TRANSACTIONAL_ID",
    DelegationToken = 6, "DELEGATION_TOKEN",
    User = 7, "USER",
});

coded!(PatternType {
    Literal = 3, "LITERAL",
    Prefixed = 4, "PREFIXED",
});

coded!(Operation {
    All = 2, "ALL",
    Read = 3, "READ",
    Write = 4, "WRITE",
    Create = 5, "CREATE",
    Delete = 6, "DELETE",
    Alter = 7, "ALTER",
    Describe = 8, "DESCRIBE",
    ClusterAction = 9, "CLUSTER_ACTION",
    DescribeConfigs = 10, "DESCRIBE_CONFIGS",
    AlterConfigs = 11, "ALTER_CONFIGS",
    IdempotentWrite = 12, "IDEMPOTENT_WRITE",
    CreateTokens = 13, "CREATE_TOKENS",
    DescribeTokens = 14, "DESCRIBE_TOKENS",
    TwoPhaseCommit = 15, "TWO_PHASE_COMMIT",
});

coded!(Permission {
    Deny = 2, "DENY",
    Allow = 3, "ALLOW",
});

impl ResourceType {
    /// Its place in per-type tables (0 for TOPIC).
    pub(crate) fn index(self) -> usize {
        usize::from(self.code().unsigned_abs()) - 2
    }

    /// The operations that mean something on this resource type (Kafka's
    /// `AclEntry.supportedOperations`): what KIP-430's authorized operations are made of.
    pub fn operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Delete,
                Alter,
                Describe,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Delete, Describe, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                Alter,
                Describe,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
            ],
            ResourceType::TransactionalId => &[Write, Describe, TwoPhaseCommit],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }

    /// KIP-430's bitfield with every operation of this type set: what a broker without an
    /// authorizer answers.
    pub fn all_operations(self) -> i32 {
        bitfield(self.operations().iter().copied())
    }
}

/// KIP-430's authorized-operations bitfield: bit `code` set for each operation.
pub fn bitfield(operations: impl IntoIterator<Item = Operation>) -> i32 {
    operations
        .into_iter()
        .fold(0, |bits, op| bits | (1 << op.code()))
}

impl Operation {
    /// Whether an ALLOW of `self` allows `wanted`: the same operation, ALL, or an operation
    /// that implies it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
    /// DESCRIBE_CONFIGS). A DENY denies only its own operation (and ALL every one).
    pub(crate) fn covers(self, permission: Permission, wanted: Operation) -> bool {
        use Operation::*;
        if self == All || self == wanted {
            return true;
        }
        permission == Permission::Allow
            && match wanted {
                Describe => matches!(self, Read | Write | Delete | Alter),
                DescribeConfigs => self == AlterConfigs,
                _ => false,
            }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_kafkas_and_round_trip() {
        assert_eq!(ResourceType::Topic.code(), 2);
        assert_eq!(ResourceType::User.code(), 7);
        assert_eq!(PatternType::Prefixed.code(), 4);
        assert_eq!(Operation::TwoPhaseCommit.code(), 15);
        assert_eq!(Permission::Allow.code(), 3);
        for rt in ResourceType::VALUES {
            assert_eq!(ResourceType::from_code(rt.code()), Some(*rt));
        }
        for op in Operation::VALUES {
            assert_eq!(Operation::from_code(op.code()), Some(*op));
        }
        // MATCH (2) is a pattern type filter only: as an operation, 2 is ALL.
        for code in [0, ANY, 16, -1] {
            assert_eq!(Operation::from_code(code), None, "code {code}");
        }
        assert_eq!(ResourceType::from_code(ANY), None);
        assert_eq!(PatternType::from_code(MATCH), None);
    }

    #[test]
    fn the_bitfield_sets_bit_code_per_operation() {
        assert_eq!(bitfield([Operation::Read]), 1 << 3);
        assert_eq!(
            ResourceType::Group.all_operations(),
            (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
        );
        assert_eq!(bitfield([]), 0);
    }

    #[test]
    fn the_index_of_each_type_is_its_own() {
        let indexes: Vec<usize> = ResourceType::VALUES.iter().map(|t| t.index()).collect();
        assert_eq!(indexes, vec![0, 1, 2, 3, 4, 5]);
    }
}
