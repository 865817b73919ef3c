//! Client quotas (AlterClientQuotas, DescribeClientQuotas, `lograil quota`) message by message
//! and across a restart; their enforcement is tests/e2e/quota_enforcement.rs.

use std::collections::BTreeMap;

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::*;

use test_support::kafka::text;
use test_support::wire::{call, connect};
use test_support::{lograil_stdout, TestBroker};

const INVALID_REQUEST: i16 = 42;

/// (entity type, name; `None` the default)
type Entity<'a> = &'a [(&'a str, Option<&'a str>)];

pub(crate) fn alter(
    addr: &str,
    entity: Entity,
    ops: &[(&str, Option<f64>)],
    validate_only: bool,
) -> i16 {
    let request = AlterClientQuotasRequest::default()
        .with_validate_only(validate_only)
        .with_entries(vec![EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(text(t))
                            .with_entity_name(n.map(text))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(k, v)| {
                        OpData::default()
                            .with_key(text(k))
                            .with_value(v.unwrap_or(0.0))
                            .with_remove(v.is_none())
                    })
                    .collect(),
            )]);
    let response: AlterClientQuotasResponse =
        call(&mut connect(addr), ApiKey::AlterClientQuotas, 1, &request);
    assert_eq!(response.entries.len(), 1, "{response:?}");
    response.entries[0].error_code
}

/// Each matching entity as "type=name,type=name" (`<default>` for a default) with its values.
fn describe(
    addr: &str,
    filter: &[(&str, i8, Option<&str>)],
    strict: bool,
) -> Result<BTreeMap<String, BTreeMap<String, f64>>, i16> {
    let request = DescribeClientQuotasRequest::default()
        .with_strict(strict)
        .with_components(
            filter
                .iter()
                .map(|(t, m, n)| {
                    ComponentData::default()
                        .with_entity_type(text(t))
                        .with_match_type(*m)
                        .with_match(n.map(text))
                })
                .collect(),
        );
    let response: DescribeClientQuotasResponse = call(
        &mut connect(addr),
        ApiKey::DescribeClientQuotas,
        1,
        &request,
    );
    if response.error_code != 0 {
        return Err(response.error_code);
    }
    Ok(response
        .entries
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let entity = e
                .entity
                .iter()
                .map(|c| {
                    format!(
                        "{}={}",
                        c.entity_type,
                        c.entity_name.as_deref().unwrap_or("<default>")
                    )
                })
                .collect::<Vec<_>>()
                .join(",");
            let values = e
                .values
                .into_iter()
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect())
}

const EXACT: i8 = 0;
const DEFAULT: i8 = 1;
const ANY: i8 = 2;

