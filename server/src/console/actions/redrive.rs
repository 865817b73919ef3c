//! Redrive one dead letter: copy it back to the partition it came from (its key, value and
//! headers, without the retry chain's and the dead-letter queue's, with
//! `lograil.redrive.of`), as `lograil dlt redrive` does, and in the same ledger
//! (`<dlt>-redrive-log`: an `intent` before the copy, `done` after), so that neither redrives
//! a record the other did. Reading the dead letter needs Read on its topic (a Fetch's check);
//! the copy is a Produce (Write on the target), the ledger's entries too (Write on it), and a
//! ledger not there yet is made with CreateTopics (Create), each run as the viewer.

use acl::{Operation, ResourceType};
use bytes::Bytes;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{CreateTopicsRequest, ProduceRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use log_core::batch::{self, HeadedRecord};
use vocabulary::headers::{is_chain_header, REDRIVE_OF};

use super::{kafka, missing, Action, Outcome, RecordAt};
use crate::console::dead_letters::{self, DeadLetter};
use crate::console::html::Html;
use crate::console::pages::{Context, KEY_SHOWN};
use crate::console::{records, Query};
use crate::http::Response;

#[derive(Debug)]
/// The dead letter at the offset.
pub struct Redrive(RecordAt);

/// What a redrive writes.
struct Plan {
    letter: DeadLetter,
    to: String,
    partition: i32,
    /// `<dlt>/<partition>/<offset>`: the ledger's key and the copy's `lograil.redrive.of`.
    id: String,
    ledger: String,
}

impl Action for Redrive {
    const NAME: &'static str = "redrive";
    const TITLE: &'static str = "Redrive a dead letter";
    const BUTTON: &'static str = "Redrive it";

    fn parse(query: &Query) -> Result<Self, Response> {
        RecordAt::parse(query).map(Redrive)
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        self.0.fields()
    }

    fn preview(&self, context: &Context<'_>, h: &mut Html) -> Result<(), Response> {
        let plan = self.plan(context)?;
        let (broker, viewer) = (context.broker, context.viewer);
        if !viewer.may(broker, Operation::Write, ResourceType::Topic, &plan.to) {
            return Err(Response::text(
                "403 Forbidden",
                "redriving needs Write on the original topic, as Produce does",
            ));
        }
        h.raw("<p>The dead letter at offset ")
            .int(self.0.offset)
            .raw(" of ")
            .text(&self.0.topic)
            .raw(" [")
            .int(i64::from(self.0.partition))
            .raw("] is copied to ")
            .text(&plan.to)
            .raw(" [")
            .int(i64::from(plan.partition))
            .raw("], once (ledger ")
            .text(&plan.ledger)
            .raw(").</p><table><tr><th>Key</th><td>");
        match &plan.letter.key {
            Some(key) => h.bytes(key, KEY_SHOWN),
            None => h.raw("<i>null</i>"),
        };
        h.raw("</td></tr><tr><th>Value</th><td>");
        match &plan.letter.value {
            Some(value) => h.size(value.len() as u64),
            None => h.raw("<i>null</i>"),
        };
        h.raw("</td></tr><tr><th>Error</th><td>")
            .text(plan.letter.error_class.as_deref().unwrap_or("—"))
            .raw("</td></tr></table>");
        Ok(())
    }

    fn run(&self, context: &Context<'_>, h: &mut Html) -> Outcome {
        let done = self.plan(context).and_then(|plan| {
            let offset = write(context, &plan)?;
            Ok((plan, offset))
        });
        match done {
            Ok((plan, offset)) => {
                h.raw("<p>Redriven to ")
                    .text(&plan.to)
                    .raw(" [")
                    .int(i64::from(plan.partition))
                    .raw("] at offset ")
                    .int(offset)
                    .raw(".</p>");
                Outcome {
                    summary: format!("done: {}/{} offset {offset}", plan.to, plan.partition),
                    denied: false,
                }
            }
            Err(refused) => Outcome::refused(h, &refused),
        }
    }
}

impl Redrive {
    /// The dead letter and where it goes, or why it cannot be redriven.
    fn plan(&self, context: &Context<'_>) -> Result<Plan, Response> {
        let (broker, viewer) = (context.broker, context.viewer);
        let storage = broker.storage();
        let topic = storage
            .log
            .topic(&self.0.topic)
            .filter(|t| {
                viewer.sees_topic(broker, t.name()) && dead_letters::is_dead_letter_topic(t)
            })
            .ok_or_else(|| missing("dead-letter topic"))?;
        let partition = storage
            .partition(topic.name(), self.0.partition)
            .ok_or_else(|| missing("partition"))?;
        if !viewer.reads_topic(broker, &self.0.topic) {
            return Err(Response::text(
                "403 Forbidden",
                "redriving needs Read on the dead-letter topic, as Fetch does",
            ));
        }
        let letter = dead_letters::read(&partition, self.0.offset)
            .records
            .into_iter()
            .next()
            .filter(|r| r.offset == self.0.offset)
            .ok_or_else(|| missing("dead letter at that offset"))?;
        let conflict = |reason: String| Response::text("409 Conflict", &reason);
        let Some((to, origin_partition, _)) = letter.origin.clone() else {
            return Err(conflict(
                "the record names no original topic: redrive it with lograil dlt redrive --to"
                    .into(),
            ));
        };
        let target = storage
            .log
            .topic(&to)
            .filter(|t| viewer.sees_topic(broker, t.name()))
            .ok_or_else(|| conflict(format!("its original topic {to} does not exist")))?;
        if usize::try_from(origin_partition).map_or(true, |p| p >= target.partitions().len()) {
            return Err(conflict(format!(
                "its original partition {origin_partition} is not one of {to}'s: redrive it \
                 with lograil dlt redrive --to"
            )));
        }
        let id = format!("{}/{}/{}", self.0.topic, self.0.partition, self.0.offset);
        let ledger = format!("{}-redrive-log", self.0.topic);
        if let Some(at) = ledger_done(context, &ledger, &id) {
            return Err(conflict(format!(
                "it was redriven already (ledger {ledger}, at {at} ms since the epoch)"
            )));
        }
        Ok(Plan {
            letter,
            to,
            partition: origin_partition,
            id,
            ledger,
        })
    }
}

/// The ledger's intent, the copy, the ledger's done: the copy's offset.
fn write(context: &Context<'_>, plan: &Plan) -> Result<i64, Response> {
    ensure_ledger(context, &plan.ledger)?;
    let entry = |state: &str| HeadedRecord {
        key: Some(Bytes::from(plan.id.clone())),
        value: Some(Bytes::from(
            serde_json::json!({"state": state, "to": plan.to, "at": log_core::now_ms()})
                .to_string(),
        )),
        timestamp: log_core::now_ms(),
        headers: Vec::new(),
    };
    produce(context, &plan.ledger, 0, entry("intent"))?;
    let letter = &plan.letter;
    let copy = HeadedRecord {
        key: letter.key.clone(),
        value: letter.value.clone(),
        timestamp: log_core::now_ms(),
        headers: letter
            .headers
            .iter()
            .filter(|(name, _)| !is_chain_header(name))
            .cloned()
            .chain([(REDRIVE_OF.to_string(), Some(Bytes::from(plan.id.clone())))])
            .collect(),
    };
    let offset = produce(context, &plan.to, plan.partition, copy)?;
    produce(context, &plan.ledger, 0, entry("done"))?;
    Ok(offset)
}

/// When the ledger says `id` was redriven (its `done` entry's time), if it does. Reads the
/// whole ledger (one partition of small entries), as `lograil dlt redrive` does.
fn ledger_done(context: &Context<'_>, ledger: &str, id: &str) -> Option<i64> {
    let partition = context.broker.storage().partition(ledger, 0)?;
    let mut at = partition.log_start_offset();
    loop {
        let page = records::read(&partition, at, |r| r.key.as_deref() == Some(id.as_bytes()));
        for record in &page.records {
            let value = record.value.as_deref().unwrap_or_default();
            let Ok(entry) = serde_json::from_slice::<serde_json::Value>(value) else {
                continue;
            };
            if entry["state"] == "done" {
                return Some(entry["at"].as_i64().unwrap_or(record.timestamp));
            }
        }
        // A page that did not move on (nothing readable at `at`) ends the search.
        at = page.next.filter(|next| *next > at)?;
    }
}

/// Makes the ledger topic (one partition) unless it exists, as the viewer.
fn ensure_ledger(context: &Context<'_>, ledger: &str) -> Result<(), Response> {
    if context.broker.storage().log.topic(ledger).is_some() {
        return Ok(());
    }
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(ledger.to_string())))
            .with_num_partitions(1)
            .with_replication_factor(-1)]);
    let response = kafka::call(context.broker, context.viewer, 5, request);
    let code = response.topics.first().map_or(0, |t| t.error_code);
    // Made meanwhile: as good.
    if code == 0 || code == ResponseError::TopicAlreadyExists.code() {
        return Ok(());
    }
    Err(refusal(
        code,
        &format!("creating the ledger topic {ledger}"),
    ))
}

/// Appends `record` to `topic` [`partition`] as the viewer (acks=all): its offset.
fn produce(
    context: &Context<'_>,
    topic: &str,
    partition: i32,
    record: HeadedRecord,
) -> Result<i64, Response> {
    let records = batch::build_with_headers(&[record]);
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])]);
    let response = kafka::call(context.broker, context.viewer, 9, request);
    let answer = response
        .responses
        .first()
        .and_then(|t| t.partition_responses.first());
    match answer {
        Some(p) if p.error_code == 0 => Ok(p.base_offset),
        Some(p) => Err(refusal(p.error_code, &format!("producing to {topic}"))),
        None => Err(Response::text(
            "500 Internal Server Error",
            &format!("producing to {topic}: no answer"),
        )),
    }
}

/// A Kafka error answer as a refusal: 403 for an authorization failure.
fn refusal(code: i16, doing: &str) -> Response {
    let status = if kafka::is_denied(code) {
        "403 Forbidden"
    } else {
        "500 Internal Server Error"
    };
    Response::text(status, &format!("{doing}: {}", kafka::error_name(code)))
}
