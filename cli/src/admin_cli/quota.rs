//! `lograil quota set | remove | describe`: Kafka's client quotas (`producer_byte_rate`,
//! `consumer_byte_rate`, `request_percentage`) of users and client ids, and the
//! `connection_creation_rate` of addresses (KIP-612 `ip` entities), over AlterClientQuotas and
//! DescribeClientQuotas (so it works against any Kafka cluster, like `kafka-configs
//! --entity-type clients/users/ips`).

use anyhow::bail;
use consumer::{Admin, ClientQuotas, QuotaMatch};
use serde_json::json;

use super::{print, table, Connection};

#[derive(Debug, clap::Args)]
pub struct EntityArgs {
    /// The user: a SASL username or a client certificate's subject (`ANONYMOUS` on a listener
    /// without authentication).
    #[arg(long, conflicts_with = "user_default")]
    user: Option<String>,
    /// The default user: each user without a quota of its own gets this one.
    #[arg(long)]
    user_default: bool,
    /// The client id (the `client.id` a client sends).
    #[arg(long, conflicts_with = "client_id_default")]
    client_id: Option<String>,
    /// The default client id: each client id without a quota of its own gets this one.
    #[arg(long)]
    client_id_default: bool,
    /// A client address (an `ip` entity: only `connection_creation_rate`, on its own).
    #[arg(long, conflicts_with_all = ["ip_default", "user", "user_default", "client_id", "client_id_default"])]
    ip: Option<String>,
    /// The default address: each address without a quota of its own gets this one.
    #[arg(long, conflicts_with_all = ["user", "user_default", "client_id", "client_id_default"])]
    ip_default: bool,
}

impl EntityArgs {
    /// (entity type, name or `None` for the default); `None` for "no component of that type".
    fn components(&self) -> Vec<(String, Option<Option<String>>)> {
        let one = |name: &Option<String>, default: bool| {
            if default {
                Some(None)
            } else {
                name.clone().map(Some)
            }
        };
        vec![
            ("user".to_string(), one(&self.user, self.user_default)),
            (
                "client-id".to_string(),
                one(&self.client_id, self.client_id_default),
            ),
            ("ip".to_string(), one(&self.ip, self.ip_default)),
        ]
    }

    fn is_ip(&self) -> bool {
        self.ip.is_some() || self.ip_default
    }

    fn entity(&self) -> anyhow::Result<Vec<(String, Option<String>)>> {
        let entity: Vec<_> = self
            .components()
            .into_iter()
            .filter_map(|(kind, name)| name.map(|n| (kind, n)))
            .collect();
        if entity.is_empty() {
            bail!("name an entity: --user, --user-default, --client-id, --client-id-default, --ip or --ip-default");
        }
        Ok(entity)
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum QuotaCommand {
    /// Set quotas of a user, a client id, or a user and client id together.
    Set {
        #[command(flatten)]
        entity: EntityArgs,
        /// Bytes per second of produce requests.
        #[arg(long)]
        producer_byte_rate: Option<u64>,
        /// Bytes per second of fetch responses.
        #[arg(long)]
        consumer_byte_rate: Option<u64>,
        /// Percent of one request-handling thread's time (100: a whole thread).
        #[arg(long)]
        request_percentage: Option<f64>,
        /// New connections per second from an address (with --ip or --ip-default).
        #[arg(long)]
        connection_creation_rate: Option<u64>,
        /// Only check the values with the broker.
        #[arg(long)]
        validate_only: bool,
    },
    /// Remove quotas of an entity: the keys named, or all of them.
    Remove {
        #[command(flatten)]
        entity: EntityArgs,
        /// Remove `producer_byte_rate`.
        #[arg(long)]
        producer_byte_rate: bool,
        /// Remove `consumer_byte_rate`.
        #[arg(long)]
        consumer_byte_rate: bool,
        /// Remove `request_percentage`.
        #[arg(long)]
        request_percentage: bool,
        /// Remove `connection_creation_rate`.
        #[arg(long)]
        connection_creation_rate: bool,
    },
    /// List quotas: all of them, or those of the entities named (with `--strict`, only
    /// entities with exactly the components named).
    Describe {
        #[command(flatten)]
        entity: EntityArgs,
        /// Only entities with exactly the components named (no user+client-id pairs when
        /// only a client id is named).
        #[arg(long)]
        strict: bool,
    },
}

const KEYS: [&str; 4] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "connection_creation_rate",
];
/// The one key an `ip` entity takes (as in Kafka).
const IP_KEY: &str = "connection_creation_rate";

pub fn quota(connection: &Connection, command: &QuotaCommand) -> anyhow::Result<()> {
    super::runtime()?.block_on(async {
        let mut admin = connection.admin().await?;
        match command {
            QuotaCommand::Set {
                entity,
                producer_byte_rate,
                consumer_byte_rate,
                request_percentage,
                connection_creation_rate,
                validate_only,
            } => {
                let entity = entity.entity()?;
                let ops = set_ops([
                    producer_byte_rate.map(|v| v as f64),
                    consumer_byte_rate.map(|v| v as f64),
                    *request_percentage,
                    connection_creation_rate.map(|v| v as f64),
                ])?;
                set(connection, &mut admin, &entity, &ops, *validate_only).await?;
            }
            QuotaCommand::Remove {
                entity,
                producer_byte_rate,
                consumer_byte_rate,
                request_percentage,
                connection_creation_rate,
            } => {
                let is_ip = entity.is_ip();
                let entity = entity.entity()?;
                let ops = remove_ops(
                    is_ip,
                    [
                        *producer_byte_rate,
                        *consumer_byte_rate,
                        *request_percentage,
                        *connection_creation_rate,
                    ],
                );
                remove(connection, &mut admin, &entity, &ops).await?;
            }
            QuotaCommand::Describe { entity, strict } => {
                describe(connection, &mut admin, &describe_filter(entity), *strict).await?;
            }
        }
        Ok(())
    })
}

/// The keys to set, with `values` in the order of [`KEYS`]; an error when none is given.
fn set_ops(values: [Option<f64>; 4]) -> anyhow::Result<Vec<(String, Option<f64>)>> {
    let ops: Vec<(String, Option<f64>)> = KEYS
        .iter()
        .zip(values)
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), Some(v))))
        .collect();
    if ops.is_empty() {
        bail!("nothing to set: --producer-byte-rate, --consumer-byte-rate, --request-percentage or --connection-creation-rate");
    }
    Ok(ops)
}

