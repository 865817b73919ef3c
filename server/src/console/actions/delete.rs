//! Delete a partition's records below an offset: `kafka-delete-records`. The log start moves up
//! to the offset, durably; the segments wholly below it go. Done as a DeleteRecords request, so
//! it needs Delete on the topic.

use acl::{Operation, ResourceType};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::{kafka, missing, Action, Outcome, RecordAt};
use crate::console::html::Html;
use crate::console::pages::Context;
use crate::console::Query;
use crate::http::Response;

#[derive(Debug)]
/// The records of the partition below the offset go: the offset is its new log start.
pub struct DeleteRecords(RecordAt);

impl Action for DeleteRecords {
    const NAME: &'static str = "delete-records";
    const TITLE: &'static str = "Delete records";
    const BUTTON: &'static str = "Delete the records";

    fn parse(query: &Query) -> Result<Self, Response> {
        RecordAt::parse(query).map(DeleteRecords)
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        self.0.fields()
    }

    fn preview(&self, context: &Context<'_>, h: &mut Html) -> Result<(), Response> {
        let (broker, viewer) = (context.broker, context.viewer);
        if !viewer.sees_topic(broker, &self.0.topic) {
            return Err(missing("topic"));
        }
        let partition = broker
            .storage()
            .partition(&self.0.topic, self.0.partition)
            .ok_or_else(|| missing("partition"))?;
        if !viewer.may(
            broker,
            Operation::Delete,
            ResourceType::Topic,
            &self.0.topic,
        ) {
            return Err(Response::text(
                "403 Forbidden",
                "deleting records needs Delete on the topic, as DeleteRecords does",
            ));
        }
        let (start, end) = (partition.log_start_offset(), partition.log_end_offset());
        if self.0.offset < start || self.0.offset > end {
            return Err(Response::text(
                "400 Bad Request",
                &format!("the offset must be between the log start {start} and the log end {end}"),
            ));
        }
        h.raw("<p class=\"warn\">The records of ")
            .text(&self.0.topic)
            .raw(" [")
            .int(i64::from(self.0.partition))
            .raw("] from offset ")
            .int(start)
            .raw(" to ")
            .int(self.0.offset - 1)
            .raw(" (")
            .int(self.0.offset - start)
            .raw(" records) will be deleted: the log start moves from ")
            .int(start)
            .raw(" to ")
            .int(self.0.offset)
            .raw(". This cannot be undone.</p>");
        Ok(())
    }

    fn run(&self, context: &Context<'_>, h: &mut Html) -> Outcome {
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.0.topic.clone())))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(self.0.partition)
                    .with_offset(self.0.offset)])]);
        let response = kafka::call(context.broker, context.viewer, 2, request);
        let results: Vec<(i32, i16, i64)> = response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| (p.partition_index, p.error_code, p.low_watermark))
            .collect();
        for (_, code, low_watermark) in &results {
            if *code == 0 {
                h.raw("<p>Deleted: the log start of ")
                    .text(&self.0.topic)
                    .raw(" [")
                    .int(i64::from(self.0.partition))
                    .raw("] is now ")
                    .int(*low_watermark)
                    .raw(".</p>");
            } else {
                h.raw("<p class=\"warn\">Not done: ")
                    .text(&kafka::error_name(*code))
                    .raw("</p>");
            }
        }
        h.raw("<p>");
        h.topic_link(&self.0.topic, "", &[], &self.0.topic)
            .raw("</p>");
        Outcome::of_codes(&results.iter().map(|(p, c, _)| (*p, *c)).collect::<Vec<_>>())
    }
}
