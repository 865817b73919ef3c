//! DescribeUserScramCredentials, version 0 (KIP-554): each user's SCRAM mechanisms and
//! iterations (never a salt or key). Asked for every user (no list, or an empty one), every user with
//! credentials; asked for named users, RESOURCE_NOT_FOUND for one without, DUPLICATE_RESOURCE
//! for one named twice, as Kafka answers. `kafka-configs --describe --entity-type users` asks
//! for these beside user quotas.
//! Authorization: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED (top level).

use std::sync::Arc;

use acl::Operation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Access;

impl Handler for DescribeUserScramCredentialsRequest {
    const SERVED: (i16, i16) = (0, 0);
    type Needs = Arc<Access>;

    async fn handle(
        access: Self::Needs,
        request: DescribeUserScramCredentialsRequest,
        ctx: &RequestContext,
    ) -> DescribeUserScramCredentialsResponse {
        if !ctx.authorize_cluster(Operation::Describe) {
            return DescribeUserScramCredentialsResponse::default()
                .with_error_code(ResponseError::ClusterAuthorizationFailed.code());
        }
        let known = access.security.scram.describe();
        let info = |list: &Vec<(sasl::scram::Hash, u32)>| {
            list.iter()
                .map(|(hash, iterations)| {
                    CredentialInfo::default()
                        .with_mechanism(hash.code())
                        .with_iterations(i32::try_from(*iterations).unwrap_or(i32::MAX))
                })
                .collect()
        };
        // No list, or an empty one (what librdkafka sends): every user.
        let results = match request.users.filter(|users| !users.is_empty()) {
            None => known
                .iter()
                .map(|(user, list)| {
                    DescribeUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(user.clone()))
                        .with_credential_infos(info(list))
                })
                .collect(),
            Some(users) => {
                let names: Vec<&str> = users.iter().map(|u| u.name.as_str()).collect();
                let mut named = std::collections::HashMap::<&str, usize>::new();
                for name in &names {
                    *named.entry(name).or_default() += 1;
                }
                names
                    .iter()
                    .map(|name| {
                        let result = DescribeUserScramCredentialsResult::default()
                            .with_user(StrBytes::from_string(name.to_string()));
                        let (code, message) = if named.get(name).is_some_and(|n| *n > 1) {
                            (
                                ResponseError::DuplicateResource,
                                "the user is named twice".to_string(),
                            )
                        } else if let Some(list) = known.get(*name) {
                            return result.with_credential_infos(info(list));
                        } else {
                            (
                                ResponseError::ResourceNotFound,
                                "Attempt to describe a user credential that does not exist"
                                    .to_string(),
                            )
                        };
                        result
                            .with_error_code(code.code())
                            .with_error_message(Some(StrBytes::from_string(message)))
                    })
                    .collect()
            }
        };
        DescribeUserScramCredentialsResponse::default().with_results(results)
    }

    fn throttle_time_ms(response: &mut DescribeUserScramCredentialsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeUserScramCredentialsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code);
        r.results.iter().for_each(|u| f(u.error_code));
    }
}
