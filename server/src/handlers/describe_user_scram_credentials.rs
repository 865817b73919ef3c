//! DescribeUserScramCredentials, version 0: lograil has no authentication, so no user has
//! SCRAM credentials: asked for every user, the list is empty; asked for named users, each is
//! RESOURCE_NOT_FOUND, as Kafka answers for a user without credentials. Served because Kafka's
//! `kafka-configs --describe --entity-type users` asks for credentials beside user quotas.
//! Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED (top level).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Broker;

impl Handler for DescribeUserScramCredentialsRequest {
    const SERVED: (i16, i16) = (0, 0);

    async fn handle(
        broker: &Arc<Broker>,
        request: DescribeUserScramCredentialsRequest,
        ctx: &RequestContext,
    ) -> DescribeUserScramCredentialsResponse {
        if !ctx.authorize_cluster(broker, Operation::Describe) {
            return DescribeUserScramCredentialsResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        }
        let results = request
            .users
            .unwrap_or_default()
            .into_iter()
            .map(|user| {
                DescribeUserScramCredentialsResult::default()
                    .with_user(user.name)
                    .with_error_code(ResponseError::ResourceNotFound.code())
                    .with_error_message(Some(StrBytes::from_static_str(
                        "no SCRAM credentials: lograil has no authentication",
                    )))
            })
            .collect();
        DescribeUserScramCredentialsResponse::default().with_results(results)
    }

    fn throttle_time_ms(response: &mut DescribeUserScramCredentialsResponse) -> &mut i32 {
        &mut response.throttle_time_ms
    }

    fn each_error(r: &DescribeUserScramCredentialsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.results.iter().for_each(|u| f(u.error_code));
    }
}
