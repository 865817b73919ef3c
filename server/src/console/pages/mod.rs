//! Each console page: what it reads of the broker (filtered by what the viewer may see) and
//! how it is laid out. All text goes through [`Html`].

use std::sync::Arc;

use crate::broker::Broker;
use crate::http::Response;
use crate::scrape::{Lag, Scraper};

mod dlt;
mod group;
mod messages;
mod security;
mod share;
mod topic;

pub use dlt::{dead_letter_records, dead_letter_topics};
pub use group::group;
pub use messages::messages;
pub use security::security;
pub use share::share;
pub use topic::topic;

use super::access::Viewer;
use super::dead_letters;
use super::html::Html;
use super::rates::Rates;
use super::{Query, PAGE_PARTITIONS};

/// Bytes of a record key shown.
pub(super) const KEY_SHOWN: usize = 256;
/// Rows of a chart.
const CHART_ROWS: usize = 10;

/// What every page is written from.
pub struct Context<'a> {
    pub broker: &'a Broker,
    pub viewer: &'a Viewer,
    pub query: &'a Query,
    /// Whether `--console-actions` is on: the pages then offer them.
    pub actions: bool,
}

type Page = Result<String, Response>;

const NAV: [(&str, &str); 7] = [
    ("/", "Overview"),
    ("/topics", "Topics"),
    ("/groups", "Consumer groups"),
    ("/shares", "Share groups"),
    ("/dead-letters", "Dead letters"),
    ("/limits", "Limits"),
    ("/security", "Security"),
];

