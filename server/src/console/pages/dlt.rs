//! The dead-letter pages: the dead-letter topics a viewer may read, and a page of one's
//! records with their headers interpreted (Spring Kafka's, lograil's and KIP-1191's).

use super::KEY_SHOWN;
use super::{page, visible_topics, Context, Page};
use crate::console::dead_letters::{self, HISTORY_SHOWN};
use crate::console::html::Html;
use crate::http::Response;

/// Bytes of a record value shown (the size of the whole follows).
const VALUE_SHOWN: usize = 1024;
/// Bytes of a header value shown.
const HEADER_SHOWN: usize = 256;
/// Headers of a record shown.
const HEADERS_SHOWN: usize = 32;

pub fn dead_letter_topics(context: &Context<'_>) -> Page {
    let mut h = Html::default();
    let topics: Vec<_> = visible_topics(context)
        .into_iter()
        .filter(|t| dead_letters::is_dead_letter_topic(t))
        .collect();
    if topics.is_empty() {
        h.raw("<p class=\"none\">No dead-letter topics (named <code>…-dlt</code> or <code>….DLT</code>, \
               or taking a share group's dead letters).</p>");
        return Ok(page(context, "/dead-letters", "Dead-letter topics", h));
    }
    h.raw("<table><tr><th>Topic</th><th>Partition</th><th>Records</th><th>Log start</th><th>Log end</th></tr>");
    for topic in &topics {
        for (index, p) in topic.partitions().iter().enumerate() {
            let index = index.to_string();
            h.raw("<tr><td>");
            h.link(
                "/dead-letters/records",
                &[("topic", topic.name()), ("partition", &index)],
                topic.name(),
            );
            h.raw("</td><td class=\"n\">").text(&index);
            h.raw("</td><td class=\"n\">")
                .int((p.log_end_offset() - p.log_start_offset()).max(0));
            h.raw("</td><td class=\"n\">").int(p.log_start_offset());
            h.raw("</td><td class=\"n\">").int(p.log_end_offset());
            h.raw("</td></tr>");
        }
    }
    h.raw("</table>");
    Ok(page(context, "/dead-letters", "Dead-letter topics", h))
}

/// A page of a dead-letter partition's records: the query read, the partition found (as not
/// found where the viewer may not see it), then each record with its headers interpreted.
pub fn dead_letter_records(context: &Context<'_>) -> Page {
    let RecordsQuery { name, index, from } = RecordsQuery::parse(context)?;
    let broker = context.broker;
    let missing = || Response::not_found("no such dead-letter topic partition");
    // A topic the viewer may not see is answered as one that does not exist.
    if !context.viewer.sees_topic(broker, name) {
        return Err(missing());
    }
    let topic = broker.storage().log.topic(name).ok_or_else(missing)?;
    if !dead_letters::is_dead_letter_topic(&topic) {
        return Err(missing());
    }
    let partition = broker
        .storage()
        .partition(name, index)
        .ok_or_else(missing)?;
    let title = format!("Dead letters of {name} [{index}]");
    let mut h = Html::default();
    if !context.viewer.reads_topic(broker, name) {
        h.raw("<p class=\"warn\">You may describe this topic but not read it: its records are not shown.</p>");
        return Ok(page(context, "/dead-letters", &title, h));
    }
    let read = dead_letters::read(&partition, from);
    h.raw("<p>Offsets from ")
        .int(from.max(partition.log_start_offset()));
    h.raw(" (log end ").int(partition.log_end_offset());
    h.raw("). Redrive with <code>lograil dlt redrive --from ")
        .text(name)
        .raw("</code>.</p>");
    if let Some(error) = &read.error {
        h.raw("<p class=\"warn\">Reading stopped: ")
            .text(error)
            .raw("</p>");
    }
    let p = index.to_string();
    for r in &read.records {
        dead_letter(&mut h, r);
        if context.actions {
            let offset = r.offset.to_string();
            h.raw("<p>");
            h.link(
                "/actions/redrive",
                &[("topic", name), ("partition", &p), ("offset", &offset)],
                "Redrive this record…",
            );
            h.raw("</p>");
        }
    }
    if read.records.is_empty() {
        h.raw("<p class=\"none\">No records from this offset.</p>");
    }
    if let Some(next) = read.next {
        let n = next.to_string();
        h.link(
            "/dead-letters/records",
            &[("topic", name), ("partition", &p), ("from", &n)],
            "next records →",
        );
    }
    Ok(page(context, "/dead-letters", &title, h))
}

/// Which records the page shows: `?topic=NAME&partition=N&from=OFFSET`.
struct RecordsQuery<'a> {
    name: &'a str,
    index: i32,
    from: i64,
}

