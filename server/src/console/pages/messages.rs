//! The message browser, `/topics/<name>/messages`: a bounded page of a topic's records, of
//! one partition (`?partition=N`) or of all of them merged by time (`?partition=all`), from
//! an offset, a time or the end, optionally those of one key, values as text, pretty JSON or
//! hex, transaction markers and aborted records marked. Records are shown only to a viewer
//! that may Read the topic, as a Fetch would be.

use log_core::batch::DecodedRecord;
use log_core::{AbortedTxn, Partition};

use super::topic::find;
use super::{page, Context, Page, KEY_SHOWN};
use crate::console::html::Html;
use crate::console::records::{self, PAGE_RECORDS};
use crate::http::Response;

mod merged;

/// Bytes of a record value shown (the size of the whole follows).
const VALUE_SHOWN: usize = 4096;
/// Bytes of a header value shown.
const HEADER_SHOWN: usize = 256;
/// Headers of a record shown.
const HEADERS_SHOWN: usize = 32;
/// Largest value parsed as JSON for the pretty view.
const JSON_MAX: usize = 1 << 20;

/// How values are shown.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Text,
    Json,
    Hex,
}

impl Format {
    pub(super) const ALL: [(Format, &'static str); 3] = [
        (Format::Text, "text"),
        (Format::Json, "json"),
        (Format::Hex, "hex"),
    ];

    pub(super) fn name(self) -> &'static str {
        Format::ALL
            .iter()
            .find(|(f, _)| *f == self)
            .map_or("text", |(_, n)| *n)
    }
}

/// What the message browser shows: `?partition=N` (0 if absent) or `partition=all`, one of
/// `offset=O` (one partition), `at=P:O,…` (all: each partition's position),
/// `time=MS` (the first record at or after it) or `from=end` (the last page) (else the log
/// start), `key=K` (only records with that key), `format=text|json|hex`.
pub(super) struct Browse<'a> {
    /// `None`: all partitions, merged by time.
    index: Option<i32>,
    pub(super) start: Start,
    pub(super) key: Option<&'a str>,
    pub(super) format: Format,
}

pub(super) enum Start {
    Offset(i64),
    /// Each partition's position (all partitions), by index.
    Positions(Vec<(i32, i64)>),
    Time(i64),
    End,
    Beginning,
}

impl<'a> Browse<'a> {
    fn parse(context: &Context<'a>) -> Result<Browse<'a>, Response> {
        let bad = |reason| Response::text("400 Bad Request", reason);
        let query = context.query;
        let index = match query.get("partition").unwrap_or("0") {
            "all" => None,
            n => Some(
                n.parse()
                    .map_err(|_| bad("partition must be a number or all"))?,
            ),
        };
        let start = match (query.get("offset"), query.get("time"), query.get("from")) {
            (Some(_), _, _) if index.is_none() => {
                return Err(bad(
                    "offset needs one partition: give at=P:O,… with partition=all",
                ))
            }
            (Some(o), _, _) => {
                Start::Offset(o.parse().map_err(|_| bad("offset must be a number"))?)
            }
            _ if index.is_none() && query.get("at").is_some() => Start::Positions(
                merged::parse_positions(query.get("at").unwrap_or_default())
                    .ok_or_else(|| bad("at is partition:offset pairs, comma-separated"))?,
            ),
            (_, Some(t), _) => Start::Time(
                t.parse()
                    .map_err(|_| bad("time must be milliseconds since the epoch"))?,
            ),
            (_, _, Some("end")) => Start::End,
            (_, _, Some(_)) => return Err(bad("from takes only end")),
            _ => Start::Beginning,
        };
        let format = match query.get("format") {
            None => Format::Text,
            Some(f) => Format::ALL
                .iter()
                .find(|(_, n)| *n == f)
                .map(|(f, _)| *f)
                .ok_or_else(|| bad("format is text, json or hex"))?,
        };
        Ok(Browse {
            index,
            start,
            key: query.get("key"),
            format,
        })
    }

    /// The query of a link to another page of the same browse, from `offset` (one
    /// partition's, or all partitions' positions as `at` takes them), in `format`.
    pub(super) fn link_query<'b>(
        &'b self,
        index: &'b str,
        offset: Option<&'b str>,
        format: Format,
    ) -> Vec<(&'b str, &'b str)> {
        let mut query = vec![("partition", index)];
        if let Some(offset) = offset {
            query.push((if index == "all" { "at" } else { "offset" }, offset));
        }
        if let Some(key) = self.key {
            query.push(("key", key));
        }
        query.push(("format", format.name()));
        query
    }
}

