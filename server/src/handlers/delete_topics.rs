//! DeleteTopics, versions 1–5 (by name). The topic's files are deleted with it, and its
//! idempotent-producer state is forgotten.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors;
use super::RequestContext;
use crate::broker::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    request: DeleteTopicsRequest,
    _: &RequestContext,
) -> Option<DeleteTopicsResponse> {
    let owner = broker.clone();
    let responses = crate::blocking::spawn(move || {
        request
            .topic_names
            .into_iter()
            .map(|name| {
                let result = DeletableTopicResult::default().with_name(Some(name.clone()));
                if Broker::is_internal(&name) {
                    return result
                        .with_error_code(ResponseError::InvalidTopicException.code())
                        .with_error_message(Some(StrBytes::from_static_str(
                            "internal topics cannot be deleted",
                        )));
                }
                match owner.log.delete_topic(&name) {
                    Ok(()) => {
                        owner.producers.forget_topic(&name);
                        owner.metrics.forget_topic(&name);
                        tracing::info!(topic = %name.as_str(), "deleted topic");
                        result
                    }
                    Err(e) => result
                        .with_error_code(errors::topic(&e).code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                }
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    // Fetches long-polling a deleted partition wake to find it gone and answer
    // UNKNOWN_TOPIC_OR_PARTITION now, as Kafka completes them, not when their wait runs out.
    broker.appended.notify_waiters();
    Some(DeleteTopicsResponse::default().with_responses(responses))
}
