//! A share group's page, `/shares/<id>`: its configs, members and, per share partition, the
//! records in its window (their states and delivery counts, what archived them), the tenants
//! waiting with fair turns, and the dead-letter topic its archived records go to. Read from the
//! share groups' own state (what ShareGroupDescribe and `lograil queue describe` read); a group
//! the viewer may not Describe is answered as one that does not exist, and partitions of topics
//! it may not Describe are left out.

use task_queue::{Outcome, RecordState};

use super::{page, tenant_cells, Context, Page};
use crate::console::html::Html;
use crate::http::Response;

/// Records of a window listed per partition.
const RECORDS_SHOWN: usize = 50;

pub fn share(context: &Context<'_>, id: &str) -> Page {
    let broker = context.broker;
    let shares = broker.shares();
    if !context.viewer.sees_group(broker, id) || !shares.groups().iter().any(|g| g == id) {
        return Err(Response::not_found("no such share group"));
    }
    let now = log_core::now_ms();
    let mut h = Html::default();
    settings(context, &mut h, id);
    members(context, &mut h, id);
    let windows: Vec<_> = shares
        .windows(&broker.storage().log, id, RECORDS_SHOWN)
        .into_iter()
        .filter(|w| context.viewer.sees_topic(broker, &w.topic))
        .collect();
    let summaries = shares.summaries(&broker.storage().log, id);
    if windows.is_empty() {
        h.raw("<p class=\"none\">No share partition yet: no member has fetched.</p>");
    }
    for w in &windows {
        h.raw("<h2>")
            .text(&w.topic)
            .raw(" [")
            .int(i64::from(w.partition))
            .raw("]</h2>");
        if let Some(s) = summaries
            .iter()
            .find(|s| s.topic == w.topic && s.partition == w.partition)
        {
            h.raw("<p>Window ").int(s.start).raw(" to ").int(s.end);
            h.raw(": ").int(s.available as i64).raw(" available, ");
            h.raw("").int(s.acquired as i64).raw(" acquired, ");
            h.raw("")
                .int(s.archived as i64)
                .raw(" archived. Overload mode ");
            h.raw(if s.overloaded { "on" } else { "off" }).raw(".</p>");
            tenants(&mut h, s, now);
        }
        h.raw("<table class=\"deliveries\"><tr><th>Deliveries so far</th>");
        for n in 0..w.deliveries.len() {
            h.raw("<th class=\"n\">").int(n as i64);
            if n + 1 == w.deliveries.len() {
                h.raw("+");
            }
            h.raw("</th>");
        }
        h.raw("</tr><tr><td>Records not finished</td>");
        for n in &w.deliveries {
            h.raw("<td class=\"n\">").int(*n as i64).raw("</td>");
        }
        h.raw("</tr></table>");
        if !w.archived.is_empty() {
            h.raw("<p>Archived in the window: ");
            for (i, (reason, n)) in w.archived.iter().enumerate() {
                if i > 0 {
                    h.raw(", ");
                }
                h.text(reason).raw(" ").int(*n as i64);
            }
            h.raw("</p>");
        }
        records(&mut h, &w.records, now);
    }
    Ok(page(context, "/shares", &format!("Share group {id}"), h))
}

/// The group's delivery limit, lock duration, record locks and dead-letter topic.
fn settings(context: &Context<'_>, h: &mut Html, id: &str) {
    let broker = context.broker;
    let config = broker.shares().config(id);
    h.raw("<p>Delivery limit ")
        .int(i64::from(config.delivery_limit))
        .raw(", lock duration ")
        .seconds(Some(config.lock_duration_ms as f64 / 1000.0))
        .raw(", at most ")
        .int(config.max_record_locks as i64)
        .raw(" records locked per partition. Dead letters: ");
    match &config.dead_letter_topic {
        Some(topic) if context.viewer.sees_topic(broker, topic) => {
            h.link(
                "/dead-letters/records",
                &[("topic", topic), ("partition", "0")],
                topic,
            );
        }
        Some(_) => {
            h.raw("a topic you may not see");
        }
        None => {
            h.raw("none (archived records stay archived)");
        }
    }
    h.raw(".</p>");
}

