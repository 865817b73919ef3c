//! An ACL: a resource pattern and an access control entry ([`AclBinding`]), checked as Kafka's
//! CreateAcls checks one ([`AclBinding::from_codes`], [`AclBinding::validate`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::{Operation, PatternType, Permission, ResourceType, ANY, MATCH};

/// The one name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The literal resource name, host and principal name that match every one.
pub const WILDCARD: &str = "*";
/// The principal every principal matches.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// Why a binding (or a filter, or a `super.users` entry) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AclError {
    /// A code Kafka does not have, or UNKNOWN (0).
    #[error("unknown {field} code {code}")]
    UnknownCode {
        /// `resource type`, `pattern type`, `operation` or `permission type`.
        field: &'static str,
        /// The code sent.
        code: i8,
    },
    /// ANY or MATCH, which only filters may hold.
    #[error("{field} {value} is only for filters: an ACL names one")]
    FilterOnly {
        /// As in [`AclError::UnknownCode`].
        field: &'static str,
        /// `ANY` or `MATCH`.
        value: &'static str,
    },
    /// Not `Type:name`.
    #[error("principal {0:?} is not Type:name (as in User:alice)")]
    Principal(String),
    /// A CLUSTER resource named other than `kafka-cluster`.
    #[error("the only valid name for the CLUSTER resource is kafka-cluster, not {0:?}")]
    ClusterName(String),
    /// An empty resource name.
    #[error("invalid empty resource name")]
    EmptyName,
    /// An empty host (`*` is every host).
    #[error("invalid empty host: `*` is every host")]
    EmptyHost,
}

/// What an ACL is about: a resource type and a name, matched as `pattern_type` says.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourcePattern {
    /// The kind of resource.
    pub resource_type: ResourceType,
    /// The name, the prefix, or `*` (every name, when literal).
    pub name: String,
    /// How `name` matches.
    pub pattern_type: PatternType,
}

/// Who, from where, doing what, allowed or denied.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AccessControlEntry {
    /// `Type:name` (`User:alice`; `User:*` is every principal).
    pub principal: String,
    /// A client's IP address, or `*` for every host.
    pub host: String,
    /// The operation (ALL: every one).
    pub operation: Operation,
    /// ALLOW or DENY.
    pub permission: Permission,
}

/// One ACL: Kafka's `AclBinding`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    /// What it is about.
    pub pattern: ResourcePattern,
    /// Who it allows or denies what.
    pub entry: AccessControlEntry,
}

/// A binding field's value from its wire code: `Ok` for a value a binding may hold.
pub(crate) fn concrete<T>(
    field: &'static str,
    code: i8,
    from_code: fn(i8) -> Option<T>,
    match_exists: bool,
) -> Result<T, AclError> {
    match (code, from_code(code)) {
        (_, Some(value)) => Ok(value),
        (ANY, None) => Err(AclError::FilterOnly {
            field,
            value: "ANY",
        }),
        (MATCH, None) if match_exists => Err(AclError::FilterOnly {
            field,
            value: "MATCH",
        }),
        _ => Err(AclError::UnknownCode { field, code }),
    }
}

/// Checks `Type:name`: both parts non-empty.
pub fn check_principal(principal: &str) -> Result<(), AclError> {
    match principal.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(()),
        _ => Err(AclError::Principal(principal.to_string())),
    }
}

/// A resource pattern in wire codes: resource type, name, pattern type.
pub type PatternCodes<'a> = (i8, &'a str, i8);
/// An access control entry in wire codes: principal, host, operation, permission type.
pub type EntryCodes<'a> = (&'a str, &'a str, i8, i8);

impl AclBinding {
    /// A binding from a CreateAcls creation's fields (wire codes), checked: its pattern
    /// (resource type, name, pattern type) and its entry (principal, host, operation,
    /// permission), as Kafka's `AclBinding` pairs a `ResourcePattern` with an
    /// `AccessControlEntry`.
    pub fn from_codes(
        (resource_type, name, pattern_type): PatternCodes<'_>,
        (principal, host, operation, permission): EntryCodes<'_>,
    ) -> Result<AclBinding, AclError> {
        let binding = AclBinding {
            pattern: ResourcePattern {
                resource_type: concrete(
                    "resource type",
                    resource_type,
                    ResourceType::from_code,
                    false,
                )?,
                name: name.to_string(),
                pattern_type: concrete("pattern type", pattern_type, PatternType::from_code, true)?,
            },
            entry: AccessControlEntry {
                principal: principal.to_string(),
                host: host.to_string(),
                operation: concrete("operation", operation, Operation::from_code, false)?,
                permission: concrete("permission type", permission, Permission::from_code, false)?,
            },
        };
        binding.validate()?;
        Ok(binding)
    }

