//! The `noisy` mode: a noisy neighbour in a share group (issue 27). Tenant A floods the queue
//! with `--flood` tasks at once, then tenants B, C and D submit `--few` each right after
//! (interleaved); `--workers` share-group workers (lograil's [`QueueConsumer`], explicit acks,
//! `max.poll.records` 1 by default, as a task queue's workers take one task at a time) each
//! spend `--service-ms` on every task (a sleep). Each task carries its submit time (the first 8
//! bytes of its value) and its tenant as its key; its *wait* is from submit to the start of its
//! service.
//!
//! Three runs, in this order, each on a fresh one-partition topic with a fresh group (the queue
//! empty, the workers joined before the first task is sent):
//!
//! 1. `idle`: B, C and D alone, the baseline of their wait;
//! 2. `fifo`: A's flood then B, C, D, the group without a fairness config (offset order);
//! 3. `fair`: the same with `--fair-config` (default `lograil.share.fairness.key=key`).
//!
//! Reported per run and tenant: the wait's p50, p99 and max, and the tenant's completion time
//! (its first submit to its last task's end); the targets of issue 27 are B/C/D's p99 wait under
//! fair turns at most 2x their idle wait, and A's completion time under fair turns within 5 % of
//! FIFO's (fair turns are work-conserving).
//!
//! Then the throughput check: `--throughput-records` records over `--throughput-tenants`
//! tenants (drawn at random, the same draws every run) fill a topic first, and the workers
//! complete them with no service time (`max.poll.records` 500), once without and once with the
//! fairness config: completed records per second both ways, in the same run (target: fair at
//! least 0.8 of FIFO).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use serde::{Deserialize, Serialize};

mod once;
mod report;
mod send;
mod svg;

pub use report::{NoisyReport, RunFigures, TenantFigures};
pub use svg::write_svg;

/// Flags of the `noisy` mode.
#[derive(Debug, Clone, Args, Serialize, Deserialize)]
pub struct NoisyArgs {
    /// Bootstrap broker address (lograil).
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub brokers: String,
    /// Prefix of the topics (and groups) the runs create: PREFIX-RUN-PID.
    #[arg(long, default_value = "lograil-noisy")]
    pub topic_prefix: String,
    /// Tasks tenant A submits at once.
    #[arg(long, default_value_t = 10_000)]
    pub flood: u64,
    /// Tasks each of tenants B, C and D submits right after A's flood.
    #[arg(long, default_value_t = 20)]
    pub few: u64,
    /// Share-group workers, each a queue consumer of its own.
    #[arg(long, default_value_t = 8)]
    pub workers: usize,
    /// Each worker's time per task (a sleep), in ms.
    #[arg(long, default_value_t = 10.0)]
    pub service_ms: f64,
    /// Each worker's `max.poll.records` in the noisy-neighbour runs.
    #[arg(long, default_value_t = 1)]
    pub max_poll_records: u32,
    /// Size of each task's value (at least 8: the submit time).
    #[arg(long, default_value_t = 100)]
    pub message_size: usize,
    /// The group config of the fair run, as NAME=VALUE (repeatable); also the throughput
    /// check's fair half.
    #[arg(long = "fair-config", value_name = "NAME=VALUE", default_values_t = ["lograil.share.fairness.key=key".to_string()])]
    pub fair_config: Vec<String>,
    /// Which runs: any of idle, fifo, fair, throughput (comma-separated).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "idle,fifo,fair,throughput"
    )]
    pub runs: Vec<String>,
    /// Records of the throughput check (0: no throughput check).
    #[arg(long, default_value_t = 50_000)]
    pub throughput_records: u64,
    /// Tenants of the throughput check.
    #[arg(long, default_value_t = 100)]
    pub throughput_tenants: u64,
    /// Tokio worker threads shared by the producer and the workers.
    #[arg(long, default_value_t = 2)]
    pub tokio_workers: usize,
    /// Give up on a run after this many seconds.
    #[arg(long, default_value_t = 180)]
    pub timeout_secs: u64,
    /// Free text stored with the results.
    #[arg(long)]
    pub label: Option<String>,
    /// Write the parameters and results to this JSON file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Draw each tenant's wait (p50 and p99, idle / FIFO / fair) into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// Runs the mode.
