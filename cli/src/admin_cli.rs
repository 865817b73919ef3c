//! `lograil topic …` and `lograil group …`: admin commands that talk to a running broker over
//! the Kafka protocol (so they work against any Kafka-compatible broker), like Kafka's
//! `kafka-topics` and `kafka-consumer-groups`.

pub(crate) mod datetime;
mod dlt;
mod queue;
mod quota;

use std::collections::BTreeMap;
use std::io::Write as _;

use anyhow::{bail, Context};
use comfy_table::{presets, CellAlignment, Table};
use consumer::Admin;
use serde_json::json;

use self::datetime::parse_datetime;
pub use self::dlt::{dlt, DltCommand};
pub use self::queue::{queue, QueueCommand};
pub use self::quota::{quota, QuotaCommand};

/// Prefix of the read-only topic configs in which lograil reports a partition's damaged data.
const DAMAGE_PREFIX: &str = "lograil.damage.partition.";
/// Prefix of the read-only topic configs in which lograil reports where its log cleaner stands
/// on each partition of a compacted topic.
const CLEANER_PREFIX: &str = "lograil.cleaner.partition.";

#[derive(Debug, clap::Args)]
pub struct Connection {
    /// The brokers to talk to, `host:port[,host:port…]` [default: the command config's
    /// bootstrap.servers, else 127.0.0.1:9092].
    #[arg(long, global = true)]
    bootstrap_server: Option<String>,
    /// A Java properties file of client properties (security.protocol, sasl.mechanism,
    /// sasl.jaas.config, ssl.truststore.location, …), as Kafka's tools take it.
    #[arg(long, global = true, value_name = "FILE")]
    command_config: Option<std::path::PathBuf>,
    /// Print machine-readable JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

impl Connection {
    /// The client properties: the command config's, with `--bootstrap-server`.
    fn client_config(&self) -> anyhow::Result<consumer::ClientConfig> {
        crate::client_props::client_config(
            self.bootstrap_server.as_deref(),
            self.command_config.as_deref(),
        )
    }

    /// An admin client of these properties.
    async fn admin(&self) -> anyhow::Result<Admin> {
        Ok(Admin::from_config(&self.client_config()?).await?)
    }
}

#[derive(Debug, clap::Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        topic: String,
        /// Number of partitions (-1: the broker's default).
        #[arg(long, default_value_t = -1)]
        partitions: i32,
        /// A topic config under its Kafka name, e.g. `--config retention.ms=86400000`; repeatable.
        #[arg(long = "config", value_name = "NAME=VALUE")]
        configs: Vec<String>,
    },
    /// List topics.
    List,
    /// Show a topic's partitions, offsets and configs.
    Describe { topic: String },
    /// Delete a topic and its data.
    Delete { topic: String },
}

#[derive(Debug, clap::Subcommand)]
pub enum GroupCommand {
    /// List consumer groups.
    List,
    /// Show a group's members, committed offsets, log end offsets and lag (records and
    /// seconds: now minus the timestamp of the oldest unconsumed record).
    Describe { group: String },
    /// Move a group's committed offsets (only while the group has no members). Without
    /// `--execute` it only prints the plan, as Kafka's tool does.
    ResetOffsets {
        group: String,
        #[arg(long)]
        topic: String,
        #[command(flatten)]
        to: ResetTarget,
        /// Apply the new offsets.
        #[arg(long)]
        execute: bool,
    },
}

