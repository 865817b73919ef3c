//! The decision rules of Kafka's StandardAuthorizer, one test each, and DENY winning under
//! any set of ACLs (proptest).

#![allow(clippy::unwrap_used)]

use std::net::IpAddr;

use acl::{
    AccessControlEntry, AclBinding, Acls, Authorizer, Operation, PatternType, Permission,
    ResourcePattern, ResourceType, Settings,
};
use proptest::prelude::*;

use Operation::*;
use PatternType::*;
use Permission::*;
use ResourceType::*;

const ALICE: &str = "User:alice";

fn host(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn here() -> IpAddr {
    host("10.0.0.1")
}

fn acl(
    resource_type: ResourceType,
    name: &str,
    pattern_type: PatternType,
    principal: &str,
    host: &str,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type,
            name: name.into(),
            pattern_type,
        },
        entry: AccessControlEntry {
            principal: principal.into(),
            host: host.into(),
            operation,
            permission,
        },
    }
}

/// An ACL on topic `name` for alice from every host.
fn topic(
    name: &str,
    pattern_type: PatternType,
    operation: Operation,
    permission: Permission,
) -> AclBinding {
    acl(Topic, name, pattern_type, ALICE, "*", operation, permission)
}

fn with(acls: impl IntoIterator<Item = AclBinding>) -> Authorizer {
    Authorizer::new(Settings::default(), Acls::from_bindings(acls))
}

fn may(a: &Authorizer, op: Operation, name: &str) -> bool {
    a.authorize(ALICE, here(), op, Topic, name)
}

#[test]
fn without_acls_everything_is_denied_by_default_and_allowed_with_allow_everyone() {
    let deny = with([]);
    assert!(!may(&deny, Read, "t"));
    let allow = Authorizer::new(
        Settings {
            allow_everyone_if_no_acl_found: true,
            ..Settings::default()
        },
        Acls::default(),
    );
    assert!(may(&allow, Read, "t"));
    assert!(allow.authorize(ALICE, here(), Alter, Cluster, "kafka-cluster"));
}

#[test]
fn allow_everyone_counts_only_the_acls_that_apply_to_the_resource() {
    let settings = Settings {
        allow_everyone_if_no_acl_found: true,
        ..Settings::default()
    };
    let a = Authorizer::new(
        settings,
        Acls::from_bindings([acl(Topic, "guarded", Literal, "User:bob", "*", Read, Allow)]),
    );
    assert!(may(&a, Read, "open"), "no ACL applies to `open`");
    assert!(may(&a, Write, "open"));
    assert!(
        !may(&a, Read, "guarded"),
        "an ACL applies to `guarded`, for bob only"
    );
    assert!(
        a.authorize(ALICE, here(), Read, Group, "guarded"),
        "other resource types too"
    );
}

#[test]
fn super_users_may_do_anything_even_when_denied() {
    let settings = Settings {
        super_users: Settings::parse_super_users("User:admin; User:ops;").unwrap(),
        ..Settings::default()
    };
    let a = Authorizer::new(
        settings,
        Acls::from_bindings([acl(Topic, "*", Literal, "User:*", "*", All, Deny)]),
    );
    assert!(a.authorize("User:admin", here(), Write, Topic, "t"));
    assert!(a.authorize("User:ops", here(), Alter, Cluster, "kafka-cluster"));
    assert!(!a.authorize(ALICE, here(), Write, Topic, "t"));
    assert!(Settings::parse_super_users("admin").is_err());
    assert_eq!(Settings::parse_super_users(" ; ").unwrap().len(), 0);
}

#[test]
fn an_allow_lets_its_principal_do_its_operation_on_its_resource_only() {
    let a = with([topic("orders", Literal, Read, Allow)]);
    assert!(may(&a, Read, "orders"));
    assert!(!may(&a, Write, "orders"));
    assert!(!may(&a, Read, "orders2"));
    assert!(!a.authorize("User:bob", here(), Read, Topic, "orders"));
    assert!(!a.authorize(ALICE, here(), Read, Group, "orders"));
}

#[test]
fn the_wildcard_principal_matches_every_user() {
    let a = with([acl(Topic, "t", Literal, "User:*", "*", Read, Allow)]);
    assert!(a.authorize("User:bob", here(), Read, Topic, "t"));
    assert!(a.authorize("User:ANONYMOUS", here(), Read, Topic, "t"));
}

#[test]
fn hosts_match_as_the_wildcard_or_the_clients_address() {
    let a = with([
        acl(Topic, "t", Literal, ALICE, "10.0.0.1", Read, Allow),
        acl(Topic, "v6", Literal, ALICE, "0:0:0:0:0:0:0:1", Read, Allow),
        acl(Topic, "named", Literal, ALICE, "localhost", Read, Allow),
    ]);
    assert!(a.authorize(ALICE, host("10.0.0.1"), Read, Topic, "t"));
    assert!(!a.authorize(ALICE, host("10.0.0.2"), Read, Topic, "t"));
    assert!(
        a.authorize(ALICE, host("::1"), Read, Topic, "v6"),
        "Java's IPv6 spelling"
    );
    assert!(
        !a.authorize(ALICE, host("127.0.0.1"), Read, Topic, "named"),
        "names never match"
    );
}

