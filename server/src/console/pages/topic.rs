//! A topic's page, `/topics/<name>`: its partitions, damage, cleaner, the groups reading it,
//! its configs with their source (its records are the message browser's, `messages.rs`). A
//! topic the viewer may not Describe is answered as one that does not exist.

use std::sync::Arc;

use log_core::{Partition, Topic};

use super::{page, page_number, visible_lag, Context, Page};
use crate::console::html::Html;
use crate::console::PAGE_PARTITIONS;
use crate::http::Response;
use crate::scrape::Scraper;
use crate::topic_config;

/// The topic named `name`, if the viewer may see it.
pub(super) fn find(context: &Context<'_>, name: &str) -> Result<Arc<Topic>, Response> {
    let missing = || Response::not_found("no such topic");
    if !context.viewer.sees_topic(context.broker, name) {
        return Err(missing());
    }
    context.broker.storage().log.topic(name).ok_or_else(missing)
}

pub fn topic(context: &Context<'_>, scraper: &Scraper, name: &str) -> Page {
    let topic = find(context, name)?;
    let page_no = page_number(context.query)?;
    let partitions = topic.partitions();
    let mut h = Html::default();
    let records: i64 = partitions
        .iter()
        .map(|p| (p.log_end_offset() - p.log_start_offset()).max(0))
        .sum();
    h.raw("<p>Partitions: ").int(partitions.len() as i64);
    h.raw(" · records: ").int(records);
    h.raw(" · on disk: ")
        .size(partitions.iter().map(|p| p.size_bytes()).sum());
    h.raw(" · ");
    h.topic_link(name, "/messages", &[], "browse its records")
        .raw("</p>");
    partitions_table(&mut h, name, partitions, page_no);
    if context.actions {
        h.raw(
            "<form method=\"get\" class=\"action\" action=\"/actions/delete-records\">\
               <input type=\"hidden\" name=\"topic\" value=\"",
        )
        .text(name)
        .raw(
            "\"><label>Delete the records of partition <input name=\"partition\" \
                   type=\"number\" min=\"0\" required></label> <label>below offset \
                   <input name=\"offset\" type=\"number\" min=\"0\" required></label> \
                   <button type=\"submit\">Review…</button></form>",
        );
    }
    damage_table(&mut h, partitions);
    if topic.config().cleanup.compact {
        cleaner_table(&mut h, partitions);
    }
    h.raw("<h2>Groups reading it</h2>");
    let lag: Vec<_> = visible_lag(context, scraper)
        .into_iter()
        .filter(|l| l.topic == name)
        .collect();
    if lag.is_empty() {
        h.raw("<p class=\"none\">No consumer group has committed an offset on it.</p>");
    } else {
        h.raw(
            "<table><tr><th>Group</th><th>Partition</th><th>Committed</th>\
               <th>Lag (records)</th><th>Lag (seconds)</th></tr>",
        );
        for l in &lag {
            h.raw("<tr><td>").name(&l.group);
            h.raw("</td><td class=\"n\">").text(&l.partition);
            h.raw("</td><td class=\"n\">").int(l.committed);
            h.raw("</td><td class=\"n\">").int(l.records);
            h.raw("</td><td class=\"n\">").seconds(l.seconds);
            h.raw("</td></tr>");
        }
        h.raw("</table>");
    }
    configs_table(context, &mut h, &topic);
    Ok(page(context, "/topics", &format!("Topic {name}"), h))
}

