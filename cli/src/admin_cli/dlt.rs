//! `lograil dlt list | show | redrive | parked`: dead-letter topics of a retry chain (the
//! `retry-topic` crate's, or Spring Kafka's) from the command line, over the Kafka protocol.

use anyhow::{bail, Context};
use consumer::ClientConfig;
use retry_topic::dlt::{self, DeadLetter, Redrive};
use serde_json::json;

use super::{print, table, Connection};

#[derive(Debug, clap::Subcommand)]
pub enum DltCommand {
    /// One line per record: partition, offset, time, the original record, attempts, error
    /// class and message.
    List {
        /// The dead-letter topic, e.g. `orders-dlt`.
        #[arg(long)]
        from: String,
        /// Only records of this error class (whole, or its last segment).
        #[arg(long)]
        filter: Option<String>,
    },
    /// Every field of each record: key, value, origin, error, attempt history, headers.
    Show {
        /// The dead-letter topic, e.g. `orders-dlt`.
        #[arg(long)]
        from: String,
        /// Only records of this error class (whole, or its last segment).
        #[arg(long)]
        filter: Option<String>,
        /// Only this partition.
        #[arg(long)]
        partition: Option<i32>,
        /// Only the record at this offset (with --partition).
        #[arg(long, requires = "partition")]
        offset: Option<i64>,
    },
    /// Copy records back to their original topic (or --to), at most --rate per second. A
    /// record redriven before is never produced again (ledger: `<from>-redrive-log`).
    Redrive {
        /// The dead-letter topic, e.g. `orders-dlt`.
        #[arg(long)]
        from: String,
        /// The target topic (default: each record's original topic).
        #[arg(long)]
        to: Option<String>,
        /// Records per second at most: `N` or `N/s`.
        #[arg(long)]
        rate: Option<String>,
        /// Only records of this error class (whole, or its last segment).
        #[arg(long)]
        filter: Option<String>,
    },
    /// Keys with records in the retry topics not yet consumed by a group (with per-key
    /// ordering: the keys parked), since when and why. A retry topic's record counts as
    /// consumed once the group, or Spring Kafka's group for that retry topic (the group with
    /// the topic's suffix appended, `billing-retry`), has committed past it.
    Parked {
        /// The main topic.
        #[arg(long)]
        topic: String,
        /// The main topic's consumer group.
        #[arg(long)]
        group: String,
        /// Retry topics are `<topic><suffix>`, `<topic><suffix>-<n>` and
        /// `<topic><suffix>-<n>-<m>` (a delay or an index, Spring Kafka's names).
        #[arg(long, default_value = vocabulary::RETRY_SUFFIX)]
        retry_suffix: String,
    },
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?)
}

/// `N` or `N/s`, positive.
fn parse_rate(s: &str) -> anyhow::Result<f64> {
    let n = s.trim().trim_end_matches("/s");
    let rate: f64 = n
        .parse()
        .with_context(|| format!("--rate {s}: expected N or N/s"))?;
    if !(rate.is_finite() && rate > 0.0) {
        bail!("--rate {s}: must be positive");
    }
    Ok(rate)
}

fn time_text(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| ms.to_string())
}

pub fn dlt(connection: &Connection, command: &DltCommand) -> anyhow::Result<()> {
    let client = connection.client_config()?;
    runtime()?.block_on(async {
        match command {
            DltCommand::List { from, filter } => {
                list(connection, &client, from, filter.as_deref()).await
            }
            DltCommand::Show {
                from,
                filter,
                partition,
                offset,
            } => {
                show(
                    connection,
                    &client,
                    from,
                    filter.as_deref(),
                    *partition,
                    *offset,
                )
                .await
            }
            DltCommand::Redrive {
                from,
                to,
                rate,
                filter,
            } => {
                let opts = Redrive {
                    from: from.clone(),
                    to: to.clone(),
                    rate: rate.as_deref().map(parse_rate).transpose()?,
                    filter: filter.clone(),
                };
                redrive(connection, &client, &opts).await
            }
            DltCommand::Parked {
                topic,
                group,
                retry_suffix,
            } => parked(connection, &client, topic, group, retry_suffix).await,
        }
    })
}

/// `dlt list`: one line per dead letter.
async fn list(
    connection: &Connection,
    client: &ClientConfig,
    from: &str,
    filter: Option<&str>,
) -> anyhow::Result<()> {
    let letters = read(client, from, filter, None, None).await?;
    let value = serde_json::to_value(&letters)?;
    print(connection, value, || list_text(&letters))?;
    Ok(())
}

/// `dlt show`: every field of each dead letter; an error when an asked-for offset has none.
async fn show(
    connection: &Connection,
    client: &ClientConfig,
    from: &str,
    filter: Option<&str>,
    partition: Option<i32>,
    offset: Option<i64>,
) -> anyhow::Result<()> {
    let letters = read(client, from, filter, partition, offset).await?;
    if letters.is_empty() && offset.is_some() {
        bail!("{from}: no record at partition {partition:?} offset {offset:?}");
    }
    let value = serde_json::to_value(&letters)?;
    print(connection, value, || show_text(&letters))?;
    Ok(())
}