#[test]
fn the_literal_wildcard_name_matches_every_resource_of_its_type() {
    let a = with([topic("*", Literal, Write, Allow)]);
    assert!(may(&a, Write, "anything"));
    assert!(may(&a, Write, "*"));
    assert!(!a.authorize(ALICE, here(), Write, Group, "anything"));
}

#[test]
fn a_prefixed_pattern_matches_every_name_it_starts() {
    let a = with([topic("orders-", Prefixed, Read, Allow)]);
    assert!(may(&a, Read, "orders-eu"));
    assert!(may(&a, Read, "orders-"));
    assert!(!may(&a, Read, "orders"));
    assert!(!may(&a, Read, "my-orders-eu"));
    let literal_star = with([topic("o*", Literal, Read, Allow)]);
    assert!(
        !may(&literal_star, Read, "orders"),
        "`*` is a wildcard only alone"
    );
}

#[test]
fn deny_wins_over_allow() {
    let a = with([
        topic("orders", Literal, Read, Allow),
        topic("orders", Prefixed, Read, Deny),
        topic("*", Literal, Write, Allow),
        acl(Topic, "public", Literal, "User:*", "*", Write, Deny),
    ]);
    assert!(!may(&a, Read, "orders"));
    assert!(!may(&a, Read, "orders-eu"));
    assert!(!may(&a, Write, "public"));
    assert!(may(&a, Write, "private"));
}

#[test]
fn all_allows_and_denies_every_operation() {
    let a = with([
        topic("t", Literal, All, Allow),
        topic("u", Literal, All, Deny),
        topic("u", Literal, Read, Allow),
    ]);
    for op in [
        Read,
        Write,
        Create,
        Delete,
        Alter,
        Describe,
        DescribeConfigs,
        AlterConfigs,
    ] {
        assert!(may(&a, op, "t"), "{op}");
        assert!(!may(&a, op, "u"), "{op}");
    }
}

#[test]
fn read_write_delete_and_alter_imply_describe() {
    for op in [Read, Write, Delete, Alter] {
        let a = with([topic("t", Literal, op, Allow)]);
        assert!(may(&a, Describe, "t"), "{op} implies DESCRIBE");
        assert!(
            !may(&a, DescribeConfigs, "t"),
            "{op} does not imply DESCRIBE_CONFIGS"
        );
    }
    for op in [Create, DescribeConfigs, AlterConfigs] {
        let a = with([topic("t", Literal, op, Allow)]);
        assert!(!may(&a, Describe, "t"), "{op} does not imply DESCRIBE");
    }
    let describe = with([topic("t", Literal, Describe, Allow)]);
    assert!(!may(&describe, Read, "t"), "implication goes one way");
}

#[test]
fn alter_configs_implies_describe_configs() {
    let a = with([topic("t", Literal, AlterConfigs, Allow)]);
    assert!(may(&a, DescribeConfigs, "t"));
    assert!(may(&a, AlterConfigs, "t"));
    let describe = with([topic("t", Literal, DescribeConfigs, Allow)]);
    assert!(!may(&describe, AlterConfigs, "t"));
}

#[test]
fn implications_are_for_allow_only() {
    let a = with([
        topic("t", Literal, Read, Deny),
        topic("t", Literal, Describe, Allow),
    ]);
    assert!(
        may(&a, Describe, "t"),
        "a DENY of READ does not deny DESCRIBE"
    );
    assert!(!may(&a, Read, "t"));
    let configs = with([
        topic("t", Literal, AlterConfigs, Deny),
        topic("t", Literal, DescribeConfigs, Allow),
    ]);
    assert!(may(&configs, DescribeConfigs, "t"));
}

#[test]
fn by_resource_type_is_allowed_by_an_allow_on_any_resource_of_the_type() {
    let by_type = |a: &Authorizer| a.authorize_by_resource_type(ALICE, here(), Write, Topic);
    assert!(!by_type(&with([])));
    assert!(by_type(&with([topic("some-topic", Literal, Write, Allow)])));
    assert!(by_type(&with([topic("pre", Prefixed, All, Allow)])));
    assert!(
        !by_type(&with([topic("t", Literal, Read, Allow)])),
        "another operation"
    );
    assert!(
        !by_type(&with([topic("t", Literal, Describe, Allow)])),
        "no implied operations"
    );
    assert!(!by_type(&with([acl(
        Topic, "t", Literal, "User:bob", "*", Write, Allow
    )])));
    assert!(!by_type(&with([acl(
        Topic, "t", Literal, ALICE, "10.9.9.9", Write, Allow
    )])));
    assert!(!by_type(&with([acl(
        Group, "t", Literal, ALICE, "*", Write, Allow
    )])));
}

