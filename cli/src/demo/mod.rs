//! `lograil demo`: the webhook story in one command. Three tenants' keyed events (one floods),
//! a retry chain of webhook workers with one poison record and a downstream outage, task
//! workers on a share group with fair turns beside one in offset order; a line a second while
//! it runs, then a summary (`--json`: one object), an HTML report with SVG timelines, and the
//! commands to inspect and redrive what happened. On an embedded broker in a temporary data
//! dir, or on any Kafka-compatible broker with `--bootstrap-server`.

mod chain;
mod plan;
mod queue;
mod report;
mod stats;
mod summary;
mod table;
mod tenants;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use consumer::{Admin, ClientConfig, Producer};
use tokio::sync::{oneshot, watch};

use self::plan::{Plan, TENANTS};
use self::queue::GROUPS;
use self::stats::{Row, Shared};
use self::table::Table;

/// How long after the traffic ends the story may take to finish what is left (the flood's
/// backlog, the retries) before it is called stuck.
const DRAIN_LIMIT: Duration = Duration::from_secs(60);
/// Time before the first event, for the workers to join their groups.
const LEAD_IN: Duration = Duration::from_secs(2);

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seconds of traffic; each phase (flood, outage) scales with it. At least 5.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..=3600))]
    duration: u64,
    /// Draws the events, keys, latencies and the poison record: the same seed and duration
    /// play the same story.
    #[arg(long, default_value_t = 28)]
    seed: u64,
    /// Print the summary as one JSON object on stdout (the live table goes to stderr).
    #[arg(long)]
    json: bool,
    /// Where to write the HTML report.
    #[arg(long, value_name = "FILE", default_value = "lograil-demo-report.html")]
    report: PathBuf,
    /// Play it on this broker (any Kafka-compatible one), `host:port[,…]`, instead of an
    /// embedded one; topics and groups get a suffix of their own per run.
    #[arg(long)]
    bootstrap_server: Option<String>,
    /// A Java properties file of client properties (security.protocol, sasl.*, ssl.*) for
    /// `--bootstrap-server`.
    #[arg(long, value_name = "FILE", requires = "bootstrap_server")]
    command_config: Option<PathBuf>,
    /// Keep the embedded broker running after the story, until Ctrl-C, so the printed
    /// commands can look at what happened.
    #[arg(long, conflicts_with = "bootstrap_server")]
    keep: bool,
}

/// The topics and groups of one run.
#[derive(Debug, Clone)]
struct Names {
    webhooks: String,
    tasks: String,
    chain_group: String,
    queue_groups: Vec<String>,
}

impl Names {
    /// Plain names on the embedded broker; on another, with `-<suffix>`.
    fn new(suffix: Option<&str>) -> Names {
        let name = |base: &str| match suffix {
            Some(s) => format!("{base}-{s}"),
            None => base.to_string(),
        };
        Names {
            webhooks: name("webhooks"),
            tasks: name("tasks"),
            chain_group: name("webhook-workers"),
            queue_groups: GROUPS
                .iter()
                .map(|g| name(&format!("task-workers-{}", g.label)))
                .collect(),
        }
    }
}

/// The broker the story runs on.
enum Broker {
    External(String),
    Embedded {
        addr: String,
        dir: PathBuf,
        stop: oneshot::Sender<()>,
        serving: tokio::task::JoinHandle<Result<(), lograil::ServeError>>,
    },
}

