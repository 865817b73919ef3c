//! What a run prints for humans and writes to `--json`.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;

use crate::args::RunArgs;
use crate::consume::ConsumeSummary;
use crate::latency::{human_micros, LatencySummary};
use crate::machine::Machine;
use crate::proc_stats::ProcessCost;
use crate::produce::ProduceSummary;

/// Everything about one `produce`, `consume` or `end-to-end` run.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Always `lograil-bench`.
    pub tool: &'static str,
    /// The harness's crate version.
    pub version: &'static str,
    /// `produce`, `consume` or `end-to-end`.
    pub mode: &'static str,
    /// Wall-clock start of the run (before topic setup), in seconds since the Unix epoch.
    pub started_at_unix_s: u64,
    /// `--label`, if given.
    pub label: Option<String>,
    /// The flags, as given or defaulted (`brokers` is the broker address).
    pub parameters: RunArgs,
    /// Partitions of the topic as the broker reports them.
    pub partitions: i32,
    /// librdkafka properties the producers were created with.
    pub producer_config: Option<Vec<(String, String)>>,
    /// librdkafka properties the consumers were created with.
    pub consumer_config: Option<Vec<(String, String)>>,
    /// The machine and git revision the run happened on.
    pub machine: Machine,
    /// Wall time of the measured phase (clients started to clients done).
    pub wall_seconds: f64,
    /// The producers' results; `None` in the `consume` mode.
    pub produce: Option<ProduceSummary>,
    /// The consumers' results; `None` in the `produce` mode.
    pub consume: Option<ConsumeSummary>,
    /// The broker process (--broker-pid): CPU per GiB and peak RSS.
    pub broker_cost: Option<ProcessCost>,
    /// This harness process (librdkafka included).
    pub client_cost: ProcessCost,
}

impl RunReport {
    /// The first line of the report: mode and parameters.
    pub fn headline(&self) -> String {
        let p = &self.parameters;
        format!(
            "lograil-bench {}: brokers {}, topic {} ({} partitions), {} B values, acks {}{}{}",
            self.mode,
            p.brokers,
            p.topic,
            self.partitions,
            p.message_size,
            p.acks,
            p.rate.map_or(String::new(), |r| format!(
                ", open loop at {r:.0} records/s"
            )),
            if p.keys > 0 {
                format!(
                    ", {} keys{}",
                    p.keys,
                    if p.random_keys {
                        " drawn at random"
                    } else {
                        ""
                    }
                )
            } else {
                String::new()
            },
        )
    }

    /// The human-readable report.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{}", self.headline());
        let _ = writeln!(out, "machine: {}", self.machine.describe());
        if let Some(label) = &self.label {
            let _ = writeln!(out, "label: {label}");
        }
        let mut latencies: Vec<(&str, LatencySummary)> = Vec::new();
        if let Some(s) = &self.produce {
            let _ = writeln!(
                out,
                "produce:  {} producer(s), {} records acked ({} failed) in {:.3} s: {:.1} MB/s, {:.0} records/s{}{}",
                s.producers,
                s.records_acked,
                s.records_failed,
                s.seconds,
                s.mb_per_s,
                s.records_per_s,
                if s.transactions > 0 {
                    format!(", {} transactions committed", s.transactions)
                } else {
                    String::new()
                },
                incomplete(s.timed_out, s.first_error.as_deref()),
            );
            latencies.push(("delivery (send to ack)", s.delivery_latency));
            for (name, w) in [
                ("broker round trip", s.librdkafka.broker_round_trip),
                ("producer queue", s.librdkafka.producer_queue),
            ] {
                if let Some(w) = w {
                    let _ = writeln!(
                        out,
                        "          librdkafka {name}: {} requests/records, mean {}, ~p50 {}, ~p99 {}, max {}",
                        w.count,
                        human_micros(w.mean_us as u64),
                        human_micros(w.approx_p50_us as u64),
                        human_micros(w.approx_p99_us as u64),
                        human_micros(u64::try_from(w.max_us).unwrap_or(0)),
                    );
                }
            }
        }
        if let Some(s) = &self.consume {
            let _ = writeln!(
                out,
                "consume:  {} consumer(s), {} records in {:.3} s: {:.1} MB/s, {:.0} records/s (first record after {}){}",
                s.consumers,
                s.records,
                s.seconds,
                s.mb_per_s,
                s.records_per_s,
                s.first_record_after_ms
                    .map_or("-".to_string(), |ms| format!("{ms:.1} ms")),
                incomplete(s.timed_out, s.first_error.as_deref()),
            );
            if let Some(l) = s.end_to_end_latency {
                latencies.push(("end-to-end (send to read)", l));
            }
        }
        if !latencies.is_empty() {
            let _ = write!(out, "\n{:<26}{:>10}", "latency", "count");
            for (name, _) in LatencySummary::default().rows() {
                let _ = write!(out, "{name:>10}");
            }
            out.push('\n');
            for (name, l) in latencies {
                let _ = write!(out, "{name:<26}{:>10}", l.count);
                for (_, us) in l.rows() {
                    let _ = write!(out, "{:>10}", human_micros(us));
                }
                out.push('\n');
            }
            out.push('\n');
        }
        if let Some(c) = &self.broker_cost {
            let _ = writeln!(out, "broker:   {}", cost_line(c));
        }
        let _ = writeln!(out, "harness:  {}", cost_line(&self.client_cost));
        out
    }
}

fn incomplete(timed_out: bool, error: Option<&str>) -> String {
    let mut s = String::new();
    if timed_out {
        s.push_str(" [TIMED OUT: incomplete]");
    }
    if let Some(e) = error {
        let _ = write!(s, " [first error: {e}]");
    }
    s
}

fn cost_line(c: &ProcessCost) -> String {
    format!(
        "{:.2} CPU s ({:.2} user, {:.2} sys; {:.2} cores busy), {:.2} CPU s per GiB, peak RSS {}",
        c.cpu_s,
        c.user_s,
        c.system_s,
        c.cores_busy,
        c.cpu_s_per_gib,
        c.peak_rss_bytes.map_or("?".to_string(), |b| format!(
            "{:.0} MiB",
            b as f64 / (1 << 20) as f64
        )),
    )
}

/// Writes any report as pretty JSON.
pub fn write_json<T: Serialize>(path: &Path, report: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string_pretty(report).context("encoding the JSON report")?;
    std::fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}