impl<'a> RecordsQuery<'a> {
    /// The query's topic, partition (0 if absent) and first offset (0 if absent); 400 Bad
    /// Request for a missing topic or a number that does not parse.
    fn parse(context: &Context<'a>) -> Result<Self, Response> {
        let bad = |reason| Response::text("400 Bad Request", reason);
        let query = context.query;
        let name = query
            .get("topic")
            .ok_or_else(|| bad("name a topic: ?topic=NAME"))?;
        let index: i32 = query
            .get("partition")
            .unwrap_or("0")
            .parse()
            .map_err(|_| bad("partition must be a number"))?;
        let from: i64 = query
            .get("from")
            .unwrap_or("0")
            .parse()
            .map_err(|_| bad("from must be an offset"))?;
        Ok(RecordsQuery { name, index, from })
    }
}

/// One dead letter as a table: where it came from, why it failed, its key and value, its
/// attempt history and its headers.
fn dead_letter(h: &mut Html, r: &dead_letters::DeadLetter) {
    h.raw("<table class=\"record\"><tr><th>Offset</th><td class=\"n\">")
        .int(r.offset);
    h.raw("</td></tr><tr><th>Time</th><td>").time(r.timestamp);
    h.raw("</td></tr><tr><th>Origin</th><td>");
    match &r.origin {
        Some((t, p, o)) => {
            h.name(t).raw(" [").int(i64::from(*p)).raw("] @ ").int(*o);
        }
        None => {
            h.raw("<span class=\"none\">no origin headers</span>");
        }
    }
    h.raw("</td></tr><tr><th>Error class</th><td>");
    match &r.error_class {
        Some(class) => h.name(class),
        None => h.raw("—"),
    };
    h.raw("</td></tr><tr><th>Error message</th><td><pre>");
    match &r.error_message {
        Some(m) => h.bytes(m.as_bytes(), VALUE_SHOWN),
        None => h.raw("—"),
    };
    h.raw("</pre></td></tr><tr><th>Attempts</th><td class=\"n\">");
    match r.attempts {
        Some(a) => h.int(a),
        None => h.raw("—"),
    };
    h.raw("</td></tr><tr><th>Key</th><td class=\"mono\">");
    match &r.key {
        Some(k) => h.bytes(k, KEY_SHOWN),
        None => h.raw("<span class=\"none\">null</span>"),
    };
    h.raw("</td></tr><tr><th>Value</th><td class=\"mono\">");
    match &r.value {
        Some(v) => h.bytes(v, VALUE_SHOWN),
        None => h.raw("<span class=\"none\">null</span>"),
    };
    h.raw("</td></tr><tr><th>Attempt history</th><td>");
    attempt_history(h, &r.history);
    h.raw("</td></tr><tr><th>Headers</th><td>");
    headers(h, &r.headers);
    h.raw("</td></tr></table>");
}

/// lograil's attempt history header as a table (its first [`HISTORY_SHOWN`] attempts).
fn attempt_history(h: &mut Html, history: &Result<Vec<dead_letters::Attempt>, String>) {
    match history {
        Ok(history) if history.is_empty() => {
            h.raw("—");
        }
        Ok(history) => {
            h.raw("<table><tr><th>#</th><th>At</th><th>Read from</th><th>Consumer</th><th>Class</th><th>Message</th></tr>");
            for a in history.iter().take(HISTORY_SHOWN) {
                h.raw("<tr><td class=\"n\">").int(i64::from(a.attempt));
                h.raw("</td><td>")
                    .time(a.at)
                    .raw("</td><td>")
                    .name(&a.topic);
                h.raw(" [")
                    .int(i64::from(a.partition))
                    .raw("] @ ")
                    .int(a.offset);
                h.raw("</td><td>")
                    .name(&a.consumer)
                    .raw("</td><td>")
                    .name(&a.class);
                h.raw("</td><td>")
                    .bytes(a.message.as_bytes(), HEADER_SHOWN)
                    .raw("</td></tr>");
            }
            h.raw("</table>");
        }
        Err(e) => {
            h.raw("<span class=\"warn\">malformed history header: ")
                .text(e)
                .raw("</span>");
        }
    }
}

/// The record's headers (the first [`HEADERS_SHOWN`], then how many there are in all).
fn headers(h: &mut Html, headers: &[(String, Option<bytes::Bytes>)]) {
    for (name, value) in headers.iter().take(HEADERS_SHOWN) {
        h.raw("<div class=\"mono\">").name(name).raw(" = ");
        match value {
            Some(v) => h.bytes(v, HEADER_SHOWN),
            None => h.raw("<span class=\"none\">null</span>"),
        };
        h.raw("</div>");
    }
    if headers.len() > HEADERS_SHOWN {
        h.raw("<div class=\"cut\">… ")
            .int(headers.len() as i64)
            .raw(" headers in all</div>");
    }
}
