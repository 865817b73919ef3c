//! A consumer group's page, `/groups/<id>`: its protocol, state and epochs, each member (client
//! id, host, protocol, epochs, the partitions it owns and is giving up) and its lag per
//! partition. Read from the groups' own state (what DescribeGroups and ConsumerGroupDescribe
//! answer) and the scraper's lag; a group the viewer may not Describe is answered as one that
//! does not exist, and partitions of topics it may not Describe are left out.

use std::collections::BTreeMap;

use super::{page, visible_lag, Context, Page};
use crate::console::history::{History, Sample};
use crate::console::html::Html;
use crate::groups::consumer::{embedded, ConsumerGroup};
use crate::groups::GroupView;
use crate::http::Response;
use crate::scrape::Scraper;

pub fn group(context: &Context<'_>, scraper: &Scraper, history: &History, id: &str) -> Page {
    let broker = context.broker;
    let missing = || Response::not_found("no such group");
    if !context.viewer.sees_group(broker, id) {
        return Err(missing());
    }
    let groups = broker.groups();
    let mut h = Html::default();
    let at = log_core::now_ms();
    let mut seen = None;
    if let Some(group) = groups.consumer.describe(id) {
        consumer_group(context, &mut h, &group);
        seen = Some((group.state(), Some(group.epoch), group.members.len()));
    } else if let Some(group) = groups.classic.describe(id) {
        classic_group(context, &mut h, &group);
        seen = Some((group.state.name(), None, group.members.len()));
    } else if let Some(group) = groups.streams.describe(id) {
        seen = Some((group.state(), Some(group.epoch), group.members.len()));
        h.raw("<p>Streams group (KIP-1071), ")
            .text(group.state())
            .raw(", group epoch ")
            .int(i64::from(group.epoch))
            .raw(", ")
            .int(group.members.len() as i64)
            .raw(" members: its tasks are on the groups page.</p>");
    } else if groups.offsets.has_offsets(id) {
        h.raw("<p>No members: only committed offsets.</p>");
    } else {
        return Err(missing());
    }
    if let Some((state, epoch, members)) = seen {
        let sample = Sample {
            at,
            state,
            epoch,
            members,
        };
        state_history(&mut h, &history.note(id, sample));
    }
    h.raw("<h2>Lag</h2>");
    let lag: Vec<_> = visible_lag(context, scraper)
        .into_iter()
        .filter(|l| l.group == id)
        .collect();
    if lag.is_empty() {
        h.raw("<p class=\"none\">No committed offsets.</p>");
    } else {
        h.raw(
            "<table><tr><th>Topic</th><th>Partition</th><th>Committed</th><th>Log end</th>\
               <th>Lag (records)</th><th>Lag (seconds)</th><th>Time to drain</th></tr>",
        );
        for l in &lag {
            h.raw("<tr><td>").topic_link(&l.topic, "", &[], &l.topic);
            h.raw("</td><td class=\"n\">").text(&l.partition);
            h.raw("</td><td class=\"n\">").int(l.committed);
            h.raw("</td><td class=\"n\">").int(l.end);
            h.raw("</td><td class=\"n\">").int(l.records);
            h.raw("</td><td class=\"n\">").seconds(l.seconds);
            h.raw("</td><td class=\"n\">").seconds(l.time_to_drain());
            h.raw("</td></tr>");
        }
        h.raw("</table>");
    }
    if context.actions {
        reset_form(&mut h, id, &lag);
    }
    Ok(page(context, "/groups", &format!("Group {id}"), h))
}

/// The changes of state this console saw while the page was loaded.
fn state_history(h: &mut Html, changes: &[Sample]) {
    h.raw(
        "<h2>State history</h2><table class=\"history\"><tr><th>Seen at</th><th>State</th>\
           <th>Epoch</th><th>Members</th></tr>",
    );
    for change in changes.iter().rev() {
        h.raw("<tr><td>")
            .time(change.at)
            .raw("</td><td>")
            .text(change.state);
        h.raw("</td><td class=\"n\">");
        match change.epoch {
            Some(epoch) => h.int(i64::from(epoch)),
            None => h.raw("—"),
        };
        h.raw("</td><td class=\"n\">")
            .int(change.members as i64)
            .raw("</td></tr>");
    }
    h.raw(
        "</table><p>Changes seen while this page was open (each load samples the group; \
           it reloads every 5 s unless paused): the broker keeps no history of its own.</p>",
    );
}