#[test]
fn by_resource_type_is_denied_when_a_deny_covers_every_allow() {
    let by_type = |a: &Authorizer| a.authorize_by_resource_type(ALICE, here(), Write, Topic);
    assert!(!by_type(&with([
        topic("t", Literal, Write, Allow),
        topic("t", Literal, Write, Deny)
    ])));
    assert!(!by_type(&with([
        topic("orders-eu", Literal, Write, Allow),
        topic("orders", Prefixed, All, Deny)
    ])));
    assert!(!by_type(&with([
        topic("orders-eu", Prefixed, Write, Allow),
        topic("orders", Prefixed, Write, Deny)
    ])));
    assert!(!by_type(&with([
        topic("t", Literal, Write, Allow),
        topic("*", Literal, Write, Deny)
    ])));
    assert!(by_type(&with([
        topic("t", Literal, Write, Allow),
        topic("u", Literal, Write, Allow),
        topic("t", Literal, Write, Deny),
    ])));
    assert!(by_type(&with([
        topic("t", Prefixed, Write, Allow),
        topic("t", Literal, Write, Deny)
    ])));
}

#[test]
fn by_resource_type_follows_super_users_and_allow_everyone() {
    let super_user = Authorizer::new(
        Settings {
            super_users: Settings::parse_super_users(ALICE).unwrap(),
            ..Settings::default()
        },
        Acls::default(),
    );
    assert!(super_user.authorize_by_resource_type(ALICE, here(), Write, Topic));
    let everyone = Authorizer::new(
        Settings {
            allow_everyone_if_no_acl_found: true,
            ..Settings::default()
        },
        Acls::default(),
    );
    assert!(everyone.authorize_by_resource_type(ALICE, here(), Write, Topic));
}

#[test]
fn authorized_operations_set_the_bit_of_each_allowed_operation() {
    let a = with([
        topic("t", Literal, Read, Allow),
        topic("t", Literal, AlterConfigs, Allow),
    ]);
    let bits = a.authorized_operations(ALICE, here(), Topic, "t");
    let expected = (1 << Read.code())
        | (1 << Describe.code())
        | (1 << DescribeConfigs.code())
        | (1 << AlterConfigs.code());
    assert_eq!(bits, expected);
    assert_eq!(a.authorized_operations("User:bob", here(), Topic, "t"), 0);
    let all = with([acl(
        Cluster,
        "kafka-cluster",
        Literal,
        ALICE,
        "*",
        All,
        Allow,
    )]);
    assert_eq!(
        all.authorized_operations(ALICE, here(), Cluster, "kafka-cluster"),
        Cluster.all_operations()
    );
}

fn arb_operation() -> impl Strategy<Value = Operation> {
    proptest::sample::select(Operation::VALUES.to_vec())
}

fn arb_acl() -> impl Strategy<Value = AclBinding> {
    (
        proptest::sample::select(vec![Topic, Group]),
        proptest::sample::select(vec!["orders", "ord", "*", "orders-eu", "o"]),
        proptest::sample::select(vec![Literal, Prefixed]),
        proptest::sample::select(vec![ALICE, "User:*", "User:bob"]),
        proptest::sample::select(vec!["*", "10.0.0.1", "10.0.0.2"]),
        arb_operation(),
        proptest::sample::select(vec![Allow, Deny]),
    )
        .prop_map(|(rt, name, pt, principal, host, op, perm)| {
            acl(rt, name, pt, principal, host, op, perm)
        })
}

proptest! {
    /// Whatever else the ACLs say, and whatever allow.everyone.if.no.acl.found says, a DENY
    /// that applies to the principal, host, operation and resource denies.
    #[test]
    fn deny_always_wins(
        others in proptest::collection::vec(arb_acl(), 0..20),
        op in arb_operation().prop_filter("a concrete action", |op| *op != All),
        deny_op_all in any::<bool>(),
        deny_principal in proptest::sample::select(vec![ALICE, "User:*"]),
        deny_host in proptest::sample::select(vec!["*", "10.0.0.1"]),
        deny_pattern in proptest::sample::select(vec![("orders-eu", Literal), ("*", Literal), ("orders", Prefixed), ("o", Prefixed), ("orders-eu", Prefixed)]),
        allow_everyone in any::<bool>(),
    ) {
        let deny = acl(Topic, deny_pattern.0, deny_pattern.1, deny_principal, deny_host,
            if deny_op_all { All } else { op }, Deny);
        let mut acls = others;
        acls.push(deny);
        let a = Authorizer::new(
            Settings { allow_everyone_if_no_acl_found: allow_everyone, ..Settings::default() },
            Acls::from_bindings(acls),
        );
        prop_assert!(!a.authorize(ALICE, here(), op, Topic, "orders-eu"));
    }
}
