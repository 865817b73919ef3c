//! What the runs measured: each tenant's waits and completion time, each run's totals, the
//! targets' ratios, and the table of them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::NoisyArgs;

/// One tenant's figures in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TenantFigures {
    /// The tenant's name (`A` .. `D`), the tasks' key.
    pub tenant: String,
    /// Tasks of the tenant completed (each counted once, however often delivered).
    pub tasks: u64,
    /// Median wait, from a task's submit to the start of its service, in ms.
    pub wait_p50_ms: f64,
    /// 99th percentile wait (nearest rank), in ms.
    pub wait_p99_ms: f64,
    /// Longest wait, in ms.
    pub wait_max_ms: f64,
    /// From the tenant's first submit to the end of its last task.
    pub completion_s: f64,
}

/// One run: the tenants' figures and the run's totals.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFigures {
    /// The run's name: `idle`, `fifo`, `fair`, `throughput-fifo` or `throughput-fair`.
    pub run: String,
    /// The share-group configs set for the run besides `share.auto.offset.reset`
    /// (empty: FIFO).
    pub group_config: Vec<(String, String)>,
    /// Per tenant, by name; empty for the throughput runs.
    pub tenants: Vec<TenantFigures>,
    /// Tasks completed, each counted once.
    pub completed: u64,
    /// Deliveries of a task already delivered (a lock ran out, a worker left).
    pub redelivered: u64,
    /// From the first task's receipt to the last task's end.
    pub busy_s: f64,
    /// `completed / busy_s`.
    pub completed_per_s: f64,
    /// Fetches (receive calls) that returned records, all workers together.
    #[serde(default)]
    pub receives: u64,
}

/// What a `noisy` run measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NoisyReport {
    /// The flags, as given or defaulted.
    pub args: NoisyArgs,
    /// The runs, in the order they ran.
    pub runs: Vec<RunFigures>,
    /// B/C/D's worst p99 wait under fair turns over their worst idle p99 (target <= 2).
    pub fair_p99_over_idle: Option<f64>,
    /// The same under FIFO, for contrast.
    pub fifo_p99_over_idle: Option<f64>,
    /// A's completion time under fair turns over FIFO's (target <= 1.05).
    pub flood_completion_fair_over_fifo: Option<f64>,
    /// Completed records/s with fairness on over off, same run (target >= 0.8).
    pub throughput_fair_over_fifo: Option<f64>,
}

/// One completed task.
#[derive(Debug, Clone)]
pub(super) struct Done {
    pub(super) tenant: String,
    pub(super) submit_us: u64,
    pub(super) start_us: u64,
    pub(super) end_us: u64,
}

/// Nearest-rank percentile of sorted `values`.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub(super) fn tenant_figures(done: &[Done]) -> Vec<TenantFigures> {
    let mut by_tenant: BTreeMap<&str, Vec<&Done>> = BTreeMap::new();
    for d in done {
        by_tenant.entry(d.tenant.as_str()).or_default().push(d);
    }
    by_tenant
        .into_iter()
        .map(|(tenant, tasks)| {
            let mut waits: Vec<f64> = tasks
                .iter()
                .map(|d| d.start_us.saturating_sub(d.submit_us) as f64 / 1000.0)
                .collect();
            waits.sort_by(f64::total_cmp);
            let first = tasks.iter().map(|d| d.submit_us).min().unwrap_or(0);
            let last = tasks.iter().map(|d| d.end_us).max().unwrap_or(first);
            TenantFigures {
                tenant: tenant.to_string(),
                tasks: tasks.len() as u64,
                wait_p50_ms: percentile(&waits, 50.0),
                wait_p99_ms: percentile(&waits, 99.0),
                wait_max_ms: waits.last().copied().unwrap_or(0.0),
                completion_s: last.saturating_sub(first) as f64 / 1e6,
            }
        })
        .collect()
}

