//! `lograil queue list | describe <group>`: share groups (task queues) over the Kafka protocol —
//! ListGroups v5 (type Share), ShareGroupDescribe for members, and DescribeConfigs on the group
//! for its configs and lograil's read-only per-partition state entries (SPSO, SPEO, available,
//! acquired and archived counts, oldest lock, overload mode) and, with fair turns, per-tenant
//! entries (the top tenants by available records, the rest as `other`).

use std::collections::BTreeMap;

use anyhow::{bail, Context};
use consumer::Connection as Client;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use serde_json::json;

use super::{print, table, Connection};

/// Prefix of the read-only group configs that describe a share partition.
const SHARE_PARTITION_PREFIX: &str = "lograil.share.partition.";
/// Prefix of the read-only group configs that describe a share partition's tenants:
/// `lograil.share.tenant.<topic>-<partition>.<rank>`.
const SHARE_TENANT_PREFIX: &str = "lograil.share.tenant.";
const GROUP_RESOURCE: i8 = 32;

#[derive(Debug, clap::Subcommand)]
pub enum QueueCommand {
    /// List share groups.
    List,
    /// Show a share group's members, configs and, per partition: its start and end offsets,
    /// records available, acquired and archived, the age of the oldest available record and
    /// of the oldest lock, whether the overload mode is on; with fair turns, per tenant (the
    /// top 10 by available records, the rest as `other`): available and in-flight records and
    /// the age of the oldest available one.
    Describe { group: String },
}

/// One share partition's state, parsed from its `lograil.share.partition.*` entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct PartitionState {
    name: String,
    start: i64,
    end: i64,
    available: i64,
    acquired: i64,
    archived: i64,
    oldest_lock_ms: Option<i64>,
    overloaded: bool,
}

/// One tenant of a share partition, parsed from its `lograil.share.tenant.*` entry.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct TenantState {
    /// The partition, `<topic>-<N>`.
    partition: String,
    /// As shown (`None`: the other tenants, summed).
    tenant: Option<String>,
    available: i64,
    in_flight: i64,
    oldest_available_ms: Option<i64>,
}

/// `name` is `<topic>-<N>.<rank>`; the value `available=…,in_flight=…[,oldest_available_ms=…]`
/// then `,tenant=<hex>` or `,other=1`.
fn parse_tenant(name: &str, value: &str) -> TenantState {
    let mut state = TenantState {
        partition: name
            .rsplit_once('.')
            .map_or(name, |(partition, _)| partition)
            .to_string(),
        ..TenantState::default()
    };
    for field in value.split(',') {
        let Some((key, text)) = field.split_once('=') else {
            continue;
        };
        match key {
            "available" => state.available = text.parse().unwrap_or(0),
            "in_flight" => state.in_flight = text.parse().unwrap_or(0),
            "oldest_available_ms" => state.oldest_available_ms = text.parse().ok(),
            "tenant" => {
                let bytes: Vec<u8> = (0..text.len() / 2)
                    .filter_map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
                    .collect();
                state.tenant = Some(lograil::metrics::tenant_label(&bytes));
            }
            _ => {}
        }
    }
    state
}

fn parse_state(name: &str, value: &str) -> PartitionState {
    let mut state = PartitionState {
        name: name.to_string(),
        ..PartitionState::default()
    };
    for field in value.split(',') {
        let Some((key, number)) = field.split_once('=') else {
            continue;
        };
        let Ok(number) = number.parse::<i64>() else {
            continue;
        };
        match key {
            "start" => state.start = number,
            "end" => state.end = number,
            "available" => state.available = number,
            "acquired" => state.acquired = number,
            "archived" => state.archived = number,
            "oldest_lock_ms" => state.oldest_lock_ms = Some(number),
            "overloaded" => state.overloaded = number != 0,
            _ => {}
        }
    }
    state
}

pub fn queue(connection: &Connection, command: &QueueCommand) -> anyhow::Result<()> {
    super::runtime()?.block_on(async {
        let net = consumer::AdminConfig::from_config(&connection.client_config()?)?.net;
        let mut client = Client::connect_any(&net).await?;
        match command {
            QueueCommand::List => {
                let request = ListGroupsRequest::default()
                    .with_types_filter(vec![StrBytes::from_static_str("share")]);
                let listed = client.call(&request, 5).await?;
                let rows: Vec<(String, String)> = listed
                    .groups
                    .into_iter()
                    .filter(|g| g.group_type.eq_ignore_ascii_case("share"))
                    .map(|g| (g.group_id.to_string(), g.group_state.to_string()))
                    .collect();
                let json_rows: Vec<_> = rows
                    .iter()
                    .map(|(g, s)| json!({ "group": g, "state": s }))
                    .collect();
                print(connection, json!(json_rows), || {
                    table(
                        &["GROUP", "STATE"],
                        &[],
                        rows.iter().map(|(g, s)| vec![g.clone(), s.clone()]),
                    )
                })?;
            }
            QueueCommand::Describe { group } => {
                describe(connection, &mut client, group).await?;
            }
        }
        Ok(())
    })
}