fn partitions_table(h: &mut Html, name: &str, partitions: &[Arc<Partition>], page_no: usize) {
    h.raw(
        "<h2>Partitions</h2><table><tr><th>Partition</th><th>Log start</th><th>Log end</th>\
           <th>Last stable</th><th>Records</th><th>On disk</th><th>Segments</th>\
           <th>Damaged offsets</th><th></th></tr>",
    );
    let skip = page_no.saturating_mul(PAGE_PARTITIONS);
    for (index, p) in partitions
        .iter()
        .enumerate()
        .skip(skip)
        .take(PAGE_PARTITIONS)
    {
        let damaged: i64 = p
            .damage()
            .iter()
            .map(|(_, d)| d.end_offset.saturating_sub(d.first_offset))
            .sum();
        h.raw("<tr><td class=\"n\">").int(index as i64);
        h.raw("</td><td class=\"n\">").int(p.log_start_offset());
        h.raw("</td><td class=\"n\">").int(p.log_end_offset());
        h.raw("</td><td class=\"n\">").int(p.last_stable_offset());
        h.raw("</td><td class=\"n\">")
            .int((p.log_end_offset() - p.log_start_offset()).max(0));
        h.raw("</td><td class=\"n\">").size(p.size_bytes());
        h.raw("</td><td class=\"n\">").int(p.segment_count() as i64);
        h.raw(if damaged > 0 {
            "</td><td class=\"n warn\">"
        } else {
            "</td><td class=\"n\">"
        });
        h.int(damaged).raw("</td><td>");
        let index = index.to_string();
        h.topic_link(name, "/messages", &[("partition", &index)], "records");
        h.raw("</td></tr>");
    }
    h.raw("</table>");
    if partitions.len() > skip + PAGE_PARTITIONS {
        let next = (page_no + 1).to_string();
        h.topic_link(name, "", &[("page", &next)], "next partitions →");
    }
}

fn damage_table(h: &mut Html, partitions: &[Arc<Partition>]) {
    let damage: Vec<_> = partitions
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.damage().into_iter().map(move |d| (i, d)))
        .collect();
    if damage.is_empty() {
        return;
    }
    h.raw(
        "<h2>Damaged ranges</h2><table><tr><th>Partition</th><th>Offsets</th>\
           <th>File</th><th>Reason</th></tr>",
    );
    for (index, (path, d)) in &damage {
        h.raw("<tr><td class=\"n\">").int(*index as i64);
        h.raw("</td><td class=\"n\">")
            .int(d.first_offset)
            .raw(" – ");
        h.int(d.end_offset - 1).raw("</td><td>");
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        h.text(&file.unwrap_or_default()).raw("</td><td>");
        h.text(&d.reason.to_string()).raw("</td></tr>");
    }
    h.raw("</table>");
}

fn cleaner_table(h: &mut Html, partitions: &[Arc<Partition>]) {
    let now = log_core::now_ms();
    h.raw(
        "<h2>Cleaner</h2><table><tr><th>Partition</th><th>Dirty ratio</th>\
           <th>Cleaned up to</th><th>Runs</th><th>Records removed</th><th>Last pass</th></tr>",
    );
    for (index, p) in partitions.iter().enumerate().take(PAGE_PARTITIONS) {
        let dirty = p.dirtiness(now);
        let stats = p.cleaner_stats();
        h.raw("<tr><td class=\"n\">").int(index as i64);
        h.raw("</td><td class=\"n\">")
            .text(&format!("{:.2}", dirty.ratio()));
        h.raw("</td><td class=\"n\">").int(dirty.first_dirty);
        h.raw("</td><td class=\"n\">")
            .int(i64::try_from(stats.runs).unwrap_or(i64::MAX));
        h.raw("</td><td class=\"n\">")
            .int(i64::try_from(stats.records_removed).unwrap_or(i64::MAX));
        match (&stats.last_error, stats.last_run_ms) {
            (Some(error), _) => h.raw("</td><td class=\"warn\">failed: ").text(error),
            (None, Some(at)) => h.raw("</td><td>").time(at),
            (None, None) => h.raw("</td><td>—"),
        };
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}

/// Its Kafka configs with their source, and what lograil does with each it does not act on
/// (DescribeConfigs' view, [`topic_config::describe`]).
fn configs_table(context: &Context<'_>, h: &mut Html, topic: &Topic) {
    let defaults = context.broker.storage().topic_defaults();
    h.raw(
        "<h2>Configs</h2><table><tr><th>Name</th><th>Value</th><th>Source</th>\
           <th>In lograil</th></tr>",
    );
    for d in topic_config::describe(&topic.config(), &defaults) {
        h.raw("<tr><td>")
            .text(d.name)
            .raw("</td><td class=\"mono\">");
        h.text(&d.value).raw(if d.overridden {
            "</td><td><b>set on the topic</b></td><td>"
        } else {
            "</td><td>default</td><td>"
        });
        match topic_config::documentation(d.name) {
            Some(note) => h.text(&note),
            None => h.raw("acted on"),
        };
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}