/// `dlt redrive`: copies the records back, prints the report, and fails when any record
/// was not redriven.
async fn redrive(
    connection: &Connection,
    client: &ClientConfig,
    opts: &Redrive,
) -> anyhow::Result<()> {
    let from = &opts.from;
    let report = dlt::redrive(client, opts).await?;
    let value = serde_json::to_value(&report)?;
    print(connection, value, || redrive_text(from, &report))?;
    if let Some((p, o, why)) = report.failed.first() {
        bail!(
            "{} records not redriven (they stay in {from}); the first, {from}-{p}@{o}: {why}",
            report.failed.len()
        );
    }
    Ok(())
}

fn redrive_text(from: &str, report: &dlt::RedriveReport) -> String {
    let mut out = format!(
        "redriven {} in {:.1} s; already redriven {}; filtered out {}; failed {}",
        report.redriven.len(),
        report.seconds,
        report.already,
        report.filtered,
        report.failed.len()
    );
    for (p, o, why) in &report.failed {
        out.push_str(&format!("\n  {from}-{p}@{o}: {why}"));
    }
    out
}

/// `dlt parked`: the keys with records still waiting in the retry topics.
async fn parked(
    connection: &Connection,
    client: &ClientConfig,
    topic: &str,
    group: &str,
    retry_suffix: &str,
) -> anyhow::Result<()> {
    let keys = retry_topic::parked_keys(client, topic, group, retry_suffix).await?;
    let value = json!(keys);
    print(connection, value, || {
        table(
            &[
                "PARTITION",
                "KEY",
                "SINCE",
                "RECORDS",
                "HEAD-OFFSET",
                "REASON",
            ],
            &[0, 3, 4],
            keys.iter().map(|k| {
                vec![
                    k.partition.to_string(),
                    k.key.clone(),
                    time_text(k.since_ms),
                    k.records.to_string(),
                    k.head_offset.to_string(),
                    k.reason.clone(),
                ]
            }),
        )
    })?;
    Ok(())
}

async fn read(
    client: &ClientConfig,
    from: &str,
    filter: Option<&str>,
    partition: Option<i32>,
    offset: Option<i64>,
) -> anyhow::Result<Vec<DeadLetter>> {
    let records = dlt::read_topic(client, from, None).await?;
    Ok(records
        .iter()
        .filter(|r| partition.is_none_or(|p| r.partition == p))
        .filter(|r| offset.is_none_or(|o| r.offset == o))
        .map(DeadLetter::read)
        .filter(|d| filter.is_none_or(|f| d.matches(f)))
        .collect())
}

fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

fn list_text(letters: &[DeadLetter]) -> String {
    table(
        &[
            "PARTITION",
            "OFFSET",
            "TIME",
            "ORIGINAL",
            "ATTEMPTS",
            "CLASS",
            "MESSAGE",
        ],
        &[0, 1, 4],
        letters.iter().map(|d| {
            vec![
                d.partition.to_string(),
                d.offset.to_string(),
                time_text(d.timestamp),
                d.origin
                    .as_ref()
                    .map(|o| format!("{}-{}@{}", o.topic, o.partition, o.offset))
                    .unwrap_or_else(|| "-".to_string()),
                d.attempts.map_or("-".to_string(), |a| a.to_string()),
                d.class.clone().unwrap_or_else(|| "-".to_string()),
                clip(d.message.as_deref().unwrap_or("-"), 60),
            ]
        }),
    )
}

fn show_text(letters: &[DeadLetter]) -> String {
    let mut out = String::new();
    for d in letters {
        out.push_str(&format!(
            "{}-{}@{}  {}\n",
            d.topic,
            d.partition,
            d.offset,
            time_text(d.timestamp)
        ));
        out.push_str(&format!(
            "  key:      {}\n",
            d.key.as_deref().unwrap_or("(null)")
        ));
        out.push_str(&format!(
            "  value:    {}\n",
            d.value.as_deref().unwrap_or("(null)")
        ));
        match &d.origin {
            Some(o) => out.push_str(&format!(
                "  original: {}-{}@{} at {} ({}), group {}\n",
                o.topic,
                o.partition,
                o.offset,
                time_text(o.timestamp),
                o.timestamp_type,
                o.group.as_deref().unwrap_or("-")
            )),
            None => out.push_str("  original: unknown\n"),
        }
        out.push_str(&format!(
            "  error:    {}: {}\n",
            d.class.as_deref().unwrap_or("-"),
            d.message.as_deref().unwrap_or("-")
        ));
        if let Some(w) = &d.wrapper {
            out.push_str(&format!("  wrapped:  in {w}\n"));
        }
        if let Some(a) = d.attempts {
            out.push_str(&format!("  attempts: {a}\n"));
        }
        for h in &d.history {
            out.push_str(&format!(
                "    attempt {} at {} on {}-{}@{} by {}: {}: {}\n",
                h.attempt,
                time_text(h.at),
                h.topic,
                h.partition,
                h.offset,
                h.consumer,
                h.class,
                h.message
            ));
        }
        for p in &d.problems {
            out.push_str(&format!("  problem:  {p}\n"));
        }
        out.push_str("  headers:\n");
        for (n, v) in &d.headers {
            // A multi-line value (a Java stack trace) is indented under its name.
            let v = v.trim_end().replace("\r\n", "\n").replace('\n', "\n      ");
            out.push_str(&format!("    {n}: {v}\n"));
        }
    }
    out.trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::parse_rate;

    #[test]
    fn rates_parse_with_or_without_the_unit() {
        assert_eq!(parse_rate("20/s").unwrap(), 20.0);
        assert_eq!(parse_rate("2.5").unwrap(), 2.5);
        assert!(parse_rate("0").is_err());
        assert!(parse_rate("fast").is_err());
    }
}