#[test]
fn client_quotas_are_set_described_removed_and_kept_across_a_restart() {
    let tmp = tempfile::tempdir().unwrap();
    let mut broker = TestBroker::start(&tmp.path().join("data"), &[]);
    let addr = broker.addr.clone();
    let p = "producer_byte_rate";
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("a"))],
            &[(p, Some(1000.0))],
            false
        ),
        0
    );
    assert_eq!(
        alter(
            &addr,
            &[("client-id", None)],
            &[
                ("consumer_byte_rate", Some(2000.0)),
                ("request_percentage", Some(12.5))
            ],
            false
        ),
        0
    );
    assert_eq!(
        alter(
            &addr,
            &[("user", None), ("client-id", Some("a"))],
            &[(p, Some(3000.0))],
            false
        ),
        0
    );
    // validate_only checks and changes nothing.
    assert_eq!(
        alter(&addr, &[("user", Some("bob"))], &[(p, Some(1.0))], true),
        0
    );
    // Refused as Kafka refuses: unknown key, entity type, fractional byte rate, negative.
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("a"))],
            &[("bytes", Some(1.0))],
            false
        ),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(&addr, &[("group", Some("a"))], &[(p, Some(1.0))], false),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(&addr, &[("client-id", Some("a"))], &[(p, Some(1.5))], false),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(&addr, &[("client-id", Some("a"))], &[(p, Some(-1.0))], true),
        INVALID_REQUEST
    );
    assert_eq!(
        alter(
            &addr,
            &[("client-id", Some("a")), ("client-id", Some("b"))],
            &[(p, Some(1.0))],
            false
        ),
        INVALID_REQUEST
    );

    let all = describe(&addr, &[], false).unwrap();
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all["client-id=a"][p], 1000.0);
    assert_eq!(all["client-id=<default>"]["request_percentage"], 12.5);
    assert_eq!(all["user=<default>,client-id=a"][p], 3000.0);
    // Filters: exact, default, any; strict leaves out entities with more components.
    let exact = describe(&addr, &[("client-id", EXACT, Some("a"))], false).unwrap();
    assert_eq!(
        exact.keys().collect::<Vec<_>>(),
        ["client-id=a", "user=<default>,client-id=a"]
    );
    let strict = describe(&addr, &[("client-id", EXACT, Some("a"))], true).unwrap();
    assert_eq!(strict.keys().collect::<Vec<_>>(), ["client-id=a"]);
    let default = describe(&addr, &[("client-id", DEFAULT, None)], false).unwrap();
    assert_eq!(default.keys().collect::<Vec<_>>(), ["client-id=<default>"]);
    let users = describe(&addr, &[("user", ANY, None)], false).unwrap();
    assert_eq!(
        users.keys().collect::<Vec<_>>(),
        ["user=<default>,client-id=a"]
    );
    assert!(describe(&addr, &[("ip", ANY, None)], false)
        .unwrap()
        .is_empty());
    assert_eq!(
        describe(&addr, &[("group", ANY, None)], false),
        Err(INVALID_REQUEST)
    );
    assert_eq!(
        describe(&addr, &[("user", EXACT, None)], false),
        Err(INVALID_REQUEST)
    );

    // Removal of one key, then of the entity's last.
    assert_eq!(
        alter(
            &addr,
            &[("client-id", None)],
            &[("request_percentage", None)],
            false
        ),
        0
    );
    assert_eq!(
        alter(&addr, &[("client-id", Some("a"))], &[(p, None)], false),
        0
    );

    broker.stop();
    broker.restart();
    let addr = broker.addr.clone();
    let after = describe(&addr, &[], false).unwrap();
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(
        after["client-id=<default>"],
        BTreeMap::from([("consumer_byte_rate".to_string(), 2000.0)])
    );
    assert_eq!(after["user=<default>,client-id=a"][p], 3000.0);

    // The CLI reads and writes the same quotas.
    let cli = |args: &[&str]| {
        let mut args = [&["quota"], args].concat();
        args.extend(["--bootstrap-server", &addr]);
        lograil_stdout(&args)
    };
    cli(&["set", "--client-id", "cli", "--producer-byte-rate", "4096"]);
    assert_eq!(
        describe(&addr, &[("client-id", EXACT, Some("cli"))], true).unwrap()["client-id=cli"][p],
        4096.0
    );
    let listed = cli(&["describe", "--json"]);
    let listed: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed}");
    let text = cli(&["describe", "--client-id-default", "--strict"]);
    assert!(text.contains("consumer_byte_rate=2000"), "{text}");
    cli(&["remove", "--client-id", "cli"]);
    assert!(describe(&addr, &[("client-id", EXACT, Some("cli"))], false)
        .unwrap()
        .is_empty());
    // Addresses (KIP-612 `ip` entities) take their connection rate, and only that.
    cli(&["set", "--ip", "10.1.2.3", "--connection-creation-rate", "7"]);
    cli(&["set", "--ip-default", "--connection-creation-rate", "50"]);
    let ips = describe(&addr, &[("ip", EXACT, Some("10.1.2.3"))], true).unwrap();
    assert_eq!(
        ips["ip=10.1.2.3"]["connection_creation_rate"], 7.0,
        "{ips:?}"
    );
    let text = cli(&["describe", "--ip-default", "--strict"]);
    assert!(text.contains("connection_creation_rate=50"), "{text}");
    cli(&["remove", "--ip", "10.1.2.3"]);
    cli(&["remove", "--ip-default"]);
    let ips = describe(&addr, &[("ip", EXACT, Some("10.1.2.3"))], false).unwrap();
    assert!(ips.is_empty(), "{ips:?}");

    // A corrupt file stops the broker at start with a reason naming it.
    broker.stop();
    std::fs::write(tmp.path().join("data/client-quotas"), "{not json").unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lograil"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(tmp.path().join("data"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("client-quotas"), "{err}");
}
