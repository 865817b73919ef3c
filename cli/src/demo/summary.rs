//! The summary of a run: one JSON value (its keys documented in docs/demo.md) that `--json`
//! prints, the report renders and [`print`] turns into a few lines for people, with the
//! commands to look further.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::plan::{self, Plan, TENANTS};
use super::queue::GROUPS;
use super::stats::{QueueStats, Row, Stats, Waits};
use super::{table, Args, End, Names, Outcome};

fn waits_json(w: Waits) -> Value {
    json!({"count": w.count, "p50": w.p50, "p99": w.p99, "max": w.max})
}

/// The commands that show what happened, and redrive the dead letters.
fn commands(addr: &str, names: &Names, dlt: &str) -> Vec<String> {
    vec![
        format!("lograil dlt list --bootstrap-server {addr} --from {dlt}"),
        format!("lograil dlt show --bootstrap-server {addr} --from {dlt}"),
        format!(
            "lograil group describe --bootstrap-server {addr} {}",
            names.chain_group
        ),
        format!(
            "lograil queue describe --bootstrap-server {addr} {}",
            names.queue_groups[0]
        ),
        format!("lograil dlt redrive --bootstrap-server {addr} --from {dlt} --rate 10"),
    ]
}

/// The summary: every key documented in docs/demo.md.
pub(super) fn summarize(
    args: &Args,
    addr: &str,
    external: bool,
    names: &Names,
    plan: &Plan,
    outcome: &Outcome,
) -> Value {
    let mut s = outcome.stats.lock();
    let queues = queues_json(names, &mut s.queues);
    let max_lag = outcome
        .rows
        .iter()
        .filter_map(|r| r.lag_seconds)
        .reduce(f64::max);
    json!({
        "seed": plan.seed,
        "duration_s": plan.duration.as_secs(),
        "broker": addr,
        "embedded": !external,
        "drained": outcome.end == End::Done,
        "topics": {
            "webhooks": names.webhooks,
            "retry": outcome.retry_topics,
            "dlt": outcome.dlt,
            "tasks": names.tasks,
        },
        "produced": s.produced,
        "chain": chain_json(names, &s, max_lag),
        "poison": poison_json(plan, &s),
        "outage": outage_json(plan, &s),
        "flood": {"tenant": plan::NOISY, "from_s": secs(plan.flood_ms.0), "to_s": secs(plan.flood_ms.1)},
        "queues": queues,
        "notes": outcome.notes,
        "report": std::path::absolute(&args.report).unwrap_or_else(|_| args.report.clone()).display().to_string(),
        "commands": commands(addr, names, &outcome.dlt),
        "timeline": timeline_json(&outcome.rows),
    })
}

fn secs(ms: u64) -> f64 {
    ms as f64 / 1000.0
}

/// Per share group: its tasks done and each tenant's waits, over the run and during the
/// flood (sorts the waits in place).
fn queues_json(names: &Names, queues: &mut [QueueStats]) -> Vec<Value> {
    GROUPS
        .iter()
        .zip(&names.queue_groups)
        .zip(queues.iter_mut())
        .map(|((kind, group), q)| {
            let tenants: serde_json::Map<String, Value> = TENANTS
                .iter()
                .map(|t| {
                    let all = Waits::of(q.all.get_mut(t).map_or(&mut [][..], |v| &mut v[..]));
                    let flood = Waits::of(q.flood.get_mut(t).map_or(&mut [][..], |v| &mut v[..]));
                    (
                        (*t).to_string(),
                        json!({"tasks": all.count, "wait_ms": waits_json(all), "flood_wait_ms": waits_json(flood)}),
                    )
                })
                .collect();
            json!({
                "label": kind.label,
                "group": group,
                "fairness": kind.fairness,
                "completed": q.done.len(),
                "tenants": tenants,
            })
        })
        .collect()
}

/// The webhook workers' counts.
fn chain_json(names: &Names, s: &Stats, max_lag: Option<f64>) -> Value {
    let mut classes: BTreeMap<String, u64> = BTreeMap::new();
    for (class, n) in &s.dead_classes {
        classes.insert(class.clone(), *n);
    }
    json!({
        "group": names.chain_group,
        "completed": s.chain_done.len(),
        "retried": s.retried,
        "dead_lettered": s.dead_lettered.len(),
        "dead_letter_classes": classes,
        "max_lag_seconds": max_lag,
    })
}

