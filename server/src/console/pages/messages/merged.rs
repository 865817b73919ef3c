//! The message browser over all of a topic's partitions (`?partition=all`): each partition is
//! read from its position (`at=P:O,…` from the page before; else the start, a time or the
//! end) within an equal share of the page's log budget ([`records::READ_BYTES`], at least
//! 64 KiB each), and the records are merged by time: the [`PAGE_RECORDS`] earliest (the
//! latest with `from=end`). The next page's link carries each partition's position. A topic
//! of more than [`MERGED`] partitions is browsed one partition at a time.

use log_core::batch::DecodedRecord;
use log_core::{AbortedTxn, Partition, Topic};

use super::{format_links, index_text, record, Browse, Format, Start};
use crate::console::html::Html;
use crate::console::records::{self, PAGE_RECORDS, READ_BYTES};
use crate::http::Response;

/// Partitions browsed together at most (their positions fit in a link).
pub const MERGED: usize = 100;
/// Least share of the log budget one partition is read within.
const LEAST_SHARE: usize = 64 << 10;

/// `P:O,P:O,…`; `None` when malformed.
pub(super) fn parse_positions(at: &str) -> Option<Vec<(i32, i64)>> {
    at.split(',')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (p, o) = pair.split_once(':')?;
            Some((p.parse().ok()?, o.parse().ok()?))
        })
        .collect()
}

/// What was read of one partition.
struct Read {
    index: i32,
    /// Where its reading began.
    from: i64,
    /// The records kept (by the key filter) that the page took.
    kept: usize,
    /// Where its reading stopped (the log end when it reached it).
    read_to: i64,
    end: i64,
}

/// Writes a page of `topic`'s records over all its partitions.
pub(super) fn all(
    h: &mut Html,
    name: &str,
    topic: &Topic,
    browse: &Browse<'_>,
) -> Result<(), Response> {
    let partitions = topic.partitions();
    if partitions.len() > MERGED {
        h.raw("<p class=\"warn\">This topic has ")
            .int(partitions.len() as i64)
            .raw(" partitions: more than ")
            .int(MERGED as i64)
            .raw(" are browsed one at a time (")
            .topic_link(name, "/messages", &[("partition", "0")], "partition 0")
            .raw(").</p>");
        return Ok(());
    }
    let budget = (READ_BYTES / partitions.len().max(1)).max(LEAST_SHARE);
    let key = browse.key.map(str::as_bytes);
    let mut rows: Vec<(i32, DecodedRecord)> = Vec::new();
    let mut reads = Vec::with_capacity(partitions.len());
    let mut aborted = Vec::with_capacity(partitions.len());
    for (i, partition) in partitions.iter().enumerate() {
        let index = i32::try_from(i).unwrap_or(i32::MAX);
        let end = partition.log_end_offset();
        let from = position(partition, index, &browse.start)?;
        let read = records::read_within(partition, from, budget, |r| {
            key.is_none_or(|k| r.key.as_deref() == Some(k))
        });
        if let Some(error) = &read.error {
            h.raw("<p class=\"warn\">Reading partition ")
                .int(i64::from(index))
                .raw(" stopped: ")
                .text(error)
                .raw("</p>");
        }
        let read_to = read.next.unwrap_or(end);
        aborted.push(partition.aborted_transactions(from, read_to));
        reads.push(Read {
            index,
            from,
            kept: read.records.len(),
            read_to,
            end,
        });
        rows.extend(read.records.into_iter().map(|r| (index, r)));
    }
    rows.sort_by_key(|(index, r)| (r.timestamp, *index, r.offset));
    let latest = matches!(browse.start, Start::End);
    let shown: Vec<(i32, DecodedRecord)> = if latest {
        rows.split_off(rows.len().saturating_sub(PAGE_RECORDS))
    } else {
        rows.truncate(PAGE_RECORDS);
        rows
    };
    let next = next_positions(&reads, &shown);
    navigation(h, name, browse, &reads);
    table(h, &shown, &aborted, browse.format);
    let more = reads
        .iter()
        .zip(&next)
        .any(|(read, (_, at))| *at < read.end);
    if more && !latest {
        let at = positions_text(&next);
        let query = browse.link_query("all", Some(at.as_str()), browse.format);
        h.topic_link(name, "/messages", &query, "next records →");
    }
    Ok(())
}

