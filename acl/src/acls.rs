//! A set of ACLs indexed for decisions ([`Acls`]): per resource type, literal names in a hash
//! map (one lookup for the name, one for `*`), prefixed ones in a sorted map scanned in full.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use crate::binding::{
    AccessControlEntry, AclBinding, ResourcePattern, WILDCARD, WILDCARD_PRINCIPAL,
};
use crate::filter::AclBindingFilter;
use crate::model::{Operation, PatternType, Permission, ResourceType};

/// An entry's host, parsed once: `*`, an address, or a name (which no client address equals).
#[derive(Debug, Clone)]
enum Host {
    Any,
    Ip(IpAddr),
    Other,
}

/// An entry as held in the index.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    entry: AccessControlEntry,
    host: Host,
}

impl Stored {
    fn new(entry: AccessControlEntry) -> Stored {
        let host = if entry.host == WILDCARD {
            Host::Any
        } else {
            entry.host.parse().map_or(Host::Other, Host::Ip)
        };
        Stored { entry, host }
    }

    /// What this entry says of `principal` from `host` doing `operation`, if it says anything
    /// (Kafka's `StandardAuthorizerData.findResult`).
    pub(crate) fn decides(
        &self,
        principal: &str,
        host: IpAddr,
        operation: Operation,
    ) -> Option<Permission> {
        let e = &self.entry;
        if e.principal != principal && e.principal != WILDCARD_PRINCIPAL {
            return None;
        }
        let host_matches = match self.host {
            Host::Any => true,
            Host::Ip(ip) => ip == host,
            Host::Other => false,
        };
        (host_matches && e.operation.covers(e.permission, operation)).then_some(e.permission)
    }

    pub(crate) fn entry(&self) -> &AccessControlEntry {
        &self.entry
    }
}

#[derive(Debug, Clone, Default)]
struct ByType {
    literal: HashMap<String, Vec<Stored>>,
    prefixed: BTreeMap<String, Vec<Stored>>,
}

impl ByType {
    fn names(&mut self, pattern_type: PatternType) -> NamesMut<'_> {
        match pattern_type {
            PatternType::Literal => NamesMut::Literal(&mut self.literal),
            PatternType::Prefixed => NamesMut::Prefixed(&mut self.prefixed),
        }
    }
}