pub(super) fn summarize(args: NoisyArgs, runs: Vec<RunFigures>) -> NoisyReport {
    let find = |name: &str| runs.iter().find(|r| r.run == name);
    let small_p99 = |run: &RunFigures| {
        run.tenants
            .iter()
            .filter(|t| t.tenant != "A")
            .map(|t| t.wait_p99_ms)
            .fold(None, |m: Option<f64>, w| Some(m.map_or(w, |m| m.max(w))))
    };
    let flood = |run: &RunFigures| {
        run.tenants
            .iter()
            .find(|t| t.tenant == "A")
            .map(|t| t.completion_s)
    };
    let idle = find("idle").and_then(small_p99);
    let over_idle = |name: &str| Some(find(name).and_then(small_p99)? / idle?);
    let flood_ratio = find("fair")
        .and_then(flood)
        .zip(find("fifo").and_then(flood))
        .map(|(fair, fifo)| fair / fifo);
    let throughput = find("throughput-fair")
        .zip(find("throughput-fifo"))
        .map(|(fair, fifo)| fair.completed_per_s / fifo.completed_per_s);
    NoisyReport {
        fair_p99_over_idle: over_idle("fair"),
        fifo_p99_over_idle: over_idle("fifo"),
        flood_completion_fair_over_fifo: flood_ratio,
        throughput_fair_over_fifo: throughput,
        args,
        runs,
    }
}

pub(super) fn human_run(run: &RunFigures) -> String {
    let mut out = format!(
        "{}: {} tasks in {:.2} s ({:.0}/s), {} redelivered, {:.1} tasks a fetch\n",
        run.run,
        run.completed,
        run.busy_s,
        run.completed_per_s,
        run.redelivered,
        run.completed as f64 / run.receives.max(1) as f64
    );
    for t in &run.tenants {
        out += &format!(
            "  {:>6} {:>6} tasks  wait p50 {:>9.1} ms  p99 {:>9.1} ms  max {:>9.1} ms  done after {:>7.2} s\n",
            t.tenant, t.tasks, t.wait_p50_ms, t.wait_p99_ms, t.wait_max_ms, t.completion_s
        );
    }
    out
}

impl NoisyReport {
    /// The table and the targets.
    pub fn human(&self) -> String {
        let a = &self.args;
        let mut out = format!(
            "noisy neighbour: A floods {} tasks, then B, C, D {} each; {} workers, {} ms a task, max.poll.records {}{}\n",
            a.flood,
            a.few,
            a.workers,
            a.service_ms,
            a.max_poll_records,
            a.label.as_deref().map(|l| format!(" ({l})")).unwrap_or_default()
        );
        for run in &self.runs {
            out += &human_run(run);
        }
        let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}"));
        out += &format!(
            "B/C/D p99 wait over idle: fair {} (target <= 2), fifo {}\n\
             A's completion, fair over fifo: {} (target <= 1.05)\n\
             completed records/s, fair over fifo: {} (target >= 0.8)\n",
            ratio(self.fair_p99_over_idle),
            ratio(self.fifo_p99_over_idle),
            ratio(self.flood_completion_fair_over_fifo),
            ratio(self.throughput_fair_over_fifo),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&values, 50.0), 50.0);
        assert_eq!(percentile(&values, 99.0), 99.0);
        assert_eq!(percentile(&[7.0], 99.0), 7.0);
    }

    #[test]
    fn the_targets_are_ratios_of_the_same_run() {
        let tenant = |name: &str, p99: f64, done: f64| TenantFigures {
            tenant: name.into(),
            tasks: 1,
            wait_p50_ms: p99 / 2.0,
            wait_p99_ms: p99,
            wait_max_ms: p99,
            completion_s: done,
        };
        let run = |name: &str, tenants: Vec<TenantFigures>| RunFigures {
            run: name.into(),
            group_config: Vec::new(),
            tenants,
            completed: 1,
            redelivered: 0,
            busy_s: 1.0,
            completed_per_s: 1.0,
            receives: 1,
        };
        let args = NoisyArgs::try_parse_from_defaults();
        let report = summarize(
            args,
            vec![
                run("idle", vec![tenant("B", 40.0, 0.1), tenant("C", 50.0, 0.1)]),
                run(
                    "fifo",
                    vec![tenant("A", 10.0, 20.0), tenant("B", 9000.0, 20.0)],
                ),
                run(
                    "fair",
                    vec![tenant("A", 10.0, 21.0), tenant("C", 80.0, 0.2)],
                ),
            ],
        );
        assert_eq!(report.fair_p99_over_idle, Some(80.0 / 50.0));
        assert_eq!(report.fifo_p99_over_idle, Some(9000.0 / 50.0));
        assert_eq!(report.flood_completion_fair_over_fifo, Some(21.0 / 20.0));
        assert_eq!(report.throughput_fair_over_fifo, None);
    }

    impl NoisyArgs {
        fn try_parse_from_defaults() -> NoisyArgs {
            #[derive(clap::Parser)]
            struct Wrap {
                #[command(flatten)]
                args: NoisyArgs,
            }
            <Wrap as clap::Parser>::parse_from(["noisy"]).args
        }
    }
}
