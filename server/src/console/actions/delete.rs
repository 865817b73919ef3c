//! Delete a partition's records below an offset: `kafka-delete-records`. The log start moves up
//! to the offset, durably; the segments wholly below it go. Done as a DeleteRecords request, so
//! it needs Delete on the topic.

use acl::{Operation, ResourceType};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::reset::summarize;
use super::{kafka, missing, number, required, Action, Outcome};
use crate::console::html::Html;
use crate::console::pages::Context;
use crate::console::Query;
use crate::http::Response;

#[derive(Debug)]
pub struct DeleteRecords {
    topic: String,
    partition: i32,
    /// The new log start: records below it go.
    offset: i64,
}

impl Action for DeleteRecords {
    const NAME: &'static str = "delete-records";
    const TITLE: &'static str = "Delete records";
    const BUTTON: &'static str = "Delete the records";

    fn parse(query: &Query) -> Result<Self, Response> {
        Ok(DeleteRecords {
            topic: required(query, "topic")?.to_string(),
            partition: number(query, "partition")?,
            offset: number(query, "offset")?,
        })
    }

    fn fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("topic", self.topic.clone()),
            ("partition", self.partition.to_string()),
            ("offset", self.offset.to_string()),
        ]
    }

    fn preview(&self, context: &Context<'_>, h: &mut Html) -> Result<(), Response> {
        let (broker, viewer) = (context.broker, context.viewer);
        if !viewer.sees_topic(broker, &self.topic) {
            return Err(missing("topic"));
        }
        let partition = broker
            .storage()
            .partition(&self.topic, self.partition)
            .ok_or_else(|| missing("partition"))?;
        if !viewer.may(broker, Operation::Delete, ResourceType::Topic, &self.topic) {
            return Err(Response::text(
                "403 Forbidden",
                "deleting records needs Delete on the topic, as DeleteRecords does",
            ));
        }
        let (start, end) = (partition.log_start_offset(), partition.log_end_offset());
        if self.offset < start || self.offset > end {
            return Err(Response::text(
                "400 Bad Request",
                &format!("the offset must be between the log start {start} and the log end {end}"),
            ));
        }
        h.raw("<p class=\"warn\">The records of ")
            .text(&self.topic)
            .raw(" [")
            .int(i64::from(self.partition))
            .raw("] from offset ")
            .int(start)
            .raw(" to ")
            .int(self.offset - 1)
            .raw(" (")
            .int(self.offset - start)
            .raw(" records) will be deleted: the log start moves from ")
            .int(start)
            .raw(" to ")
            .int(self.offset)
            .raw(". This cannot be undone.</p>");
        Ok(())
    }

    fn run(&self, context: &Context<'_>, h: &mut Html) -> Outcome {
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(StrBytes::from_string(self.topic.clone())))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(self.partition)
                    .with_offset(self.offset)])]);
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
                    .text(&self.topic)
                    .raw(" [")
                    .int(i64::from(self.partition))
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
        h.topic_link(&self.topic, "", &[], &self.topic).raw("</p>");
        summarize(&results.iter().map(|(p, c, _)| (*p, *c)).collect::<Vec<_>>())
    }
}
