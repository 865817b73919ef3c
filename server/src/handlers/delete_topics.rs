//! DeleteTopics, versions 1–5 (by name). The topic's files are deleted with it, and its
//! idempotent-producer state is forgotten. Authorization: DELETE on each topic, else
//! TOPIC_AUTHORIZATION_FAILED (whether it exists or not).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse};
use kafka_protocol::protocol::StrBytes;

use super::bounds::Counts;
use super::errors;
use super::Handler;
use super::RequestContext;
use crate::broker::Storage;
use crate::metrics::Metrics;

impl Handler for DeleteTopicsRequest {
    const SERVED: (i16, i16) = (1, 5);
    type Needs = (Arc<Storage>, Arc<Metrics>);

    fn counts(&self) -> Counts {
        Counts {
            topics: self.topics.len() + self.topic_names.len(),
            ..Counts::default()
        }
    }

    async fn handle(
        (storage, metrics): Self::Needs,
        request: DeleteTopicsRequest,
        ctx: &RequestContext,
    ) -> DeleteTopicsResponse {
        let (owner, metrics, ctx) = (storage.clone(), metrics.clone(), ctx.clone());
        let responses = crate::blocking::map_each(
            request.topic_names,
            move |name| {
                let result = DeletableTopicResult::default().with_name(Some(name.clone()));
                if !ctx.authorize_topic(Operation::Delete, &name) {
                    return result.with_error_code(ResponseError::TopicAuthorizationFailed.code());
                }
                if crate::broker::Storage::is_internal(&name) {
                    return result
                        .with_error_code(ResponseError::InvalidTopicException.code())
                        .with_error_message(Some(StrBytes::from_static_str(
                            "internal topics cannot be deleted",
                        )));
                }
                match owner.log.delete_topic(&name) {
                    Ok(()) => {
                        owner.producers.forget_topic(&name);
                        metrics.forget_topic(&name);
                        tracing::info!(topic = %name.as_str(), "deleted topic");
                        result
                    }
                    Err(e) => result
                        .with_error_code(errors::topic(&e).code())
                        .with_error_message(Some(StrBytes::from_string(e.to_string()))),
                }
            },
            |name| {
                DeletableTopicResult::default()
                    .with_name(Some(name))
                    .with_error_code(ResponseError::UnknownServerError.code())
            },
        )
        .await;
        // Fetches long-polling a deleted partition wake to find it gone and answer
        // UNKNOWN_TOPIC_OR_PARTITION now, as Kafka completes them, not when their wait runs out.
        storage.appended.notify_waiters();
        DeleteTopicsResponse::default().with_responses(responses)
    }

    fn throttle_time_ms(response: &mut DeleteTopicsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DeleteTopicsResponse, f: &mut dyn FnMut(i16)) {
        r.responses.iter().for_each(|t| f(t.error_code))
    }
}