async fn describe(connection: &Connection, client: &mut Client, group: &str) -> anyhow::Result<()> {
    let described = share_group(client, group).await?;
    let configs = group_configs(client, group).await?;
    let now = log_core::now_ms();
    let oldest_available = oldest_available_ages(connection, &configs.partitions, now).await?;
    let report = GroupReport {
        group,
        described: &described,
        configs: &configs,
        oldest_available: &oldest_available,
        now,
    };
    print(connection, report.json(), || report.text())?;
    Ok(())
}

/// The share group's description (state and members), or the error it was answered with.
async fn share_group(
    client: &mut Client,
    group: &str,
) -> anyhow::Result<share_group_describe_response::DescribedGroup> {
    let described = client
        .call(
            &ShareGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(StrBytes::from_string(group.to_string()))]),
            1,
        )
        .await?;
    let Some(described) = described.groups.into_iter().next() else {
        bail!("no answer for share group {group}");
    };
    if described.error_code != 0 {
        bail!(
            "share group {group}: {}",
            kafka_protocol::error::ResponseError::try_from_code(described.error_code)
                .map_or_else(|| described.error_code.to_string(), |e| e.to_string())
        );
    }
    Ok(described)
}

/// A share group's config entries, sorted into its settings and lograil's read-only state
/// entries.
struct GroupConfigs {
    settings: BTreeMap<String, String>,
    partitions: Vec<PartitionState>,
    tenants: Vec<TenantState>,
}

async fn group_configs(client: &mut Client, group: &str) -> anyhow::Result<GroupConfigs> {
    let configs = client
        .call(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(GROUP_RESOURCE)
                    .with_resource_name(StrBytes::from_string(group.to_string()))
                    .with_configuration_keys(None),
            ]),
            4,
        )
        .await
        .context("describing the group's configs")?;
    let mut settings = BTreeMap::new();
    let mut partitions = Vec::new();
    let mut tenants = Vec::new();
    for entry in configs.results.into_iter().flat_map(|r| r.configs) {
        let value = entry.value.map(|v| v.to_string()).unwrap_or_default();
        if let Some(name) = entry.name.strip_prefix(SHARE_PARTITION_PREFIX) {
            partitions.push(parse_state(name, &value));
        } else if let Some(name) = entry.name.strip_prefix(SHARE_TENANT_PREFIX) {
            tenants.push(parse_tenant(name, &value));
        } else {
            settings.insert(entry.name.to_string(), value);
        }
    }
    Ok(GroupConfigs {
        settings,
        partitions,
        tenants,
    })
}

/// The age in seconds at `now` of each partition's oldest available record: the record at
/// its start offset (`None` when it has none, or its timestamp could not be read).
async fn oldest_available_ages(
    connection: &Connection,
    partitions: &[PartitionState],
    now: i64,
) -> anyhow::Result<Vec<Option<f64>>> {
    let mut admin = connection.admin().await?;
    let mut oldest_available = Vec::with_capacity(partitions.len());
    for p in partitions {
        let (topic, index) = p
            .name
            .rsplit_once('-')
            .and_then(|(t, i)| Some((t.to_string(), i.parse::<i32>().ok()?)))
            .unwrap_or_default();
        let age = if p.available > 0 || p.start < p.end {
            admin
                .timestamp_at(&topic, index, p.start)
                .await
                .ok()
                .flatten()
                .map(|ts| (now - ts) as f64 / 1000.0)
        } else {
            None
        };
        oldest_available.push(age);
    }
    Ok(oldest_available)
}

/// What `queue describe` shows of a share group, with the ages measured at `now`.
struct GroupReport<'a> {
    group: &'a str,
    described: &'a share_group_describe_response::DescribedGroup,
    configs: &'a GroupConfigs,
    /// Per partition, in the order of `configs.partitions`.
    oldest_available: &'a [Option<f64>],
    now: i64,
}

fn dash(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_string(), |s| format!("{s:.1}"))
}

