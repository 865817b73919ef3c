//! The decision, as Kafka's `StandardAuthorizer` makes it ([`Authorizer`]): super users may
//! do anything; otherwise a DENY that applies wins, then an ALLOW that applies; a resource no
//! ACL applies to is allowed only with `allow.everyone.if.no.acl.found`.

use std::collections::HashSet;
use std::net::IpAddr;

use crate::acls::Acls;
use crate::binding::{check_principal, AclError, WILDCARD, WILDCARD_PRINCIPAL};
use crate::model::{bitfield, Operation, PatternType, Permission, ResourceType};

/// The authorizer's settings, under Kafka's names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `super.users`: principals allowed everything, whatever the ACLs say.
    pub super_users: HashSet<String>,
    /// `allow.everyone.if.no.acl.found`: allow an operation on a resource no ACL applies to.
    pub allow_everyone_if_no_acl_found: bool,
}

impl Settings {
    /// Parses `super.users` as Kafka writes it: principals separated by `;` (`User:a;User:b`),
    /// each `Type:name`; blanks are skipped.
    pub fn parse_super_users(list: &str) -> Result<HashSet<String>, AclError> {
        let mut users = HashSet::new();
        for user in list.split(';').map(str::trim).filter(|u| !u.is_empty()) {
            check_principal(user)?;
            users.insert(user.to_string());
        }
        Ok(users)
    }
}

/// What the ACLs that apply to a resource say of an action.
enum Verdict {
    Allowed,
    Denied,
    /// No ACL applies to the resource.
    NoAcls,
}

/// The ACLs and the settings that decide with them.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    settings: Settings,
    acls: Acls,
}

impl Authorizer {
    /// An authorizer deciding with `acls`.
    pub fn new(settings: Settings, acls: Acls) -> Authorizer {
        Authorizer { settings, acls }
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The ACLs.
    pub fn acls(&self) -> &Acls {
        &self.acls
    }

    /// The ACLs, to change.
    pub fn acls_mut(&mut self) -> &mut Acls {
        &mut self.acls
    }

    /// Whether `principal` (`User:alice`) from `host` may do `operation` on the resource
    /// `name` of `resource_type`. Allocates nothing.
    pub fn authorize(
        &self,
        principal: &str,
        host: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if self.settings.super_users.contains(principal) {
            return true;
        }
        match self.verdict(principal, host, operation, resource_type, name) {
            Verdict::Allowed => true,
            Verdict::Denied => false,
            Verdict::NoAcls => self.settings.allow_everyone_if_no_acl_found,
        }
    }

    fn verdict(
        &self,
        principal: &str,
        host: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> Verdict {
        if self.acls.is_empty() {
            return Verdict::NoAcls;
        }
        let (mut any, mut allowed) = (false, false);
        for stored in self.acls.applying(resource_type, name) {
            any = true;
            match stored.decides(principal, host, operation) {
                Some(Permission::Deny) => return Verdict::Denied,
                Some(Permission::Allow) => allowed = true,
                None => {}
            }
        }
        match (allowed, any) {
            (true, _) => Verdict::Allowed,
            (false, true) => Verdict::Denied,
            (false, false) => Verdict::NoAcls,
        }
    }

    /// Whether `principal` may do `operation` on at least one resource of `resource_type`
    /// (KIP-679, Kafka's `Authorizer.authorizeByResourceType`): allowed on a resource named
    /// `hardcode` (super users, no ACL and allow-everyone, a wildcard or prefix that covers
    /// it), or an ALLOW of the operation (or ALL) for the principal on some pattern that no
    /// DENY covers whole: a literal `*` DENY covers everything, a literal DENY its name, a
    /// prefixed DENY every name it prefixes. Implied operations do not count here, as in Kafka.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: IpAddr,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        if self.authorize(principal, host, operation, resource_type, "hardcode") {
            return true;
        }
        let mut denied_literal = HashSet::new();
        let mut denied_prefix = HashSet::new();
        let mut allowed = Vec::new();
        for (name, pattern_type, stored) in self.acls.of_type(resource_type) {
            let e = stored.entry();
            let host_matches = e.host == WILDCARD || e.host.parse() == Ok(host);
            let principal_matches = e.principal == principal || e.principal == WILDCARD_PRINCIPAL;
            let operation_matches = e.operation == operation || e.operation == Operation::All;
            if !(host_matches && principal_matches && operation_matches) {
                continue;
            }
            match (e.permission, pattern_type) {
                (Permission::Deny, PatternType::Literal) if name == WILDCARD => return false,
                (Permission::Deny, PatternType::Literal) => {
                    denied_literal.insert(name);
                }
                (Permission::Deny, PatternType::Prefixed) => {
                    denied_prefix.insert(name);
                }
                (Permission::Allow, PatternType::Literal) if name == WILDCARD => return true,
                (Permission::Allow, _) => allowed.push((name, pattern_type)),
            }
        }
        allowed.into_iter().any(|(name, pattern_type)| {
            let literal_denied =
                pattern_type == PatternType::Literal && denied_literal.contains(name);
            let prefix_denied = name
                .char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .any(|prefix| denied_prefix.contains(prefix));
            !literal_denied && !prefix_denied
        })
    }

    /// KIP-430's authorized operations of `principal` on the resource: bit `code` set for each
    /// operation of [`ResourceType::operations`] it is allowed.
    pub fn authorized_operations(
        &self,
        principal: &str,
        host: IpAddr,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        bitfield(
            resource_type
                .operations()
                .iter()
                .copied()
                .filter(|op| self.authorize(principal, host, *op, resource_type, name)),
        )
    }
}
