//! DeleteTopics, versions 1–5 (by name). The topic's files are deleted with it, and its
//! idempotent-producer state is forgotten.

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use super::errors;
use crate::broker::Broker;

pub async fn handle(
    broker: &Arc<Broker>,
    request: DeleteTopicsRequest,
    _version: i16,
) -> Option<DeleteTopicsResponse> {
    let owner = broker.clone();
    let responses = tokio::task::spawn_blocking(move || {
        request
            .topic_names
            .into_iter()
            .map(|name| {
                let result = DeletableTopicResult::default().with_name(Some(name.clone()));
                match owner.log.delete_topic(&name) {
                    Ok(()) => {
                        owner.producers.forget_topic(&name);
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
    Some(DeleteTopicsResponse::default().with_responses(responses))
}