/// The poison record: which event, where, and what became of it.
fn poison_json(plan: &Plan, s: &Stats) -> Value {
    let poison = usize::try_from(plan.poison)
        .ok()
        .and_then(|i| plan.events.get(i));
    json!({
        "seq": plan.poison,
        "tenant": poison.map(|e| e.tenant),
        "key": poison.map(|e| e.key.as_str()),
        "partition": s.poison.partition,
        "offset": s.poison.offset,
        "attempts": s.poison.attempts,
        "dead_lettered": s.poison.dead_lettered,
        "passed_by": s.poison.passed_by,
    })
}

/// The downstream outage, planned and as the chain saw it.
fn outage_json(plan: &Plan, s: &Stats) -> Value {
    json!({
        "from_s": secs(plan.outage_ms.0),
        "to_s": secs(plan.outage_ms.1),
        "detected_at_s": s.outage_detected_ms.map(secs),
        "ended_at_s": s.outage_ended_ms.map(secs),
        "failed_probes": s.failed_probes,
        "retried_while_down": s.retried_in_outage,
        "dead_lettered_while_down": s.dead_in_outage,
    })
}

/// One entry per second of the run.
fn timeline_json(rows: &[Row]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            json!({
                "t": r.t,
                "produced": r.produced,
                "completed": r.completed,
                "retried": r.retried,
                "dead_lettered": r.dead_lettered,
                "lag_seconds": r.lag_seconds,
                "phase": table::phase(r),
            })
        })
        .collect()
}

/// The summary for people, then where the report went and what to run next.
pub(super) fn print(summary: &Value, embedded_kept: Option<bool>) {
    let chain = &summary["chain"];
    let poison = &summary["poison"];
    let outage = &summary["outage"];
    println!();
    println!("summary");
    println!(
        "  sent {} webhook events; the webhook workers completed {}, dead-lettered {}, retried {} (worst lag {} s)",
        summary["produced"], chain["completed"], chain["dead_lettered"], chain["retried"],
        chain["max_lag_seconds"].as_f64().map_or_else(|| "-".to_string(), |l| format!("{l:.1}")),
    );
    println!(
        "  poison record: event {} ({}, partition {} offset {}) failed {} attempts and went to {} {}; \
         meanwhile {} records behind it in its partition were done",
        poison["seq"], poison["key"].as_str().unwrap_or(""), poison["partition"], poison["offset"], poison["attempts"],
        summary["topics"]["dlt"].as_str().unwrap_or(""),
        if poison["dead_lettered"] == true { "with its attempt history" } else { "(not yet: it was still in the chain)" },
        poison["passed_by"],
    );
    println!(
        "  outage from {} s to {} s: the chain paused at {} s, {} failed probes, {} attempts spent while down, {} dead-lettered while down",
        outage["from_s"], outage["to_s"],
        outage["detected_at_s"].as_f64().map_or_else(|| "-".to_string(), |s| format!("{s:.1}")),
        outage["failed_probes"], outage["retried_while_down"], outage["dead_lettered_while_down"],
    );
    println!("  task waits during the flood, p99 ms:");
    for q in summary["queues"].as_array().into_iter().flatten() {
        let cells: Vec<String> = TENANTS
            .iter()
            .map(|t| format!("{t} {}", q["tenants"][t]["flood_wait_ms"]["p99"]))
            .collect();
        println!(
            "    {:<5} ({}): {}",
            q["label"].as_str().unwrap_or(""),
            q["fairness"].as_str().unwrap_or(""),
            cells.join(", ")
        );
    }
    for note in summary["notes"].as_array().into_iter().flatten() {
        println!("  note: {}", note.as_str().unwrap_or(""));
    }
    println!(
        "report written to {}",
        summary["report"].as_str().unwrap_or("")
    );
    println!();
    match embedded_kept {
        Some(false) => println!(
            "look further (these need a running broker: the embedded one stops with the demo; \
             run again with --keep, or with --bootstrap-server against your own):"
        ),
        Some(true) => println!("look further, while the broker stays up:"),
        None => println!("look further:"),
    }
    for c in summary["commands"].as_array().into_iter().flatten() {
        println!("  {}", c.as_str().unwrap_or(""));
    }
}