impl Broker {
    /// A broker of its own on 127.0.0.1:0 over a new temporary data dir.
    async fn embedded() -> anyhow::Result<Broker> {
        let dir = std::env::temp_dir().join(format!(
            "lograil-demo-{}-{}",
            std::process::id(),
            log_core::now_ms()
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let config = lograil::BrokerConfig {
            data_dir: dir.clone(),
            ..lograil::BrokerConfig::default()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let server = lograil::Server::open(listener, config).await?;
        let addr = server.local_addr()?.to_string();
        let (stop, stopped) = oneshot::channel::<()>();
        let serving = tokio::spawn(server.serve(async move {
            let _ = stopped.await;
        }));
        Ok(Broker::Embedded {
            addr,
            dir,
            stop,
            serving,
        })
    }

    fn addr(&self) -> &str {
        match self {
            Broker::External(addr) | Broker::Embedded { addr, .. } => addr,
        }
    }

    /// Stops an embedded broker and removes its data dir.
    async fn shut_down(self) -> anyhow::Result<()> {
        if let Broker::Embedded {
            dir, stop, serving, ..
        } = self
        {
            let _ = stop.send(());
            serving.await.context("the embedded broker")??;
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        Ok(())
    }
}

pub fn run(args: &Args) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let broker = match &args.bootstrap_server {
            Some(b) => Broker::External(b.clone()),
            None => Broker::embedded().await?,
        };
        let result = story(args, &broker).await;
        if result.is_ok() && args.keep {
            if let Broker::Embedded { addr, dir, .. } = &broker {
                eprintln!(
                    "the broker stays up at {addr} (data dir {}) for the commands above; Ctrl-C stops it",
                    dir.display()
                );
                tokio::signal::ctrl_c().await?;
            }
        }
        broker.shut_down().await?;
        result
    })
}

/// How the story ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Every event done.
    Done,
    /// Not done [`DRAIN_LIMIT`] after the traffic.
    TimedOut,
    /// Ctrl-C.
    Interrupted,
}

/// Everything the workers left behind, for the summary.
struct Outcome {
    rows: Vec<Row>,
    end: End,
    notes: Vec<String>,
    stats: Shared,
    retry_topics: Vec<String>,
    dlt: String,
}

async fn story(args: &Args, broker: &Broker) -> anyhow::Result<()> {
    let addr = broker.addr().to_string();
    let external = matches!(broker, Broker::External(_));
    let suffix = external.then(|| format!("{:06x}", log_core::now_ms() & 0xff_ffff));
    let names = Names::new(suffix.as_deref());
    let client = crate::client_props::client_config(Some(&addr), args.command_config.as_deref())?;
    let plan = Arc::new(Plan::new(args.seed, Duration::from_secs(args.duration)));
    let mut table = Table::new(args.json);
    table.say(&format!(
        "lograil demo: seed {}, {} s of webhooks from {} on {addr}{}; the flood from {} s to {} s, \
         the downstream down from {} s to {} s",
        plan.seed,
        plan.duration.as_secs(),
        TENANTS.join(", "),
        match broker {
            Broker::External(_) => String::new(),
            Broker::Embedded { dir, .. } => format!(" (embedded broker, data dir {})", dir.display()),
        },
        plan.flood_ms.0 / 1000,
        plan.flood_ms.1 / 1000,
        plan.outage_ms.0 / 1000,
        plan.outage_ms.1 / 1000,
    ))?;
    let outcome = play(&client, &names, &plan, &mut table).await?;
    let summary = summary::summarize(args, &addr, external, &names, &plan, &outcome);
    let html = report::render(&summary, &outcome.rows, &plan);
    std::fs::write(&args.report, html)
        .with_context(|| format!("writing the report to {}", args.report.display()))?;
    if args.json {
        println!("{summary}");
    } else {
        summary::print(&summary, (!external).then_some(args.keep));
    }
    match outcome.end {
        End::Done => {}
        End::TimedOut => bail!(
            "the story did not finish within {} s after the traffic: the counts above are \
             what was done",
            DRAIN_LIMIT.as_secs()
        ),
        End::Interrupted => bail!("interrupted: the counts above are what was done"),
    }
    Ok(())
}