pub fn messages(context: &Context<'_>, name: &str) -> Page {
    let topic = find(context, name)?;
    let browse = Browse::parse(context)?;
    let title = match browse.index {
        Some(index) => format!("Records of {name} [{index}]"),
        None => format!("Records of {name}, all partitions merged by time"),
    };
    let partition = match browse.index {
        Some(index) => Some(
            usize::try_from(index)
                .ok()
                .and_then(|i| topic.partitions().get(i).cloned())
                .ok_or_else(|| Response::not_found("no such partition"))?,
        ),
        None => None,
    };
    let mut h = Html::default();
    if !context.viewer.reads_topic(context.broker, name) {
        h.raw("<p class=\"warn\">You may describe this topic but not read it: its records are not shown.</p>");
        return Ok(page(context, "/topics", &title, h));
    }
    match partition {
        Some(partition) => one(&mut h, name, &browse, &partition)?,
        None => merged::all(&mut h, name, &topic, &browse)?,
    }
    Ok(page(context, "/topics", &title, h))
}

/// A page of one partition.
fn one(
    h: &mut Html,
    name: &str,
    browse: &Browse<'_>,
    partition: &Partition,
) -> Result<(), Response> {
    let end = partition.log_end_offset();
    let from = match browse.start {
        Start::Offset(o) => o,
        Start::Time(t) => match partition.offset_for_timestamp(t) {
            Ok(found) => found.map_or(end, |(offset, _)| offset),
            Err(e) => return Err(Response::text("500 Internal Server Error", &e.to_string())),
        },
        Start::End => end - PAGE_RECORDS as i64,
        Start::Beginning | Start::Positions(_) => partition.log_start_offset(),
    }
    .max(partition.log_start_offset());
    let key = browse.key.map(str::as_bytes);
    let read = records::read(partition, from, |r| {
        key.is_none_or(|k| r.key.as_deref() == Some(k))
    });
    let aborted = partition.aborted_transactions(from, read.next.unwrap_or(end));
    navigation(h, name, browse, from, partition);
    if let Some(error) = &read.error {
        h.raw("<p class=\"warn\">Reading stopped: ")
            .text(error)
            .raw("</p>");
    }
    if read.records.is_empty() {
        h.raw("<p class=\"none\">No records from this offset.</p>");
    } else {
        h.raw(
            "<table class=\"records\"><tr><th>Offset</th><th>Time</th><th>Key</th>\
               <th>Headers</th><th>Value</th></tr>",
        );
        for r in &read.records {
            record(h, None, r, &aborted, browse.format);
        }
        h.raw("</table>");
    }
    if let Some(next) = read.next {
        let next = next.to_string();
        h.topic_link(
            name,
            "/messages",
            &browse.link_query(&index_text(browse), Some(next.as_str()), browse.format),
            "next records →",
        );
    }
    Ok(())
}

/// The `partition` of a browse's links: its index, or `all`.
pub(super) fn index_text(browse: &Browse<'_>) -> String {
    browse.index.map_or("all".to_string(), |i| i.to_string())
}

/// Where the page starts, and links to the start, the end and the other formats.
fn navigation(h: &mut Html, name: &str, browse: &Browse<'_>, from: i64, p: &Partition) {
    let index = index_text(browse);
    h.raw("<p>From offset ").int(from);
    h.raw(" of ")
        .int(p.log_start_offset())
        .raw(" – ")
        .int(p.log_end_offset());
    if let Some(key) = browse.key {
        h.raw(", key ").text(key);
    }
    h.raw(". At most ").int(PAGE_RECORDS as i64);
    h.raw(
        " records a page; <code>?offset=</code>, <code>?time=</code> (ms since the epoch) \
           and <code>?key=</code> in the address choose them.</p><p>",
    );
    let mut all = vec![("partition", "all")];
    all.extend(browse.key.map(|k| ("key", k)));
    h.topic_link(name, "/messages", &all, "all partitions");
    h.raw(" · ");
    let start = p.log_start_offset().to_string();
    h.topic_link(
        name,
        "/messages",
        &browse.link_query(&index, Some(start.as_str()), browse.format),
        "from the start",
    );
    h.raw(" · ");
    let mut last = browse.link_query(&index, None, browse.format);
    last.push(("from", "end"));
    h.topic_link(name, "/messages", &last, "the last records");
    format_links(h, name, browse, &from.to_string());
    h.raw("</p>");
}