    /// What Kafka checks beyond the codes: a non-empty name (`kafka-cluster` for CLUSTER), a
    /// `Type:name` principal, and (lograil's own) a non-empty host.
    pub fn validate(&self) -> Result<(), AclError> {
        let name = &self.pattern.name;
        if self.pattern.resource_type == ResourceType::Cluster && name != CLUSTER_NAME {
            return Err(AclError::ClusterName(name.clone()));
        }
        if name.is_empty() {
            return Err(AclError::EmptyName);
        }
        check_principal(&self.entry.principal)?;
        if self.entry.host.is_empty() {
            return Err(AclError::EmptyHost);
        }
        Ok(())
    }
}

impl fmt::Display for AclBinding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (p, e) = (&self.pattern, &self.entry);
        write!(
            f,
            "{} {} {} from {} on {}:{}:{}",
            e.principal, e.permission, e.operation, e.host, p.resource_type, p.pattern_type, p.name
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn create(rt: i8, name: &str, pt: i8, principal: &str) -> Result<AclBinding, AclError> {
        AclBinding::from_codes((rt, name, pt), (principal, "*", 3, 3))
    }

    #[test]
    fn a_valid_binding_is_built_from_codes() {
        let b = AclBinding::from_codes((2, "orders", 4), ("User:alice", "10.0.0.1", 4, 2)).unwrap();
        assert_eq!(b.pattern.resource_type, ResourceType::Topic);
        assert_eq!(b.pattern.pattern_type, PatternType::Prefixed);
        assert_eq!(b.entry.operation, Operation::Write);
        assert_eq!(b.entry.permission, Permission::Deny);
        assert_eq!(
            b.to_string(),
            "User:alice DENY WRITE from 10.0.0.1 on TOPIC:PREFIXED:orders"
        );
    }

    #[test]
    fn filter_values_and_unknown_codes_are_refused() {
        assert_eq!(
            create(ANY, "t", 3, "User:a"),
            Err(AclError::FilterOnly {
                field: "resource type",
                value: "ANY"
            })
        );
        assert_eq!(
            create(2, "t", MATCH, "User:a"),
            Err(AclError::FilterOnly {
                field: "pattern type",
                value: "MATCH"
            })
        );
        assert!(matches!(
            create(2, "t", ANY, "User:a"),
            Err(AclError::FilterOnly { value: "ANY", .. })
        ));
        assert_eq!(
            create(0, "t", 3, "User:a"),
            Err(AclError::UnknownCode {
                field: "resource type",
                code: 0
            })
        );
        assert!(matches!(
            AclBinding::from_codes((2, "t", 3), ("User:a", "*", ANY, 3)),
            Err(AclError::FilterOnly {
                field: "operation",
                ..
            })
        ));
        assert!(matches!(
            AclBinding::from_codes((2, "t", 3), ("User:a", "*", 3, 9)),
            Err(AclError::UnknownCode {
                field: "permission type",
                code: 9
            })
        ));
    }

    #[test]
    fn the_principal_is_type_colon_name() {
        for bad in ["alice", "User:", ":alice", ""] {
            assert_eq!(
                create(2, "t", 3, bad),
                Err(AclError::Principal(bad.into())),
                "{bad:?}"
            );
        }
        assert!(create(2, "t", 3, "User:*").is_ok());
        assert!(create(2, "t", 3, "Group:ops:team").is_ok());
    }

    #[test]
    fn the_cluster_is_kafka_cluster_and_names_are_not_empty() {
        assert_eq!(
            create(4, "my-cluster", 3, "User:a"),
            Err(AclError::ClusterName("my-cluster".into()))
        );
        assert!(create(4, CLUSTER_NAME, 3, "User:a").is_ok());
        assert_eq!(create(2, "", 3, "User:a"), Err(AclError::EmptyName));
        assert_eq!(
            AclBinding::from_codes((2, "t", 3), ("User:a", "", 3, 3)),
            Err(AclError::EmptyHost)
        );
    }
}
