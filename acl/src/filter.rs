//! Which ACLs DescribeAcls lists and DeleteAcls deletes ([`AclBindingFilter`]), matched as
//! Kafka's `AclBindingFilter` matches: a null field or ANY matches anything; pattern type ANY
//! matches the exact name under any pattern type, MATCH every ACL that applies to that name
//! (the literal name, the literal `*`, and every prefix of it).

use crate::binding::{concrete, AclBinding, AclError, ResourcePattern, WILDCARD};
use crate::model::{Operation, PatternType, Permission, ResourceType, ANY, MATCH};

/// A filter's pattern type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatternFilter {
    /// Any pattern type, the exact name.
    Any,
    /// Every ACL that applies to the name.
    Match,
    /// This pattern type, the exact name.
    Exactly(PatternType),
}

/// Kafka's `AclBindingFilter`: `None` is null or ANY.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    /// `None`: every resource type.
    pub resource_type: Option<ResourceType>,
    /// `None`: every name.
    pub name: Option<String>,
    /// How `name` is matched.
    pub pattern: PatternFilter,
    /// `None`: every principal (the principal as written in the ACL: `User:*` matches only
    /// ACLs of `User:*`).
    pub principal: Option<String>,
    /// `None`: every host (as written).
    pub host: Option<String>,
    /// `None`: every operation.
    pub operation: Option<Operation>,
    /// `None`: both permissions.
    pub permission: Option<Permission>,
}

/// A filter field from its wire code: ANY is `None`.
fn optional<T>(
    field: &'static str,
    code: i8,
    from_code: fn(i8) -> Option<T>,
) -> Result<Option<T>, AclError> {
    if code == ANY {
        return Ok(None);
    }
    concrete(field, code, from_code, false).map(Some)
}

/// A resource pattern filter in wire codes: resource type, name (`None`: any), pattern type.
pub type PatternFilterCodes<'a> = (i8, Option<&'a str>, i8);
/// An access control entry filter in wire codes: principal and host (`None`: any), operation,
/// permission type.
pub type EntryFilterCodes<'a> = (Option<&'a str>, Option<&'a str>, i8, i8);

impl AclBindingFilter {
    /// Every ACL.
    pub const ANY: AclBindingFilter = AclBindingFilter {
        resource_type: None,
        name: None,
        pattern: PatternFilter::Any,
        principal: None,
        host: None,
        operation: None,
        permission: None,
    };

    /// A filter from a DescribeAcls request's or a DeleteAcls filter's fields (wire codes):
    /// its pattern part (resource type, name, pattern type) and its entry part (principal,
    /// host, operation, permission); UNKNOWN or codes Kafka does not have are refused.
    pub fn from_codes(
        (resource_type, name, pattern_type): PatternFilterCodes<'_>,
        (principal, host, operation, permission): EntryFilterCodes<'_>,
    ) -> Result<AclBindingFilter, AclError> {
        let pattern = match pattern_type {
            ANY => PatternFilter::Any,
            MATCH => PatternFilter::Match,
            code => PatternFilter::Exactly(concrete(
                "pattern type",
                code,
                PatternType::from_code,
                false,
            )?),
        };
        Ok(AclBindingFilter {
            resource_type: optional("resource type", resource_type, ResourceType::from_code)?,
            name: name.map(str::to_string),
            pattern,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation: optional("operation", operation, Operation::from_code)?,
            permission: optional("permission type", permission, Permission::from_code)?,
        })
    }