pub fn run(args: &NoisyArgs) -> anyhow::Result<NoisyReport> {
    anyhow::ensure!(args.message_size >= 8, "--message-size must be at least 8");
    anyhow::ensure!(args.workers > 0, "--workers must be positive");
    let fair = parse_pairs(&args.fair_config)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.tokio_workers.max(1))
        .enable_all()
        .build()
        .context("starting a tokio runtime")?;
    rt.block_on(async {
        let mut runs = Vec::new();
        let service = Duration::from_secs_f64(args.service_ms.max(0.0) / 1000.0);
        let small: Vec<Submit> = ["B", "C", "D"]
            .iter()
            .map(|t| Submit::new(t, args.few))
            .collect();
        let mut noisy = vec![Submit::new("A", args.flood)];
        noisy.extend(small.iter().cloned());
        // The same order without the flood: B, C and D interleaved.
        let mut idle = vec![Submit::new("A", 0)];
        idle.extend(small.iter().cloned());
        for name in &args.runs {
            let plan = match name.as_str() {
                "idle" => Plan::noisy("idle", &[], idle.clone(), service, args),
                "fifo" => Plan::noisy("fifo", &[], noisy.clone(), service, args),
                "fair" => Plan::noisy("fair", &fair, noisy.clone(), service, args),
                "throughput" if args.throughput_records > 0 => {
                    // FIFO then fair, back to back: the ratio is of the same run.
                    for (run, config) in [("throughput-fifo", &[][..]), ("throughput-fair", &fair)]
                    {
                        let plan = Plan {
                            run: run.to_string(),
                            config: config.to_vec(),
                            submits: vec![Submit {
                                tenant: String::new(),
                                tasks: args.throughput_records,
                            }],
                            random_tenants: Some(args.throughput_tenants.max(1)),
                            service: Duration::ZERO,
                            max_poll_records: 500,
                            fill_first: true,
                        };
                        let figures = once::run_once(args, &plan).await?;
                        eprintln!("{run}: {:.0} records/s completed", figures.completed_per_s);
                        runs.push(figures);
                    }
                    continue;
                }
                "throughput" => continue,
                other => anyhow::bail!("unknown run {other} (idle, fifo, fair, throughput)"),
            };
            let figures = once::run_once(args, &plan).await?;
            eprintln!("{}", report::human_run(&figures));
            runs.push(figures);
        }
        Ok(report::summarize(args.clone(), runs))
    })
}

fn parse_pairs(pairs: &[String]) -> anyhow::Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|p| {
            p.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .with_context(|| format!("{p}: expected NAME=VALUE"))
        })
        .collect()
}

/// `tasks` tasks of `tenant`, submitted together.
#[derive(Debug, Clone)]
struct Submit {
    tenant: String,
    tasks: u64,
}

impl Submit {
    fn new(tenant: &str, tasks: u64) -> Submit {
        Submit {
            tenant: tenant.to_string(),
            tasks,
        }
    }
}

/// One run's setup.
#[derive(Debug, Clone)]
struct Plan {
    run: String,
    config: Vec<(String, String)>,
    /// The first is sent whole, then the others interleaved task by task.
    submits: Vec<Submit>,
    /// Instead of the submits' tenants: each task's tenant drawn from this many.
    random_tenants: Option<u64>,
    service: Duration,
    max_poll_records: u32,
    /// Fill the topic before the workers start (throughput), instead of after they joined.
    fill_first: bool,
}

impl Plan {
    fn noisy(
        run: &str,
        config: &[(String, String)],
        submits: Vec<Submit>,
        service: Duration,
        args: &NoisyArgs,
    ) -> Plan {
        Plan {
            run: run.to_string(),
            config: config.to_vec(),
            submits,
            random_tenants: None,
            service,
            max_poll_records: args.max_poll_records,
            fill_first: false,
        }
    }

    fn total(&self) -> u64 {
        self.submits.iter().map(|s| s.tasks).sum()
    }

    /// The tenants in submit order: the first submit's tasks, then the others' in turn.
    fn order(&self) -> Vec<String> {
        let mut out = Vec::with_capacity(self.total() as usize);
        let Some((first, rest)) = self.submits.split_first() else {
            return out;
        };
        for n in 0..first.tasks {
            out.push(match self.random_tenants {
                Some(count) => format!("t{:03}", splitmix(n) % count),
                None => first.tenant.clone(),
            });
        }
        let most = rest.iter().map(|s| s.tasks).max().unwrap_or(0);
        for n in 0..most {
            for s in rest.iter().filter(|s| n < s.tasks) {
                out.push(s.tenant.clone());
            }
        }
        out
    }
}

/// A fixed pseudo-random draw (splitmix64) of `n`.
fn splitmix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flood_comes_first_then_the_few_in_turn() {
        let plan = Plan {
            run: "fifo".into(),
            config: Vec::new(),
            submits: vec![
                Submit::new("A", 3),
                Submit::new("B", 2),
                Submit::new("C", 1),
            ],
            random_tenants: None,
            service: Duration::ZERO,
            max_poll_records: 1,
            fill_first: false,
        };
        assert_eq!(plan.order(), ["A", "A", "A", "B", "C", "B"]);
    }
}