/// Where `partition` (number `index`) is read from for `start`.
fn position(partition: &Partition, index: i32, start: &Start) -> Result<i64, Response> {
    let (first, end) = (partition.log_start_offset(), partition.log_end_offset());
    let at = match start {
        Start::Positions(at) => at
            .iter()
            .find(|(p, _)| *p == index)
            .map_or(first, |(_, o)| *o),
        Start::Time(t) => match partition.offset_for_timestamp(*t) {
            Ok(found) => found.map_or(end, |(offset, _)| offset),
            Err(e) => return Err(Response::text("500 Internal Server Error", &e.to_string())),
        },
        Start::End => end - PAGE_RECORDS as i64,
        Start::Beginning | Start::Offset(_) => first,
    };
    Ok(at.max(first))
}

/// The records shown, each after its partition, with its partition's aborted transactions.
fn table(
    h: &mut Html,
    shown: &[(i32, DecodedRecord)],
    aborted: &[Vec<AbortedTxn>],
    format: Format,
) {
    if shown.is_empty() {
        h.raw("<p class=\"none\">No records from these positions.</p>");
        return;
    }
    h.raw(
        "<table class=\"records\"><tr><th>Partition</th><th>Offset</th><th>Time</th>\
           <th>Key</th><th>Headers</th><th>Value</th></tr>",
    );
    for (index, r) in shown {
        let aborted = usize::try_from(*index).map_or(&[][..], |i| &aborted[i][..]);
        record(h, Some(*index), r, aborted, format);
    }
    h.raw("</table>");
}

/// Where each partition's next page begins: after its last record shown; where its reading
/// stopped when all it kept were shown (what the key filter left out is not read again);
/// where it began when none of its kept records were shown.
fn next_positions(reads: &[Read], shown: &[(i32, DecodedRecord)]) -> Vec<(i32, i64)> {
    reads
        .iter()
        .map(|read| {
            let mine: Vec<i64> = shown
                .iter()
                .filter(|(i, _)| *i == read.index)
                .map(|(_, r)| r.offset)
                .collect();
            let at = if mine.len() == read.kept {
                read.read_to
            } else {
                mine.iter().max().map_or(read.from, |last| last + 1)
            };
            (read.index, at)
        })
        .collect()
}

fn positions_text(positions: &[(i32, i64)]) -> String {
    positions
        .iter()
        .map(|(p, o)| format!("{p}:{o}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the page shows, and links to the start, the end, one partition and the formats.
fn navigation(h: &mut Html, name: &str, browse: &Browse<'_>, reads: &[Read]) {
    h.raw("<p>All ")
        .int(reads.len() as i64)
        .raw(" partitions, merged by time");
    if let Some(key) = browse.key {
        h.raw(", key ").text(key);
    }
    h.raw(". At most ").int(PAGE_RECORDS as i64);
    h.raw(
        " records a page; <code>?time=</code> (ms since the epoch) and <code>?key=</code> in \
           the address choose them.</p><p>",
    );
    let index = index_text(browse);
    h.topic_link(
        name,
        "/messages",
        &browse.link_query(&index, None, browse.format),
        "from the start",
    );
    h.raw(" · ");
    let mut last = browse.link_query(&index, None, browse.format);
    last.push(("from", "end"));
    h.topic_link(name, "/messages", &last, "the last records");
    h.raw(" · ");
    h.topic_link(name, "/messages", &[("partition", "0")], "one partition");
    let here: Vec<(i32, i64)> = reads.iter().map(|r| (r.index, r.from)).collect();
    format_links(h, name, browse, &positions_text(&here));
    h.raw("</p>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_pairs_or_refused() {
        assert_eq!(parse_positions("0:12,1:40"), Some(vec![(0, 12), (1, 40)]));
        assert_eq!(parse_positions(""), Some(vec![]));
        assert_eq!(parse_positions("0:x"), None);
        assert_eq!(parse_positions("0-1"), None);
        assert_eq!(positions_text(&[(0, 12), (1, 40)]), "0:12,1:40");
    }
}