#[derive(Debug, clap::Args)]
#[group(required = true, multiple = false)]
pub struct ResetTarget {
    /// The log start of each partition.
    #[arg(long)]
    to_earliest: bool,
    /// The log end of each partition.
    #[arg(long)]
    to_latest: bool,
    /// The first record at or after this time: `YYYY-MM-DDTHH:mm:SS[.sss]` with an optional
    /// offset (`Z`, `+01:00`, `-0530`), or milliseconds since the epoch. Without an offset the
    /// time is UTC, as in Kafka's kafka-consumer-groups (not the local time zone).
    #[arg(long)]
    to_datetime: Option<String>,
    /// This offset, clamped to each partition's log.
    #[arg(long)]
    to_offset: Option<i64>,
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

pub fn topic(connection: &Connection, command: &TopicCommand) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let mut admin = connection.admin().await?;
        match command {
            TopicCommand::Create { topic, partitions, configs } => {
                let configs = configs
                    .iter()
                    .map(|c| {
                        c.split_once('=')
                            .map(|(k, v)| (k.to_string(), v.to_string()))
                            .with_context(|| format!("--config {c}: expected NAME=VALUE"))
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                admin.create_topic(topic, *partitions, &configs).await?;
                print(connection, json!({ "created": topic }), || format!("Created topic {topic}."))?;
            }
            TopicCommand::List => {
                let topics = admin.list_topics().await?;
                let names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
                print(connection, json!(names), || names.join("\n"))?;
            }
            TopicCommand::Describe { topic } => {
                let described = admin.describe_topic(topic).await?;
                let starts = admin.list_offsets(topic, described.partitions, -2).await?;
                let ends = admin.list_offsets(topic, described.partitions, -1).await?;
                // lograil reports damaged data and the log cleaner's state as read-only
                // `lograil.damage.partition.<N>` and `lograil.cleaner.partition.<N>` entries.
                let (notes, configs): (BTreeMap<&str, &str>, BTreeMap<&str, &str>) = described
                    .configs
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .partition(|(k, _)| k.starts_with(DAMAGE_PREFIX) || k.starts_with(CLEANER_PREFIX));
                let note = |prefix: &str, p: i32| notes.get(format!("{prefix}{p}").as_str()).copied();
                let partitions: Vec<_> = (0..described.partitions)
                    .zip(starts.iter().zip(&ends))
                    .map(|(p, (s, e))| json!({ "partition": p, "log_start_offset": s, "log_end_offset": e, "damage": note(DAMAGE_PREFIX, p), "cleaner": note(CLEANER_PREFIX, p) }))
                    .collect();
                let cells_of = |p: i32| {
                    let damage = note(DAMAGE_PREFIX, p).map(|d| format!("DAMAGED: {d}"));
                    let cleaner = note(CLEANER_PREFIX, p).map(|c| format!("Cleaner: {c}"));
                    damage.into_iter().chain(cleaner).collect()
                };
                print(
                    connection,
                    json!({ "topic": topic, "partitions": partitions, "internal": described.internal, "configs": configs }),
                    || topic_text(topic, described.partitions, &configs, &starts, &ends, cells_of),
                )?;
            }
            TopicCommand::Delete { topic } => {
                admin.delete_topic(topic).await?;
                print(connection, json!({ "deleted": topic }), || format!("Deleted topic {topic}."))?;
            }
        }
        Ok(())
    })
}

pub fn group(connection: &Connection, command: &GroupCommand) -> anyhow::Result<()> {
    runtime()?.block_on(async {
        let mut admin = connection.admin().await?;
        match command {
            GroupCommand::List => {
                let groups = admin.list_groups().await?;
                let rows: Vec<_> = groups
                    .iter()
                    .map(|(id, state, kind, group_type)| {
                        json!({ "group": id, "state": state, "protocol_type": kind, "type": group_type })
                    })
                    .collect();
                print(connection, json!(rows), || {
                    table(
                        &["GROUP", "TYPE", "STATE"],
                        &[],
                        groups.iter().map(|(id, state, _, group_type)| {
                            vec![id.clone(), group_type.clone(), state.clone()]
                        }),
                    )
                })?;
            }
            GroupCommand::Describe { group } => describe_group(connection, &mut admin, group).await?,
            GroupCommand::ResetOffsets { group, topic, to, execute } => {
                let described = admin.describe_group(group).await?;
                if !described.members.is_empty() {
                    bail!(
                        "group {group} has {} active members (state {}): stop its consumers before resetting offsets",
                        described.members.len(),
                        described.state
                    );
                }
                let partitions = admin.describe_topic(topic).await?.partitions;
                let starts = admin.list_offsets(topic, partitions, -2).await?;
                let ends = admin.list_offsets(topic, partitions, -1).await?;
                let targets: Vec<i64> = if to.to_earliest {
                    starts.clone()
                } else if to.to_latest {
                    ends.clone()
                } else if let Some(when) = &to.to_datetime {
                    let ms = parse_datetime(when)?;
                    let found = admin.list_offsets(topic, partitions, ms).await?;
                    // No record that late: the log end.
                    found.iter().zip(&ends).map(|(f, e)| if *f < 0 { *e } else { *f }).collect()
                } else if let Some(offset) = to.to_offset {
                    starts.iter().zip(&ends).map(|(s, e)| offset.clamp(*s, *e)).collect()
                } else {
                    bail!("one of --to-earliest, --to-latest, --to-datetime, --to-offset is needed");
                };
                let plan: BTreeMap<(String, i32), i64> =
                    (0..).zip(&targets).map(|(p, o)| ((topic.clone(), p), *o)).collect();
                if *execute {
                    admin.commit_offsets(group, &plan).await?;
                }
                let rows: Vec<_> = plan
                    .iter()
                    .map(|((t, p), o)| json!({ "topic": t, "partition": p, "new_offset": o }))
                    .collect();
                print(connection, json!({ "group": group, "executed": execute, "offsets": rows }), || {
                    reset_text(group, &plan, *execute)
                })?;
            }
        }
        Ok(())
    })
}