fn members(context: &Context<'_>, h: &mut Html, id: &str) {
    let broker = context.broker;
    let Some((epoch, members)) = broker.shares().members.describe(id) else {
        h.raw("<p class=\"none\">No members.</p>");
        return;
    };
    h.raw("<h2>Members</h2><p>Group epoch ")
        .int(i64::from(epoch))
        .raw(".</p>");
    h.raw("<table><tr><th>Member</th><th>Client id</th><th>Host</th><th>Epoch</th><th>Assigned</th></tr>");
    for (member_id, m) in &members {
        h.raw("<tr><td class=\"mono\">").name(member_id);
        h.raw("</td><td>").name(&m.client_id);
        h.raw("</td><td>").name(&m.client_host);
        h.raw("</td><td class=\"n\">")
            .int(i64::from(m.epoch))
            .raw("</td><td>");
        let mut assigned: Vec<String> = m
            .assignment
            .iter()
            .filter_map(|(topic_id, partition)| {
                let topic = broker.storage().log.topic_by_id(*topic_id)?;
                context
                    .viewer
                    .sees_topic(broker, topic.name())
                    .then(|| format!("{} [{partition}]", topic.name()))
            })
            .collect();
        assigned.sort();
        h.text(&assigned.join(", ")).raw("</td></tr>");
    }
    h.raw("</table>");
}

fn tenants(h: &mut Html, s: &crate::shares::admin::PartitionSummary, now: i64) {
    if s.tenants.is_empty() {
        return;
    }
    h.raw(
        "<table><tr><th>Tenant</th><th>Available</th><th>In flight</th><th>Oldest wait</th></tr>",
    );
    for t in &s.tenants {
        h.raw("<tr>");
        tenant_cells(h, t, now);
        h.raw("</tr>");
    }
    h.raw("</table>");
}

/// The window's first records not acknowledged: state, deliveries and how each ended.
fn records(h: &mut Html, records: &[(i64, task_queue::Entry)], now: i64) {
    if records.is_empty() {
        return;
    }
    h.raw(
        "<table class=\"window\"><tr><th>Offset</th><th>State</th><th>Deliveries</th>\
           <th>Past deliveries</th></tr>",
    );
    for (offset, entry) in records {
        h.raw("<tr><td class=\"n\">").int(*offset).raw("</td><td>");
        match &entry.state {
            RecordState::Available { not_before } if *not_before > now => {
                h.raw("available in ")
                    .seconds(Some((not_before - now) as f64 / 1000.0));
            }
            RecordState::Available { .. } => {
                h.raw("available");
            }
            RecordState::Acquired { member, until } => {
                h.raw("acquired by ").name(member).raw(", lock ends in ");
                h.seconds(Some((until - now).max(0) as f64 / 1000.0));
            }
            RecordState::Acknowledged => {
                h.raw("acknowledged");
            }
            RecordState::Archived(reason) => {
                h.raw("<span class=\"warn\">archived: ")
                    .text(reason.as_str())
                    .raw("</span>");
            }
        }
        h.raw("</td><td class=\"n\">")
            .int(i64::from(entry.deliveries))
            .raw("</td><td>");
        let outcomes: Vec<&str> = entry
            .history
            .iter()
            .map(|a| match a.outcome {
                Outcome::Accepted => "accepted",
                Outcome::Released => "released",
                Outcome::Rejected => "rejected",
                Outcome::TimedOut => "timed out",
                Outcome::SessionClosed => "session closed",
            })
            .collect();
        h.text(&outcomes.join(", ")).raw("</td></tr>");
    }
    h.raw("</table>");
}