    /// Whether `binding` is one this filter selects.
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(&binding.pattern) && {
            let e = &binding.entry;
            self.principal.as_ref().is_none_or(|p| *p == e.principal)
                && self.host.as_ref().is_none_or(|h| *h == e.host)
                && self.operation.is_none_or(|o| o == e.operation)
                && self.permission.is_none_or(|p| p == e.permission)
        }
    }

    /// Kafka's `ResourcePatternFilter.matches`.
    pub fn matches_pattern(&self, pattern: &ResourcePattern) -> bool {
        if self
            .resource_type
            .is_some_and(|t| t != pattern.resource_type)
        {
            return false;
        }
        if let PatternFilter::Exactly(t) = self.pattern {
            if t != pattern.pattern_type {
                return false;
            }
        }
        let Some(name) = &self.name else {
            return true;
        };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Exactly(_) => *name == pattern.name,
            PatternFilter::Match => match pattern.pattern_type {
                PatternType::Literal => *name == pattern.name || pattern.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&pattern.name),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binding::AccessControlEntry;

    fn binding(rt: ResourceType, name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: Operation::Read,
                permission: Permission::Allow,
            },
        }
    }

    fn names(filter: &AclBindingFilter, all: &[AclBinding]) -> Vec<String> {
        all.iter()
            .filter(|b| filter.matches(b))
            .map(|b| format!("{}:{}", b.pattern.pattern_type, b.pattern.name))
            .collect()
    }

    fn topic_filter(name: &str, pattern: PatternFilter) -> AclBindingFilter {
        AclBindingFilter {
            resource_type: Some(ResourceType::Topic),
            name: Some(name.into()),
            pattern,
            ..AclBindingFilter::ANY
        }
    }

    fn sample() -> Vec<AclBinding> {
        use PatternType::*;
        vec![
            binding(ResourceType::Topic, "orders", Literal),
            binding(ResourceType::Topic, "*", Literal),
            binding(ResourceType::Topic, "ord", Prefixed),
            binding(ResourceType::Topic, "orders", Prefixed),
            binding(ResourceType::Topic, "other", Prefixed),
            binding(ResourceType::Group, "orders", Literal),
        ]
    }

    #[test]
    fn literal_and_prefixed_filters_match_the_exact_name_and_type() {
        let all = sample();
        let literal = topic_filter("orders", PatternFilter::Exactly(PatternType::Literal));
        assert_eq!(names(&literal, &all), ["LITERAL:orders"]);
        let prefixed = topic_filter("ord", PatternFilter::Exactly(PatternType::Prefixed));
        assert_eq!(names(&prefixed, &all), ["PREFIXED:ord"]);
    }

    #[test]
    fn any_matches_the_exact_name_under_any_pattern_type() {
        let all = sample();
        let any = topic_filter("orders", PatternFilter::Any);
        assert_eq!(names(&any, &all), ["LITERAL:orders", "PREFIXED:orders"]);
    }

    #[test]
    fn match_finds_every_acl_that_applies_to_the_name() {
        let all = sample();
        let matching = topic_filter("orders", PatternFilter::Match);
        assert_eq!(
            names(&matching, &all),
            [
                "LITERAL:orders",
                "LITERAL:*",
                "PREFIXED:ord",
                "PREFIXED:orders"
            ]
        );
    }

    #[test]
    fn null_fields_match_anything_and_entry_fields_are_exact() {
        let all = sample();
        assert_eq!(names(&AclBindingFilter::ANY, &all).len(), all.len());
        let mut by_principal = AclBindingFilter::ANY;
        by_principal.principal = Some("User:*".into());
        assert!(
            names(&by_principal, &all).is_empty(),
            "User:* is matched as written"
        );
        by_principal.principal = Some("User:alice".into());
        by_principal.operation = Some(Operation::Read);
        by_principal.permission = Some(Permission::Allow);
        by_principal.host = Some("*".into());
        assert_eq!(names(&by_principal, &all).len(), all.len());
        by_principal.operation = Some(Operation::All);
        assert!(
            names(&by_principal, &all).is_empty(),
            "ALL is matched as written"
        );
    }

    #[test]
    fn filters_are_built_from_codes() {
        let f = AclBindingFilter::from_codes((ANY, None, MATCH), (None, None, ANY, ANY)).unwrap();
        assert_eq!(f.pattern, PatternFilter::Match);
        assert_eq!(f.resource_type, None);
        let f =
            AclBindingFilter::from_codes((2, Some("t"), 3), (Some("User:a"), None, 3, 2)).unwrap();
        assert_eq!(f.pattern, PatternFilter::Exactly(PatternType::Literal));
        assert_eq!(f.operation, Some(Operation::Read));
        assert_eq!(f.permission, Some(Permission::Deny));
        assert!(AclBindingFilter::from_codes((0, None, ANY), (None, None, ANY, ANY)).is_err());
        assert!(AclBindingFilter::from_codes((ANY, None, 0), (None, None, ANY, ANY)).is_err());
        assert!(AclBindingFilter::from_codes((ANY, None, ANY), (None, None, 0, ANY)).is_err());
        assert!(AclBindingFilter::from_codes((ANY, None, ANY), (None, None, ANY, 4)).is_err());
    }
}