/// The keys to remove, `chosen` in the order of [`KEYS`]; none chosen is all the keys the
/// entity's type takes.
fn remove_ops(is_ip: bool, chosen: [bool; 4]) -> Vec<(String, Option<f64>)> {
    let all = !chosen.iter().any(|c| *c);
    // "All" of an entity is the keys its type takes.
    KEYS.iter()
        .zip(chosen)
        .filter(|(k, c)| *c || (all && ((**k == IP_KEY) == is_ip)))
        .map(|(k, _)| (k.to_string(), None))
        .collect()
}

/// The DescribeClientQuotas filter of the entity named (empty: all entities).
fn describe_filter(entity: &EntityArgs) -> Vec<(String, QuotaMatch)> {
    entity
        .components()
        .into_iter()
        .filter_map(|(kind, name)| {
            name.map(|n| (kind, n.map_or(QuotaMatch::Default, QuotaMatch::Exact)))
        })
        .collect()
}

async fn set(
    connection: &Connection,
    admin: &mut Admin,
    entity: &[(String, Option<String>)],
    ops: &[(String, Option<f64>)],
    validate_only: bool,
) -> anyhow::Result<()> {
    admin
        .alter_client_quotas(entity, ops, validate_only)
        .await?;
    let verb = if validate_only { "Valid" } else { "Set" };
    print(
        connection,
        json!({ "entity": entity_json(entity), "set": ops_json(ops), "validate_only": validate_only }),
        || format!("{verb}: {} for {}", ops_text(ops), entity_text(entity)),
    )?;
    Ok(())
}

async fn remove(
    connection: &Connection,
    admin: &mut Admin,
    entity: &[(String, Option<String>)],
    ops: &[(String, Option<f64>)],
) -> anyhow::Result<()> {
    admin.alter_client_quotas(entity, ops, false).await?;
    let keys: Vec<&str> = ops.iter().map(|(k, _)| k.as_str()).collect();
    print(
        connection,
        json!({ "entity": entity_json(entity), "removed": keys }),
        || format!("Removed {} for {}", keys.join(", "), entity_text(entity)),
    )?;
    Ok(())
}

async fn describe(
    connection: &Connection,
    admin: &mut Admin,
    filter: &[(String, QuotaMatch)],
    strict: bool,
) -> anyhow::Result<()> {
    let quotas = admin.describe_client_quotas(filter, strict).await?;
    let as_json: Vec<_> = quotas
        .iter()
        .map(|q| json!({ "entity": entity_json(&q.entity), "values": q.values.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>() }))
        .collect();
    print(connection, json!(as_json), || quotas_text(&quotas))?;
    Ok(())
}

/// One row per entity: its user, client id and address, and its quotas.
fn quotas_text(quotas: &[ClientQuotas]) -> String {
    let rows = quotas.iter().map(|q| {
        let of = |kind: &str| {
            q.entity
                .iter()
                .find(|(k, _)| k == kind)
                .map_or(String::new(), |(_, n)| {
                    n.clone().unwrap_or_else(|| "<default>".to_string())
                })
        };
        let values: Vec<(String, Option<f64>)> = q
            .values
            .iter()
            .map(|(k, v)| (k.clone(), Some(*v)))
            .collect();
        vec![of("user"), of("client-id"), of("ip"), ops_text(&values)]
    });
    table(&["USER", "CLIENT-ID", "IP", "QUOTAS"], &[], rows)
}

fn entity_json(entity: &[(String, Option<String>)]) -> serde_json::Value {
    entity
        .iter()
        .map(|(k, n)| (k.clone(), json!(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn ops_json(ops: &[(String, Option<f64>)]) -> serde_json::Value {
    ops.iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn ops_text(ops: &[(String, Option<f64>)]) -> String {
    ops.iter()
        .map(|(k, v)| format!("{k}={}", v.map_or("-".to_string(), |v| v.to_string())))
        .collect::<Vec<_>>()
        .join(", ")
}

fn entity_text(entity: &[(String, Option<String>)]) -> String {
    entity
        .iter()
        .map(|(k, n)| format!("{k} {}", n.as_deref().unwrap_or("<default>")))
        .collect::<Vec<_>>()
        .join(", ")
}