/// Creates the topics and groups, runs the workers and the traffic, prints a row a second
/// until everything sent is done (or [`DRAIN_LIMIT`], or Ctrl-C), then stops the workers.
async fn play(
    client: &ClientConfig,
    names: &Names,
    plan: &Arc<Plan>,
    table: &mut Table,
) -> anyhow::Result<Outcome> {
    let mut admin = Admin::from_config(client).await.context("connecting")?;
    admin
        .create_topic(&names.webhooks, 3, &[])
        .await
        .with_context(|| format!("creating {}", names.webhooks))?;
    admin
        .create_topic(&names.tasks, 1, &[])
        .await
        .with_context(|| format!("creating {}", names.tasks))?;
    let mut notes = Vec::new();
    for (group, kind) in names.queue_groups.iter().zip(GROUPS) {
        notes.extend(queue::configure(&mut admin, group, kind).await?);
    }
    let stats = Shared::new(GROUPS.len());
    let start = Instant::now() + LEAD_IN;
    let chain = chain::workers(
        client,
        chain::config(&names.webhooks, &names.chain_group),
        plan.clone(),
        start,
        stats.clone(),
    )
    .await
    .context("starting the webhook workers")?;
    let retry_topics: Vec<String> = chain
        .topology()
        .stages
        .iter()
        .map(|s| s.topic.clone())
        .collect();
    let dlt = chain.topology().dlt.clone();
    let (stop, stopped) = watch::channel(false);
    let mut chain_stop = stopped.clone();
    let chain_task = tokio::spawn(chain.run(async move {
        let _ = chain_stop.wait_for(|stop| *stop).await;
    }));
    let crew = queue::Crew {
        client: client.clone(),
        topic: names.tasks.clone(),
        plan: plan.clone(),
        stats: stats.clone(),
        stop: stopped,
    };
    let mut queue_tasks = Vec::new();
    for (index, group) in names.queue_groups.iter().enumerate() {
        queue_tasks.extend(queue::start(&crew, group, index));
    }
    let producer = Producer::from_config(
        &client
            .clone()
            .with("acks", "all")
            .with("enable.idempotence", "true")
            .with("linger.ms", "5"),
    )
    .await
    .context("starting the producer")?;
    let mut rows = Vec::new();
    let end = {
        let traffic = tenants::play(
            &producer,
            plan,
            start,
            (&names.webhooks, &names.tasks),
            &stats,
        );
        let mut traffic = std::pin::pin!(traffic);
        let mut sent = false;
        let mut ticks = tokio::time::interval_at(
            (start + Duration::from_secs(1)).into(),
            Duration::from_secs(1),
        );
        let traffic_end = start + plan.duration;
        let interrupt = tokio::signal::ctrl_c();
        let mut interrupt = std::pin::pin!(interrupt);
        loop {
            tokio::select! {
                r = &mut traffic, if !sent => {
                    if let Err(e) = r {
                        break Err(e);
                    }
                    sent = true;
                }
                _ = &mut interrupt => break Ok(End::Interrupted),
                _ = ticks.tick() => {
                    let t = start.elapsed().as_secs();
                    let lag = chain_lag(&mut admin, &names.chain_group, &names.webhooks).await;
                    let ms = t * 1000;
                    let row = stats.lock().row(t, lag, plan.flooding(ms.saturating_sub(500)), plan.down(ms.saturating_sub(500)));
                    if let Err(e) = table.row(&row) {
                        break Err(e.into());
                    }
                    rows.push(row);
                    if sent && all_done(&stats) {
                        break Ok(End::Done);
                    }
                    if Instant::now() > traffic_end + DRAIN_LIMIT {
                        break Ok(End::TimedOut);
                    }
                }
            }
        }
    };
    producer.close().await;
    let _ = stop.send(true);
    chain_task
        .await
        .context("the webhook workers")?
        .context("the webhook workers")?;
    for task in queue_tasks {
        task.await.context("a task worker")??;
    }
    let end = end?;
    Ok(Outcome {
        rows,
        end,
        notes,
        stats: stats.clone(),
        retry_topics,
        dlt,
    })
}

/// Every sent record done by the chain (or dead-lettered) and by each share group.
fn all_done(stats: &Shared) -> bool {
    let s = stats.lock();
    s.chain_done.len() as u64 + s.dead_lettered.len() as u64 >= s.produced
        && s.queues.iter().all(|q| q.done.len() as u64 >= s.produced)
}

/// The chain group's worst lag in seconds on the main topic, if the broker answers in time.
async fn chain_lag(admin: &mut Admin, group: &str, topic: &str) -> Option<f64> {
    let also = [topic.to_string()];
    let lag = tokio::time::timeout(
        Duration::from_millis(700),
        admin.lag(group, &also, log_core::now_ms()),
    )
    .await
    .ok()?
    .ok()?;
    lag.iter()
        .filter(|p| p.topic == topic)
        .filter_map(|p| p.lag_seconds)
        .reduce(f64::max)
}
