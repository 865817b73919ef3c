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
use tokio::task::JoinHandle;

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
    let (mut admin, notes) = set_up(client, names).await?;
    let stats = Shared::new(GROUPS.len());
    let start = Instant::now() + LEAD_IN;
    let (workers, topics) = Workers::start(client, names, plan, start, &stats).await?;
    let producer = Producer::from_config(
        &client
            .clone()
            .with("acks", "all")
            .with("enable.idempotence", "true")
            .with("linger.ms", "5"),
    )
    .await
    .context("starting the producer")?;
    let watched = Watch {
        admin: &mut admin,
        names,
        plan,
        stats: &stats,
        start,
    }
    .run(&producer, table)
    .await;
    producer.close().await;
    workers.stop().await?;
    let (rows, end) = watched?;
    Ok(Outcome {
        rows,
        end,
        notes,
        stats: stats.clone(),
        retry_topics: topics.retry,
        dlt: topics.dlt,
    })
}

/// Connects, creates the two topics and configures the share groups; returns the admin
/// client and the notes the configuration left.
async fn set_up(client: &ClientConfig, names: &Names) -> anyhow::Result<(Admin, Vec<String>)> {
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
    Ok((admin, notes))
}

/// The retry chain's topics: its retry topics in order, and its dead-letter topic.
struct ChainTopics {
    retry: Vec<String>,
    dlt: String,
}

/// The running workers: the webhook workers on the retry chain and the task workers of each
/// share group, until `stop`.
struct Workers {
    stop: watch::Sender<bool>,
    chain: JoinHandle<Result<(), retry_topic::RetryError>>,
    queues: Vec<JoinHandle<anyhow::Result<()>>>,
}

impl Workers {
    async fn start(
        client: &ClientConfig,
        names: &Names,
        plan: &Arc<Plan>,
        start: Instant,
        stats: &Shared,
    ) -> anyhow::Result<(Workers, ChainTopics)> {
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
        let workers = Workers {
            stop,
            chain: chain_task,
            queues: queue_tasks,
        };
        let topics = ChainTopics {
            retry: retry_topics,
            dlt,
        };
        Ok((workers, topics))
    }

    /// Tells every worker to stop and waits for them all.
    async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(true);
        self.chain
            .await
            .context("the webhook workers")?
            .context("the webhook workers")?;
        for task in self.queues {
            task.await.context("a task worker")??;
        }
        Ok(())
    }
}

/// What the live table looks at, a row a second.
struct Watch<'a> {
    admin: &'a mut Admin,
    names: &'a Names,
    plan: &'a Plan,
    stats: &'a Shared,
    start: Instant,
}

impl Watch<'_> {
    /// Sends the traffic with `producer`, printing a row a second, until everything sent is
    /// done, or [`DRAIN_LIMIT`] after the traffic, or Ctrl-C; returns the rows and how it
    /// ended.
    async fn run(
        mut self,
        producer: &Producer,
        table: &mut Table,
    ) -> anyhow::Result<(Vec<Row>, End)> {
        let names = self.names;
        let traffic = tenants::play(
            producer,
            self.plan,
            self.start,
            (&names.webhooks, &names.tasks),
            self.stats,
        );
        let mut traffic = std::pin::pin!(traffic);
        let mut sent = false;
        let mut ticks = tokio::time::interval_at(
            (self.start + Duration::from_secs(1)).into(),
            Duration::from_secs(1),
        );
        let traffic_end = self.start + self.plan.duration;
        let interrupt = tokio::signal::ctrl_c();
        let mut interrupt = std::pin::pin!(interrupt);
        let mut rows = Vec::new();
        let end = loop {
            tokio::select! {
                r = &mut traffic, if !sent => {
                    r?;
                    sent = true;
                }
                _ = &mut interrupt => break End::Interrupted,
                _ = ticks.tick() => {
                    let row = self.row().await;
                    table.row(&row)?;
                    rows.push(row);
                    if sent && all_done(self.stats) {
                        break End::Done;
                    }
                    if Instant::now() > traffic_end + DRAIN_LIMIT {
                        break End::TimedOut;
                    }
                }
            }
        };
        Ok((rows, end))
    }

    /// The row of the seconds since the start: the chain group's lag and the counts so far.
    async fn row(&mut self) -> Row {
        let t = self.start.elapsed().as_secs();
        let lag = chain_lag(self.admin, &self.names.chain_group, &self.names.webhooks).await;
        let ms = t * 1000;
        self.stats.lock().row(
            t,
            lag,
            self.plan.flooding(ms.saturating_sub(500)),
            self.plan.down(ms.saturating_sub(500)),
        )
    }
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