/// The form that asks to reset the group's offsets on one of the topics it committed on
/// (`/actions/reset-offsets` shows what would change before anything does).
fn reset_form(h: &mut Html, id: &str, lag: &[crate::scrape::Lag]) {
    let mut topics: Vec<&str> = lag.iter().map(|l| l.topic.as_str()).collect();
    topics.dedup();
    if topics.is_empty() {
        return;
    }
    h.raw(
        "<h2>Reset offsets</h2><form method=\"get\" class=\"action\" \
           action=\"/actions/reset-offsets\"><input type=\"hidden\" name=\"group\" value=\"",
    )
    .text(id)
    .raw("\"><label>Topic <select name=\"topic\">");
    for topic in topics {
        h.raw("<option value=\"")
            .text(topic)
            .raw("\">")
            .name(topic)
            .raw("</option>");
    }
    h.raw(
        "</select></label> <label>partition <input name=\"partition\" type=\"number\" \
           min=\"0\" placeholder=\"all\"></label> <label>to <select name=\"to\">\
           <option value=\"earliest\">earliest</option><option value=\"latest\">latest</option>\
           <option value=\"time\">time (ms since the epoch)</option>\
           <option value=\"offset\">offset</option></select></label> <label>value \
           <input name=\"value\" type=\"number\"></label> \
           <button type=\"submit\">Review…</button></form>\
           <p>Only a group without members is reset: stop its consumers first.</p>",
    );
}

/// A KIP-848 group: epochs, assignor, and each member's epochs and partitions (topic ids
/// named through the group's subscribed topics).
fn consumer_group(context: &Context<'_>, h: &mut Html, group: &ConsumerGroup) {
    h.raw("<p>Consumer protocol (KIP-848), ")
        .text(group.state())
        .raw(", group epoch ")
        .int(i64::from(group.epoch));
    h.raw(", assignment epoch ")
        .int(i64::from(group.assignment_epoch))
        .raw(", assignor ")
        .text(&group.assignor)
        .raw(".</p>");
    let names: BTreeMap<_, _> = group
        .topics
        .iter()
        .map(|(name, (id, _))| (*id, name.as_str()))
        .collect();
    let named = |partitions: &std::collections::BTreeSet<(log_core::Uuid, i32)>| {
        partitions
            .iter()
            .filter_map(|(id, p)| Some((names.get(id)?.to_string(), *p)))
            .collect::<Vec<_>>()
    };
    h.raw(
        "<h2>Members</h2><table><tr><th>Member</th><th>Instance</th><th>Client id</th>\
           <th>Host</th><th>Protocol</th><th>Epoch</th><th>State</th><th>Owns</th>\
           <th>Giving up</th></tr>",
    );
    for (id, m) in &group.members {
        member_cells(
            h,
            id,
            m.instance_id.as_deref(),
            &m.client_id,
            &m.client_host,
        );
        h.raw(if m.classic.is_some() {
            "</td><td>classic"
        } else {
            "</td><td>consumer"
        });
        h.raw("</td><td class=\"n\">").int(i64::from(m.epoch));
        h.raw("</td><td>").text(&format!("{:?}", m.state));
        h.raw("</td><td>");
        partitions(context, h, &named(&m.assigned));
        h.raw("</td><td>");
        partitions(context, h, &named(&m.revoking));
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}

/// A classic group: protocol, state, and each member's assignment as the leader wrote it.
fn classic_group(context: &Context<'_>, h: &mut Html, group: &GroupView) {
    h.raw("<p>Classic protocol, ")
        .text(group.state.name())
        .raw(", protocol type ")
        .text(&group.protocol_type);
    h.raw(", assignor ").text(&group.protocol).raw(".</p>");
    h.raw(
        "<h2>Members</h2><table><tr><th>Member</th><th>Instance</th><th>Client id</th>\
           <th>Host</th><th>Owns</th></tr>",
    );
    for m in &group.members {
        member_cells(
            h,
            &m.member_id,
            m.instance_id.as_deref(),
            &m.client_id,
            &m.client_host,
        );
        h.raw("</td><td>");
        match embedded::assignment(&m.assignment) {
            Some(owned) if group.protocol_type == "consumer" => partitions(context, h, &owned),
            _ => h.raw("<span class=\"none\">not a consumer assignment</span>"),
        };
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}

fn member_cells(h: &mut Html, id: &str, instance: Option<&str>, client: &str, host: &str) {
    h.raw("<tr><td class=\"mono\">").name(id).raw("</td><td>");
    match instance {
        Some(instance) => h.name(instance),
        None => h.raw("—"),
    };
    h.raw("</td><td>").name(client).raw("</td><td>").name(host);
}

/// `topic [0, 1, 2]` per topic the viewer may see.
fn partitions<'h>(context: &Context<'_>, h: &'h mut Html, owned: &[(String, i32)]) -> &'h mut Html {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, p) in owned {
        by_topic.entry(topic).or_default().push(*p);
    }
    by_topic.retain(|topic, _| context.viewer.sees_topic(context.broker, topic));
    if by_topic.is_empty() {
        return h.raw("—");
    }
    for (topic, mut ps) in by_topic {
        ps.sort_unstable();
        let list: Vec<String> = ps.iter().map(i32::to_string).collect();
        h.raw("<div>")
            .name(topic)
            .raw(" [")
            .text(&list.join(", "))
            .raw("]</div>");
    }
    h
}