async fn describe_group(
    connection: &Connection,
    admin: &mut Admin,
    group: &str,
) -> anyhow::Result<()> {
    let described = admin.describe_group(group).await?;
    let assigned: Vec<String> = described
        .members
        .iter()
        .flat_map(|m| m.assignment.iter().map(|(topic, _)| topic.clone()))
        .collect();
    let lag = admin.lag(group, &assigned, log_core::now_ms()).await?;
    let owner = |topic: &str, partition: i32| {
        described.members.iter().find(|m| {
            m.assignment
                .iter()
                .any(|(t, ps)| t == topic && ps.contains(&partition))
        })
    };
    let rows: Vec<_> = lag
        .iter()
        .map(|l| {
            let member = owner(&l.topic, l.partition);
            json!({
                "topic": l.topic,
                "partition": l.partition,
                "current_offset": l.committed,
                "log_end_offset": l.log_end,
                "lag": l.lag_records,
                "lag_seconds": l.lag_seconds,
                "consumer_id": member.map(|m| m.member_id.clone()),
                "host": member.map(|m| m.host.clone()),
                "client_id": member.map(|m| m.client_id.clone()),
            })
        })
        .collect();
    let members: Vec<_> = described
        .members
        .iter()
        .map(|m| {
            json!({
                "member_id": m.member_id,
                "group_instance_id": m.instance_id,
                "client_id": m.client_id,
                "host": m.host,
                "assignment": m.assignment.iter().map(|(t, ps)| json!({ "topic": t, "partitions": ps })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let dash = |v: Option<String>| v.unwrap_or_else(|| "-".to_string());
    print(
        connection,
        json!({ "group": group, "type": described.group_type, "state": described.state, "protocol": described.protocol, "members": members, "partitions": rows }),
        || {
            let rows = lag.iter().map(|l| {
                vec![
                    l.topic.clone(),
                    l.partition.to_string(),
                    dash(l.committed.map(|c| c.to_string())),
                    l.log_end.to_string(),
                    dash(l.lag_records.map(|c| c.to_string())),
                    dash(l.lag_seconds.map(|s| format!("{s:.1}"))),
                    dash(owner(&l.topic, l.partition).map(|m| m.member_id.clone())),
                ]
            });
            format!(
                "{} group {group} is {} with {} members (assignor {}).\n{}",
                described.group_type,
                described.state,
                described.members.len(),
                dash(Some(described.protocol.clone()).filter(|p| !p.is_empty())),
                table(&DESCRIBE_HEADER, &[1, 2, 3, 4, 5], rows)
            )
        },
    )?;
    Ok(())
}

/// The columns of `group describe`.
const DESCRIBE_HEADER: [&str; 7] = [
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "LAG-SECONDS",
    "CONSUMER-ID",
];

/// A borderless table as Kafka's tools print one: a header row, each column as wide as its
/// widest cell (by display width) and two spaces from the next, the columns numbered in `right`
/// right-aligned; no trailing spaces, no wrapping, no colors.
fn table(header: &[&str], right: &[usize], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut table = Table::new();
    table
        .load_style(presets::NOTHING)
        .set_header(header.to_vec());
    for row in rows {
        table.add_row(row);
    }
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if right.contains(&i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table.trim_fmt()
}

/// `topic describe`: Kafka's `Name: value` cells, the partitions' cells in aligned columns.
/// `cells_of(p)`: lograil's own cells for partition `p` (damage, the cleaner's state).
fn topic_text(
    topic: &str,
    partitions: i32,
    configs: &BTreeMap<&str, &str>,
    starts: &[i64],
    ends: &[i64],
    cells_of: impl Fn(i32) -> Vec<String>,
) -> String {
    let mut out = format!("Topic: {topic}\tPartitionCount: {partitions}\n");
    out += &format!(
        "Configs: {}",
        configs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let mut cells = Table::new();
    cells.load_style(presets::NOTHING);
    for (p, (s, e)) in (0..).zip(starts.iter().zip(ends)) {
        let mut row = vec![
            format!("Partition: {p}"),
            format!("LogStartOffset: {s}"),
            format!("LogEndOffset: {e}"),
        ];
        row.extend(cells_of(p));
        cells.add_row(row);
    }
    for column in cells.column_iter_mut() {
        column.set_padding((0, 2));
    }
    for line in cells.trim_fmt().lines().filter(|l| !l.is_empty()) {
        out += &format!("\n\t{line}");
    }
    out
}

/// `group reset-offsets`: the plan, and whether it was applied.
fn reset_text(group: &str, plan: &BTreeMap<(String, i32), i64>, executed: bool) -> String {
    let rows = plan
        .iter()
        .map(|((t, p), o)| vec![group.to_string(), t.clone(), p.to_string(), o.to_string()]);
    let mut out = table(
        &["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
        &[2, 3],
        rows,
    );
    if !executed {
        out += "\n(dry run: add --execute to apply)";
    }
    out
}

/// Writes a command's result to stdout: JSON with `--json`, else `human`'s text. A closed pipe
/// (`lograil dlt show | head`) is an `io::Error` for `main` to end on quietly, not a panic.
fn print(
    connection: &Connection,
    value: serde_json::Value,
    human: impl FnOnce() -> String,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    if connection.json {
        writeln!(out, "{value}")?;
    } else {
        writeln!(out, "{}", human())?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::{reset_text, table, topic_text, DESCRIBE_HEADER};

    #[test]
    fn a_long_topic_name_keeps_the_columns_aligned() {
        let row = |topic: &str, partition: i32, committed: &str, lag_s: &str, member: &str| {
            [
                topic,
                &partition.to_string(),
                committed,
                "1234567",
                "17",
                lag_s,
                member,
            ]
            .map(String::from)
            .to_vec()
        };
        let long = "orders.eu-west-1.payments.settlements.v2";
        let text = table(
            &DESCRIBE_HEADER,
            &[1, 2, 3, 4, 5],
            vec![
                row("t", 0, "1234550", "150.0", "rdkafka-1"),
                row(long, 11, "-", "-", "-"),
                row("日本語トピック", 2, "3", "0.5", "m"),
            ],
        );
        let expected = [
            "TOPIC                                     PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG  LAG-SECONDS  CONSUMER-ID",
            "t                                                 0         1234550         1234567   17        150.0  rdkafka-1",
            "orders.eu-west-1.payments.settlements.v2         11               -         1234567   17            -  -",
            "日本語トピック                                    2               3         1234567   17          0.5  m",
        ];
        assert_eq!(text, expected.join("\n"), "\n{text}");
    }

    #[test]
    fn a_long_group_name_keeps_the_columns_aligned() {
        let plan: BTreeMap<(String, i32), i64> = [
            (("lagged".to_string(), 0), 5),
            (("lagged".to_string(), 1), 1_000_000_000),
        ]
        .into();
        let group = "a-consumer-group-with-a-name-longer-than-twenty";
        let expected = [
            "GROUP                                            TOPIC   PARTITION  NEW-OFFSET",
            "a-consumer-group-with-a-name-longer-than-twenty  lagged          0           5",
            "a-consumer-group-with-a-name-longer-than-twenty  lagged          1  1000000000",
            "(dry run: add --execute to apply)",
        ];
        assert_eq!(reset_text(group, &plan, false), expected.join("\n"));
        let listed = table(
            &["GROUP", "STATE"],
            &[],
            [
                vec![group.to_string(), "Empty".into()],
                vec!["g".into(), "Stable".into()],
            ],
        );
        assert_eq!(
            listed,
            [
                "GROUP                                            STATE",
                "a-consumer-group-with-a-name-longer-than-twenty  Empty",
                "g                                                Stable",
            ]
            .join("\n")
        );
    }

    #[test]
    fn topic_partitions_line_up_whatever_their_offsets() {
        let configs = BTreeMap::from([("cleanup.policy", "delete"), ("retention.ms", "-1")]);
        let intact = |_| Vec::new();
        let text = topic_text(
            "t",
            11,
            &configs,
            &[0, 123_456_789],
            &[5, 123_456_790],
            intact,
        );
        let expected = [
            "Topic: t\tPartitionCount: 11",
            "Configs: cleanup.policy=delete,retention.ms=-1",
            "\tPartition: 0  LogStartOffset: 0          LogEndOffset: 5",
            "\tPartition: 1  LogStartOffset: 123456789  LogEndOffset: 123456790",
        ];
        assert_eq!(text, expected.join("\n"), "\n{text}");
    }

    #[test]
    fn damaged_partitions_say_so() {
        let damaged = |p| {
            (p == 1)
                .then(|| "DAMAGED: offsets 10..15 in 00000000000000000000.log".to_string())
                .into_iter()
                .collect()
        };
        let text = topic_text("t", 2, &BTreeMap::new(), &[0, 0], &[5, 20], damaged);
        assert!(
            text.ends_with("LogEndOffset: 20  DAMAGED: offsets 10..15 in 00000000000000000000.log"),
            "\n{text}"
        );
        assert!(
            !text.lines().nth(2).unwrap_or_default().contains("DAMAGED"),
            "\n{text}"
        );
    }
}
