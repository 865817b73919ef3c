//! # acl
//!
//! Kafka's authorization model, with Kafka's wire codes and Kafka's rules: the vocabulary
//! ([`ResourceType`], [`PatternType`], [`Operation`], [`Permission`]), one ACL
//! ([`AclBinding`], checked as CreateAcls checks it), the filters of DescribeAcls and
//! DeleteAcls ([`AclBindingFilter`]), the indexed set ([`Acls`]) and the decision of Kafka's
//! `StandardAuthorizer` ([`Authorizer`]: `super.users`, `allow.everyone.if.no.acl.found`,
//! `User:*`, `*` hosts and names, PREFIXED patterns, DENY over ALLOW, ALL, implied
//! operations; KIP-679's by-resource-type check and KIP-430's authorized operations).
//!
//! **It is not** a store or a server: the broker (`server/`) persists the ACLs, speaks
//! Create/Describe/DeleteAcls and asks [`Authorizer::authorize`] what each API needs. No I/O.
//!
//! ```
//! use std::net::IpAddr;
//! use acl::{AclBinding, Acls, Authorizer, Operation, ResourceType, Settings};
//!
//! // kafka-acls --add --allow-principal User:alice --operation Read --topic orders
//! let read = AclBinding::from_codes((2, "orders", 3), ("User:alice", "*", 3, 3))?;
//! let authorizer = Authorizer::new(Settings::default(), Acls::from_bindings([read]));
//! let host: IpAddr = "10.0.0.7".parse()?;
//! assert!(authorizer.authorize("User:alice", host, Operation::Read, ResourceType::Topic, "orders"));
//! // READ implies DESCRIBE; nothing implies WRITE; bob has no ACL.
//! assert!(authorizer.authorize("User:alice", host, Operation::Describe, ResourceType::Topic, "orders"));
//! assert!(!authorizer.authorize("User:alice", host, Operation::Write, ResourceType::Topic, "orders"));
//! assert!(!authorizer.authorize("User:bob", host, Operation::Read, ResourceType::Topic, "orders"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![warn(missing_docs, unreachable_pub)]

mod acls;
mod authorizer;
mod binding;
mod filter;
mod model;

pub use acls::Acls;
pub use authorizer::{Authorizer, Settings};
pub use binding::{
    check_principal, AccessControlEntry, AclBinding, AclError, EntryCodes, PatternCodes,
    ResourcePattern, CLUSTER_NAME, WILDCARD, WILDCARD_PRINCIPAL,
};
pub use filter::{AclBindingFilter, EntryFilterCodes, PatternFilter, PatternFilterCodes};
pub use model::{bitfield, Operation, PatternType, Permission, ResourceType, ANY, MATCH};