/// The page around `body`.
pub(super) fn page(context: &Context<'_>, here: &str, title: &str, body: Html) -> String {
    let mut h = Html::default();
    h.raw("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">")
        .raw("<title>lograil · ")
        .text(title)
        .raw("</title><link rel=\"stylesheet\" href=\"/console.css\">")
        .raw("<script src=\"/console.js\" defer></script></head><body><header><strong>lograil</strong>");
    for (path, label) in NAV {
        h.raw(if path == here {
            "<a class=\"here\" href=\""
        } else {
            "<a href=\""
        })
        .raw(path)
        .raw("\">")
        .raw(label)
        .raw("</a>");
    }
    h.raw("<span class=\"who\">")
        .text(context.viewer.principal.as_str())
        .raw(" · <label><input type=\"checkbox\" id=\"pause\"> pause refresh</label></span></header><main><h1>")
        .text(title)
        .raw("</h1>");
    let mut out = h.into_string();
    out.push_str(&body.into_string());
    out.push_str(if context.actions {
        "</main><footer>Every number is the broker's own, read when the page loaded. Actions \
         (<code>--console-actions</code>) ask for confirmation and are logged.</footer></body></html>\n"
    } else {
        "</main><footer>Read-only: every number is the broker's own, read when the page \
         loaded. Redrive dead letters with <code>lograil dlt redrive</code>.</footer></body></html>\n"
    });
    out
}

/// Whether the page was asked for internal topics too (`?internal=true`).
fn with_internal(context: &Context<'_>) -> bool {
    context.query.get("internal") == Some("true")
}

/// The topics the viewer may see: the users' own, and the internal ones (last) when asked for.
fn visible_topics(context: &Context<'_>) -> Vec<Arc<log_core::Topic>> {
    let internal = with_internal(context);
    let mut topics: Vec<_> = context
        .broker
        .storage()
        .log
        .topics()
        .into_iter()
        .filter(|t| internal || !crate::broker::Storage::is_internal(t.name()))
        .filter(|t| context.viewer.sees_topic(context.broker, t.name()))
        .collect();
    topics.sort_by(|a, b| {
        (crate::broker::Storage::is_internal(a.name()), a.name())
            .cmp(&(crate::broker::Storage::is_internal(b.name()), b.name()))
    });
    topics
}

/// Lag rows of groups and topics the viewer may see.
fn visible_lag(context: &Context<'_>, scraper: &Scraper) -> Vec<Lag> {
    scraper
        .lag()
        .into_iter()
        .filter(|l| {
            context.viewer.sees_group(context.broker, &l.group)
                && context.viewer.sees_topic(context.broker, &l.topic)
        })
        .collect()
}

fn append_rates(
    topics: &[Arc<log_core::Topic>],
    rates: &Rates,
) -> std::collections::HashMap<String, super::rates::Rate> {
    let totals: Vec<(String, i64)> = topics
        .iter()
        .map(|t| {
            let total = t.partitions().iter().map(|p| p.log_end_offset()).sum();
            (t.name().to_string(), total)
        })
        .collect();
    rates.sample(&totals)
}

fn card(h: &mut Html, label: &'static str, value: impl FnOnce(&mut Html)) {
    h.raw("<div class=\"card\">").raw(label).raw("<b>");
    value(h);
    h.raw("</b></div>");
}

pub fn overview(context: &Context<'_>, scraper: &Scraper, rates: &Rates) -> Page {
    let topics = visible_topics(context);
    let rates = append_rates(&topics, rates);
    let lag = visible_lag(context, scraper);
    let partitions: usize = topics.iter().map(|t| t.partitions().len()).sum();
    let bytes: u64 = topics
        .iter()
        .flat_map(|t| t.partitions().iter().map(|p| p.size_bytes()))
        .sum();
    let dead: Vec<_> = topics
        .iter()
        .filter(|t| dead_letters::is_dead_letter_topic(t))
        .collect();
    let dead_records: i64 = dead.iter().map(|t| records_held(t)).sum();
    let mut groups: Vec<&str> = lag.iter().map(|l| l.group.as_str()).collect();
    groups.dedup();
    let shares = context
        .broker
        .shares()
        .groups()
        .into_iter()
        .filter(|g| context.viewer.sees_group(context.broker, g))
        .count();
    let mut h = Html::default();
    h.raw("<div class=\"cards\">");
    card(&mut h, "Topics", |h| {
        h.int(topics.len() as i64);
    });
    card(&mut h, "Partitions", |h| {
        h.int(partitions as i64);
    });
    card(&mut h, "On disk", |h| {
        h.size(bytes);
    });
    card(&mut h, "Consumer groups", |h| {
        h.int(groups.len() as i64);
    });
    card(&mut h, "Share groups", |h| {
        h.int(shares as i64);
    });
    card(&mut h, "Dead letters", |h| {
        h.int(dead_records);
    });
    h.raw("</div><h2>Append rate by topic (records/s, last minute)</h2>");
    let mut by_rate: Vec<(String, f64)> = rates
        .iter()
        .filter_map(|(t, r)| Some((t.clone(), r.now?)))
        .collect();
    by_rate.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    by_rate.truncate(CHART_ROWS);
    h.bars(&by_rate, "/s");
    h.raw("<h2>Consumer lag by group (oldest unconsumed record, seconds)</h2>");
    let mut by_lag: Vec<(String, f64)> = Vec::new();
    for l in &lag {
        let seconds = l.seconds.unwrap_or(0.0);
        match by_lag.iter_mut().find(|(g, _)| *g == l.group) {
            Some(row) => row.1 = row.1.max(seconds),
            None => by_lag.push((l.group.clone(), seconds)),
        }
    }
    by_lag.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    by_lag.truncate(CHART_ROWS);
    h.bars(&by_lag, " s");
    Ok(page(context, "/", "Overview", h))
}

/// Records a topic holds now (log end − log start, over its partitions).
fn records_held(topic: &log_core::Topic) -> i64 {
    topic
        .partitions()
        .iter()
        .map(|p| (p.log_end_offset() - p.log_start_offset()).max(0))
        .sum()
}

/// A page number from the query (`page`, from 0); 400 when not a number.
fn page_number(query: &Query) -> Result<usize, Response> {
    match query.get("page") {
        None => Ok(0),
        Some(n) => n
            .parse()
            .map_err(|_| Response::text("400 Bad Request", "page must be a number")),
    }
}

pub fn topics(context: &Context<'_>, rates: &Rates) -> Page {
    let page_no = page_number(context.query)?;
    let topics = visible_topics(context);
    let rates = append_rates(&topics, rates);
    let mut h = Html::default();
    h.raw("<table><tr><th>Topic</th><th>Partition</th><th>Log start</th><th>Log end</th>\
           <th>Records</th><th>On disk</th><th>Damaged offsets</th><th>Append rate</th><th>Last minute</th></tr>");
    let skip = page_no.saturating_mul(PAGE_PARTITIONS);
    let mut listed = 0usize;
    let mut seen = 0usize;
    for topic in &topics {
        let rate = rates.get(topic.name()).cloned().unwrap_or_default();
        for (index, partition) in topic.partitions().iter().enumerate() {
            seen += 1;
            if seen <= skip || listed == PAGE_PARTITIONS {
                continue;
            }
            listed += 1;
            let damaged: i64 = partition
                .damage()
                .iter()
                .map(|(_, d)| d.end_offset.saturating_sub(d.first_offset))
                .sum();
            h.raw("<tr><td>");
            h.topic_link(topic.name(), "", &[], topic.name())
                .raw("</td><td class=\"n\">");
            h.int(index as i64).raw("</td><td class=\"n\">");
            h.int(partition.log_start_offset())
                .raw("</td><td class=\"n\">");
            h.int(partition.log_end_offset())
                .raw("</td><td class=\"n\">");
            h.int((partition.log_end_offset() - partition.log_start_offset()).max(0));
            h.raw("</td><td class=\"n\">").size(partition.size_bytes());
            h.raw(if damaged > 0 {
                "</td><td class=\"n warn\">"
            } else {
                "</td><td class=\"n\">"
            });
            h.int(damaged).raw("</td>");
            if index == 0 {
                h.raw("<td class=\"n\">")
                    .rate(rate.now)
                    .raw(" (topic)</td><td>");
                h.sparkline(&rate.history).raw("</td>");
            } else {
                h.raw("<td></td><td></td>");
            }
            h.raw("</tr>");
        }
    }
    h.raw("</table>");
    if seen > skip + listed {
        let next = (page_no + 1).to_string();
        let mut query = vec![("page", next.as_str())];
        if with_internal(context) {
            query.push(("internal", "true"));
        }
        h.link("/topics", &query, "next partitions →");
    }
    if listed == 0 {
        h.raw("<p class=\"none\">No topics to show.</p>");
    }
    h.raw("<p>");
    if with_internal(context) {
        h.link("/topics", &[], "hide internal topics");
    } else {
        h.link(
            "/topics",
            &[("internal", "true")],
            "show internal topics too",
        );
    }
    h.raw("</p>");
    Ok(page(context, "/topics", "Topics and partitions", h))
}

/// The groups page: the streams groups, then [`PAGE_PARTITIONS`] lag rows and as many live
/// groups a page (`?page=N`).
pub fn groups(context: &Context<'_>, scraper: &Scraper) -> Page {
    let page_no = page_number(context.query)?;
    let skip = page_no.saturating_mul(PAGE_PARTITIONS);
    let lag = visible_lag(context, scraper);
    let mut h = Html::default();
    streams_groups(context, &mut h);
    if lag.is_empty() {
        h.raw("<p class=\"none\">No consumer group has committed an offset.</p>");
    } else {
        h.raw("<table><tr><th>Group</th><th>Topic</th><th>Partition</th><th>Committed</th><th>Log end</th>\
               <th>Lag (records)</th><th>Lag (seconds)</th><th>Consume rate</th><th>Time to drain</th></tr>");
        for l in lag.iter().skip(skip).take(PAGE_PARTITIONS) {
            h.raw("<tr><td>").group_link(&l.group).raw("</td><td>");
            h.topic_link(&l.topic, "", &[], &l.topic);
            h.raw("</td><td class=\"n\">").text(&l.partition);
            h.raw("</td><td class=\"n\">").int(l.committed);
            h.raw("</td><td class=\"n\">").int(l.end);
            h.raw("</td><td class=\"n lag-records\">").int(l.records);
            h.raw("</td><td class=\"n\">").seconds(l.seconds);
            h.raw("</td><td class=\"n\">").rate(l.rate);
            h.raw("</td><td class=\"n\">").seconds(l.time_to_drain());
            h.raw("</td></tr>");
        }
        h.raw("</table><p>Lag in seconds is the age of the oldest record the group has not consumed; \
               time to drain is lag ÷ the consume rate over the last minute (— while the group does not advance).</p>");
    }
    let more = live_groups(context, &mut h, skip) || lag.len() > skip + PAGE_PARTITIONS;
    if more {
        let next = (page_no + 1).to_string();
        h.link("/groups", &[("page", &next)], "next groups →");
    }
    Ok(page(context, "/groups", "Consumer groups", h))
}

/// The classic and consumer-protocol groups the viewer may see, with their state, each
/// linking to its page: [`PAGE_PARTITIONS`] of them from `skip`; whether more follow.
fn live_groups(context: &Context<'_>, h: &mut Html, skip: usize) -> bool {
    let broker = context.broker;
    let groups = broker.groups();
    let classic = groups
        .classic
        .list()
        .into_iter()
        .map(|(id, _, state)| (id, "classic", state.name()));
    let consumer = groups
        .consumer
        .list()
        .into_iter()
        .map(|(id, state)| (id, "consumer", state));
    let mut all: Vec<_> = classic
        .chain(consumer)
        .filter(|(id, _, _)| context.viewer.sees_group(broker, id))
        .collect();
    if all.len() <= skip {
        return false;
    }
    all.sort();
    h.raw("<h2>Groups</h2><table><tr><th>Group</th><th>Protocol</th><th>State</th></tr>");
    for (id, protocol, state) in all.iter().skip(skip).take(PAGE_PARTITIONS) {
        h.raw("<tr><td>").group_link(id);
        h.raw("</td><td>").text(protocol);
        h.raw("</td><td>").text(state).raw("</td></tr>");
    }
    h.raw("</table>");
    all.len() > skip + PAGE_PARTITIONS
}

/// The streams groups (KIP-1071) the viewer may see: state, epochs, members, tasks.
fn streams_groups(context: &Context<'_>, h: &mut Html) {
    let broker = context.broker;
    let streams = &broker.groups().streams;
    let groups: Vec<_> = streams
        .list()
        .into_iter()
        .filter(|(id, _)| context.viewer.sees_group(broker, id))
        .filter_map(|(id, _)| Some((id.clone(), streams.describe(&id)?)))
        .collect();
    if groups.is_empty() {
        return;
    }
    h.raw(
        "<h2>Streams groups</h2><table><tr><th>Group</th><th>State</th><th>Group epoch</th>\
           <th>Members</th><th>Tasks</th><th>Active tasks run</th><th>Standby tasks</th></tr>",
    );
    for (id, g) in &groups {
        let tasks: i64 = g.configured.tasks.values().map(|n| i64::from(*n)).sum();
        let run = |f: fn(&crate::groups::streams::Member) -> usize| {
            g.members.values().map(f).sum::<usize>() as i64
        };
        h.raw("<tr><td>").group_link(id);
        h.raw("</td><td>").text(g.state());
        h.raw("</td><td class=\"n\">").int(i64::from(g.epoch));
        h.raw("</td><td class=\"n\">").int(g.members.len() as i64);
        h.raw("</td><td class=\"n\">").int(tasks);
        h.raw("</td><td class=\"n\">")
            .int(run(|m| m.assigned.active.len()));
        h.raw("</td><td class=\"n\">")
            .int(run(|m| m.assigned.standby.len()));
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}

pub fn shares(context: &Context<'_>) -> Page {
    let broker = context.broker;
    let now = log_core::now_ms();
    let mut h = Html::default();
    let mut any = false;
    for group in broker.shares().groups() {
        if !context.viewer.sees_group(broker, &group) {
            continue;
        }
        any = true;
        h.raw("<h2>").share_link(&group).raw("</h2>");
        h.raw("<table><tr><th>Topic</th><th>Partition</th><th>Start</th><th>End</th><th>Available</th>\
               <th>Acquired</th><th>Archived</th><th>Oldest lock</th><th>Overload mode</th></tr>");
        let summaries: Vec<_> = broker
            .shares()
            .summaries(&broker.storage().log, &group)
            .into_iter()
            .filter(|s| context.viewer.sees_topic(broker, &s.topic))
            .collect();
        for s in &summaries {
            h.raw("<tr><td>")
                .name(&s.topic)
                .raw("</td><td class=\"n\">")
                .int(i64::from(s.partition));
            h.raw("</td><td class=\"n\">").int(s.start);
            h.raw("</td><td class=\"n\">").int(s.end);
            h.raw("</td><td class=\"n\">").int(s.available as i64);
            h.raw("</td><td class=\"n\">").int(s.acquired as i64);
            h.raw("</td><td class=\"n\">").int(s.archived as i64);
            h.raw("</td><td class=\"n\">")
                .seconds(s.oldest_lock_ms.map(|t| (now - t).max(0) as f64 / 1000.0));
            h.raw(if s.overloaded {
                "</td><td class=\"warn\">on"
            } else {
                "</td><td>off"
            });
            h.raw("</td></tr>");
        }
        h.raw("</table>");
        let tenants: Vec<_> = summaries
            .iter()
            .flat_map(|s| s.tenants.iter().map(move |t| (s, t)))
            .collect();
        if !tenants.is_empty() {
            h.raw(
                "<table><tr><th>Topic</th><th>Partition</th><th>Tenant</th><th>Available</th>\
                   <th>In flight</th><th>Oldest wait</th></tr>",
            );
            for (s, t) in tenants {
                h.raw("<tr><td>")
                    .name(&s.topic)
                    .raw("</td><td class=\"n\">")
                    .int(i64::from(s.partition));
                h.raw("</td>");
                tenant_cells(&mut h, t, now);
                h.raw("</tr>");
            }
            h.raw("</table>");
        }
    }
    if !any {
        h.raw("<p class=\"none\">No share groups.</p>");
    }
    Ok(page(context, "/shares", "Share groups", h))
}

/// A tenant's cells of a share partition: its name (or "other tenants"), records available
/// and in flight, and how long its oldest available record has waited.
fn tenant_cells(h: &mut Html, t: &task_queue::TenantStats, now: i64) {
    h.raw("<td>");
    match t.tenant.as_deref() {
        Some(tenant) => h.bytes(tenant, KEY_SHOWN),
        None => h.raw("<i>other tenants</i>"),
    };
    h.raw("</td><td class=\"n\">").int(t.available as i64);
    h.raw("</td><td class=\"n\">").int(t.in_flight as i64);
    h.raw("</td><td class=\"n\">").seconds(
        t.oldest_available_ms
            .map(|ts| (now - ts).max(0) as f64 / 1000.0),
    );
    h.raw("</td>");
}

pub fn limits(context: &Context<'_>) -> Page {
    let broker = context.broker;
    let mut h = Html::default();
    h.raw("<h2>Backlog bounds</h2>");
    let bounded: Vec<_> = visible_topics(context)
        .into_iter()
        .filter_map(|topic| {
            let bound = crate::backlog::Bound::of(&topic.config())?;
            let state = broker.backlog().measure(&topic, &bound);
            Some((topic, bound, state))
        })
        .collect();
    if bounded.is_empty() {
        h.raw("<p class=\"none\">No backlog-bounded topic (<code>lograil.backlog.*</code>).</p>");
    } else {
        h.raw(
            "<table><tr><th>Topic</th><th>Group</th><th>Backlog (records)</th><th>Max records</th>\
               <th>Oldest unread</th><th>Max age</th><th>State</th></tr>",
        );
        for (topic, bound, state) in &bounded {
            h.raw("<tr><td>")
                .name(topic.name())
                .raw("</td><td>")
                .name(&bound.group);
            h.raw("</td><td class=\"n\">").int(state.records);
            h.raw("</td><td class=\"n\">");
            match bound.max_records {
                Some(max) => h.int(max),
                None => h.raw("—"),
            };
            h.raw("</td><td class=\"n\">")
                .seconds(state.age_ms.map(|ms| ms as f64 / 1000.0));
            h.raw("</td><td class=\"n\">")
                .seconds(bound.max_age_ms.map(|ms| ms as f64 / 1000.0));
            h.raw(if state.is_over() {
                "</td><td class=\"warn\">over: "
            } else {
                "</td><td>"
            });
            h.text(&state.describe()).raw("</td></tr>");
        }
        h.raw("</table>");
    }
    h.raw("<h2>Quota throttles</h2>");
    if !context.viewer.sees_cluster(broker) {
        h.raw("<p class=\"none\">Needs DescribeConfigs on the cluster.</p>");
    } else {
        let throttles = broker.metrics().throttles();
        if throttles.is_empty() {
            h.raw("<p class=\"none\">No client has been throttled since the broker started.</p>");
        } else {
            h.raw("<table><tr><th>Client id</th><th>Throttled responses</th><th>Throttle time</th></tr>");
            for (client, responses, millis) in &throttles {
                h.raw("<tr><td>").name(client).raw("</td><td class=\"n\">");
                h.int(i64::try_from(*responses).unwrap_or(i64::MAX));
                h.raw("</td><td class=\"n\">")
                    .seconds(Some(*millis as f64 / 1000.0));
                h.raw("</td></tr>");
            }
            h.raw("</table>");
        }
    }
    Ok(page(
        context,
        "/limits",
        "Limits: backlog bounds and quotas",
        h,
    ))
}