/// Links to this page (from `here`: an offset, or `at`'s positions) in the other formats.
fn format_links(h: &mut Html, name: &str, browse: &Browse<'_>, here: &str) {
    let index = index_text(browse);
    for (format, label) in Format::ALL {
        h.raw(" · ");
        if format == browse.format {
            h.raw("<b>").text(label).raw("</b>");
        } else {
            let query = browse.link_query(&index, Some(here), format);
            h.topic_link(name, "/messages", &query, label);
        }
    }
}

/// One record as a row (after its partition's cell when given): a transaction marker as what
/// it is, an aborted record marked.
pub(super) fn record(
    h: &mut Html,
    partition: Option<i32>,
    r: &DecodedRecord,
    aborted: &[AbortedTxn],
    format: Format,
) {
    let was_aborted = r.transactional
        && !r.control
        && aborted.iter().any(|a| {
            a.producer_id == r.producer_id && (a.first_offset..=a.last_offset).contains(&r.offset)
        });
    h.raw(if was_aborted {
        "<tr class=\"aborted\"><td class=\"n\">"
    } else {
        "<tr><td class=\"n\">"
    });
    if let Some(partition) = partition {
        h.int(i64::from(partition)).raw("</td><td class=\"n\">");
    }
    h.int(r.offset)
        .raw("</td><td>")
        .time(r.timestamp)
        .raw("</td>");
    if r.control {
        // A marker's key: version (2 bytes), then 0 abort or 1 commit (2 bytes).
        let kind = r
            .key
            .as_deref()
            .and_then(|k| k.get(2..4))
            .map(|t| i16::from_be_bytes([t[0], t[1]]));
        h.raw(match kind {
            Some(1) => "<td colspan=\"3\" class=\"marker\">transaction marker: commit</td></tr>",
            Some(0) => "<td colspan=\"3\" class=\"marker\">transaction marker: abort</td></tr>",
            _ => "<td colspan=\"3\" class=\"marker\">control record</td></tr>",
        });
        return;
    }
    h.raw("<td class=\"mono\">");
    match &r.key {
        Some(k) => h.bytes(k, KEY_SHOWN),
        None => h.raw("<span class=\"none\">null</span>"),
    };
    h.raw("</td><td>");
    for (name, value) in r.headers.iter().take(HEADERS_SHOWN) {
        h.raw("<div class=\"mono\">").name(name).raw(" = ");
        match value {
            Some(v) => h.bytes(v, HEADER_SHOWN),
            None => h.raw("<span class=\"none\">null</span>"),
        };
        h.raw("</div>");
    }
    if r.headers.len() > HEADERS_SHOWN {
        h.raw("<div class=\"cut\">… ")
            .int(r.headers.len() as i64)
            .raw(" headers in all</div>");
    }
    h.raw("</td><td class=\"mono\">");
    if was_aborted {
        h.raw("<span class=\"warn\">aborted</span> ");
    }
    match &r.value {
        None => h.raw("<span class=\"none\">null</span>"),
        Some(v) => value(h, v, format),
    };
    h.raw("</td></tr>");
}

fn value<'h>(h: &'h mut Html, v: &[u8], format: Format) -> &'h mut Html {
    match format {
        Format::Text => h.bytes(v, VALUE_SHOWN),
        Format::Hex => h.raw("<pre>").hex(v, VALUE_SHOWN).raw("</pre>"),
        Format::Json => {
            let pretty = (v.len() <= JSON_MAX)
                .then(|| serde_json::from_slice::<serde_json::Value>(v).ok())
                .flatten()
                .and_then(|json| serde_json::to_string_pretty(&json).ok());
            match pretty {
                Some(pretty) => h
                    .raw("<pre>")
                    .bytes(pretty.as_bytes(), VALUE_SHOWN)
                    .raw("</pre>"),
                None => h
                    .raw("<span class=\"none\">not JSON:</span> ")
                    .bytes(v, VALUE_SHOWN),
            }
        }
    }
}