impl GroupReport<'_> {
    /// Seconds since a partition's oldest lock was taken.
    fn lock_age(&self, p: &PartitionState) -> Option<f64> {
        p.oldest_lock_ms.map(|ms| (self.now - ms) as f64 / 1000.0)
    }

    /// Seconds since a tenant's oldest available record was written (never negative).
    fn tenant_age(&self, t: &TenantState) -> Option<f64> {
        t.oldest_available_ms
            .map(|ts| (self.now - ts).max(0) as f64 / 1000.0)
    }

    fn json(&self) -> serde_json::Value {
        let members: Vec<_> = self
            .described
            .members
            .iter()
            .map(|m| {
                json!({
                    "member_id": m.member_id.to_string(),
                    "client_id": m.client_id.to_string(),
                    "host": m.client_host.to_string(),
                    "epoch": m.member_epoch,
                    "assignment": m.assignment.topic_partitions.iter()
                        .map(|t| json!({ "topic": t.topic_name.to_string(), "partitions": t.partitions }))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        let rows: Vec<_> = self
            .configs
            .partitions
            .iter()
            .zip(self.oldest_available)
            .map(|(p, age)| {
                json!({
                    "partition": p.name,
                    "start_offset": p.start,
                    "end_offset": p.end,
                    "available": p.available,
                    "acquired": p.acquired,
                    "archived": p.archived,
                    "oldest_available_seconds": age,
                    "oldest_lock_seconds": self.lock_age(p),
                    "overloaded": p.overloaded,
                })
            })
            .collect();
        let tenant_rows: Vec<_> = self
            .configs
            .tenants
            .iter()
            .map(|t| {
                json!({
                    "partition": t.partition,
                    "tenant": t.tenant,
                    "other": t.tenant.is_none(),
                    "available": t.available,
                    "in_flight": t.in_flight,
                    "oldest_available_seconds": self.tenant_age(t),
                })
            })
            .collect();
        json!({
            "group": self.group,
            "state": self.described.group_state.to_string(),
            "members": members,
            "configs": self.configs.settings,
            "partitions": rows,
            "tenants": tenant_rows,
        })
    }

    /// The header line, then the partitions', tenants' (with fair turns) and members' tables.
    fn text(&self) -> String {
        let header = format!(
            "Share group {} is {} with {} members.\n",
            self.group,
            self.described.group_state.as_str(),
            self.described.members.len()
        );
        header + &self.partitions_table() + &self.tenants_table() + "\n\n" + &self.members_table()
    }

    fn partitions_table(&self) -> String {
        let rows = self
            .configs
            .partitions
            .iter()
            .zip(self.oldest_available)
            .map(|(p, age)| {
                vec![
                    p.name.clone(),
                    p.start.to_string(),
                    p.end.to_string(),
                    p.available.to_string(),
                    p.acquired.to_string(),
                    p.archived.to_string(),
                    dash(*age),
                    dash(self.lock_age(p)),
                    if p.overloaded { "yes" } else { "no" }.to_string(),
                ]
            });
        table(
            &[
                "PARTITION",
                "START",
                "END",
                "AVAILABLE",
                "ACQUIRED",
                "ARCHIVED",
                "OLDEST-AVAILABLE-S",
                "OLDEST-LOCK-S",
                "OVERLOADED",
            ],
            &[1, 2, 3, 4, 5, 6, 7],
            rows,
        )
    }

    /// The tenants' table after a blank line, or nothing without fair turns.
    fn tenants_table(&self) -> String {
        let tenants = &self.configs.tenants;
        if tenants.is_empty() {
            return String::new();
        }
        let rows = tenants.iter().map(|t| {
            vec![
                t.partition.clone(),
                t.tenant.clone().unwrap_or_else(|| "(other)".to_string()),
                t.available.to_string(),
                t.in_flight.to_string(),
                dash(self.tenant_age(t)),
            ]
        });
        "\n\n".to_string()
            + &table(
                &[
                    "PARTITION",
                    "TENANT",
                    "AVAILABLE",
                    "IN-FLIGHT",
                    "OLDEST-AVAILABLE-S",
                ],
                &[2, 3, 4],
                rows,
            )
    }

    fn members_table(&self) -> String {
        let rows = self.described.members.iter().map(|m| {
            vec![
                m.member_id.to_string(),
                m.client_id.to_string(),
                m.client_host.to_string(),
                m.member_epoch.to_string(),
            ]
        });
        table(&["MEMBER", "CLIENT-ID", "HOST", "EPOCH"], &[3], rows)
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_state, parse_tenant};

    #[test]
    fn tenant_states_parse() {
        let t = parse_tenant(
            "my.tasks-3.0",
            "available=7,in_flight=2,oldest_available_ms=1700000000000,tenant=61631b",
        );
        assert_eq!(t.partition, "my.tasks-3");
        assert_eq!(t.tenant.as_deref(), Some("ac\\u{1b}"));
        assert_eq!((t.available, t.in_flight), (7, 2));
        assert_eq!(t.oldest_available_ms, Some(1_700_000_000_000));
        let other = parse_tenant("t-0.10", "available=1,in_flight=0,other=1");
        assert_eq!((other.tenant, other.oldest_available_ms), (None, None));
    }

    #[test]
    fn partition_states_parse() {
        let state = parse_state(
            "tasks-0",
            "start=5,end=20,available=3,acquired=10,archived=2,oldest_lock_ms=1700000000000",
        );
        assert_eq!((state.start, state.end), (5, 20));
        assert_eq!(
            (state.available, state.acquired, state.archived),
            (3, 10, 2)
        );
        assert_eq!(state.oldest_lock_ms, Some(1_700_000_000_000));
        assert_eq!(
            parse_state("t-1", "start=1,end=1,available=0,acquired=0,archived=0").oldest_lock_ms,
            None
        );
    }
}