enum NamesMut<'a> {
    Literal(&'a mut HashMap<String, Vec<Stored>>),
    Prefixed(&'a mut BTreeMap<String, Vec<Stored>>),
}

/// Every ACL, indexed by resource type and name.
#[derive(Debug, Clone, Default)]
pub struct Acls {
    types: [ByType; 6],
    len: usize,
}

impl Acls {
    /// The set of `bindings` (duplicates once).
    pub fn from_bindings(bindings: impl IntoIterator<Item = AclBinding>) -> Acls {
        let mut acls = Acls::default();
        for binding in bindings {
            acls.insert(binding);
        }
        acls
    }

    /// How many ACLs there are.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds `binding`; `false` if it was there already (it is kept once).
    pub fn insert(&mut self, binding: AclBinding) -> bool {
        let AclBinding { pattern, entry } = binding;
        let by_type = &mut self.types[pattern.resource_type.index()];
        let entries = match by_type.names(pattern.pattern_type) {
            NamesMut::Literal(m) => m.entry(pattern.name).or_default(),
            NamesMut::Prefixed(m) => m.entry(pattern.name).or_default(),
        };
        if entries.iter().any(|s| s.entry == entry) {
            return false;
        }
        entries.push(Stored::new(entry));
        self.len += 1;
        true
    }

    /// Removes and returns (sorted) the ACLs `filter` matches.
    pub fn remove_matching(&mut self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let mut removed = Vec::new();
        for (resource_type, by_type) in ResourceType::VALUES.iter().zip(&mut self.types) {
            for pattern_type in [PatternType::Literal, PatternType::Prefixed] {
                let mut take = |name: &String, entries: &mut Vec<Stored>| {
                    let pattern = ResourcePattern {
                        resource_type: *resource_type,
                        name: name.clone(),
                        pattern_type,
                    };
                    if !filter.matches_pattern(&pattern) {
                        return !entries.is_empty();
                    }
                    entries.retain(|s| {
                        let binding = AclBinding {
                            pattern: pattern.clone(),
                            entry: s.entry.clone(),
                        };
                        let matched = filter.matches(&binding);
                        if matched {
                            removed.push(binding);
                        }
                        !matched
                    });
                    !entries.is_empty()
                };
                match by_type.names(pattern_type) {
                    NamesMut::Literal(m) => m.retain(|n, e| take(n, e)),
                    NamesMut::Prefixed(m) => m.retain(|n, e| take(n, e)),
                }
            }
        }
        self.len -= removed.len();
        removed.sort();
        removed
    }

    /// The ACLs `filter` matches, sorted.
    pub fn matching(&self, filter: &AclBindingFilter) -> Vec<AclBinding> {
        let mut found: Vec<AclBinding> = self
            .iter()
            .filter(|(pattern, _)| filter.matches_pattern(pattern))
            .flat_map(|(pattern, entries)| {
                entries.iter().map(move |s| AclBinding {
                    pattern: pattern.clone(),
                    entry: s.entry.clone(),
                })
            })
            .filter(|b| filter.matches(b))
            .collect();
        found.sort();
        found
    }

    /// Every ACL, sorted.
    pub fn bindings(&self) -> Vec<AclBinding> {
        self.matching(&AclBindingFilter::ANY)
    }

    /// Every resource pattern with its entries.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (ResourcePattern, &[Stored])> + '_ {
        ResourceType::VALUES
            .iter()
            .zip(&self.types)
            .flat_map(|(resource_type, by_type)| {
                let literal = by_type.literal.iter().map(move |(name, entries)| {
                    (
                        ResourcePattern {
                            resource_type: *resource_type,
                            name: name.clone(),
                            pattern_type: PatternType::Literal,
                        },
                        entries.as_slice(),
                    )
                });
                let prefixed = by_type.prefixed.iter().map(move |(name, entries)| {
                    (
                        ResourcePattern {
                            resource_type: *resource_type,
                            name: name.clone(),
                            pattern_type: PatternType::Prefixed,
                        },
                        entries.as_slice(),
                    )
                });
                literal.chain(prefixed)
            })
    }

    /// The entries of every ACL that applies to the resource `name` of `resource_type`: its
    /// literal name, the literal `*`, and every prefix of it. Allocates nothing.
    pub(crate) fn applying<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a Stored> + 'a {
        let by_type = &self.types[resource_type.index()];
        let exact = by_type.literal.get(name);
        let wildcard = (name != WILDCARD)
            .then(|| by_type.literal.get(WILDCARD))
            .flatten();
        let prefixed = by_type
            .prefixed
            .iter()
            .filter(move |(prefix, _)| name.starts_with(prefix.as_str()))
            .flat_map(|(_, entries)| entries);
        exact.into_iter().chain(wildcard).flatten().chain(prefixed)
    }

    /// The entries of every ACL of `resource_type`, with their pattern's name and type.
    pub(crate) fn of_type(
        &self,
        resource_type: ResourceType,
    ) -> impl Iterator<Item = (&str, PatternType, &Stored)> + '_ {
        let by_type = &self.types[resource_type.index()];
        let literal = by_type
            .literal
            .iter()
            .flat_map(|(n, e)| e.iter().map(move |s| (n.as_str(), PatternType::Literal, s)));
        let prefixed = by_type.prefixed.iter().flat_map(|(n, e)| {
            e.iter()
                .map(move |s| (n.as_str(), PatternType::Prefixed, s))
        });
        literal.chain(prefixed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::PatternFilter;

    fn acl(name: &str, pattern_type: PatternType, principal: &str) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::Topic,
                name: name.into(),
                pattern_type,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: "*".into(),
                operation: Operation::Read,
                permission: Permission::Allow,
            },
        }
    }

    #[test]
    fn a_binding_is_held_once() {
        let mut acls = Acls::default();
        assert!(acls.insert(acl("t", PatternType::Literal, "User:a")));
        assert!(!acls.insert(acl("t", PatternType::Literal, "User:a")));
        assert!(acls.insert(acl("t", PatternType::Prefixed, "User:a")));
        assert!(acls.insert(acl("t", PatternType::Literal, "User:b")));
        assert_eq!(acls.len(), 3);
        assert_eq!(acls.bindings().len(), 3);
    }

    #[test]
    fn removal_takes_what_the_filter_matches_and_keeps_the_rest() {
        let mut acls = Acls::from_bindings([
            acl("orders", PatternType::Literal, "User:a"),
            acl("orders", PatternType::Literal, "User:b"),
            acl("ord", PatternType::Prefixed, "User:a"),
            acl("other", PatternType::Literal, "User:a"),
        ]);
        let filter = AclBindingFilter {
            name: Some("orders".into()),
            pattern: PatternFilter::Match,
            principal: Some("User:a".into()),
            ..AclBindingFilter::ANY
        };
        let removed = acls.remove_matching(&filter);
        assert_eq!(
            removed,
            vec![
                acl("ord", PatternType::Prefixed, "User:a"),
                acl("orders", PatternType::Literal, "User:a"),
            ]
        );
        assert_eq!(acls.len(), 2);
        assert_eq!(
            acls.bindings(),
            vec![
                acl("orders", PatternType::Literal, "User:b"),
                acl("other", PatternType::Literal, "User:a"),
            ]
        );
        assert!(acls.remove_matching(&filter).is_empty());
    }

    #[test]
    fn the_acls_applying_to_a_name_are_its_literal_the_wildcard_and_its_prefixes() {
        let acls = Acls::from_bindings([
            acl("orders", PatternType::Literal, "User:exact"),
            acl("*", PatternType::Literal, "User:wildcard"),
            acl("ord", PatternType::Prefixed, "User:prefix"),
            acl("orders-eu", PatternType::Prefixed, "User:longer"),
            acl("orders-eu", PatternType::Literal, "User:other"),
        ]);
        let mut applying: Vec<&str> = acls
            .applying(ResourceType::Topic, "orders")
            .map(|s| s.entry().principal.as_str())
            .collect();
        applying.sort_unstable();
        assert_eq!(applying, ["User:exact", "User:prefix", "User:wildcard"]);
        assert_eq!(acls.applying(ResourceType::Group, "orders").count(), 0);
        assert_eq!(acls.applying(ResourceType::Topic, "*").count(), 1);
    }
}
