//! CreateAcls, versions 1–3 (v0, before PREFIXED patterns, is gone from Kafka 4 and from
//! kafka-protocol). The request needs ALTER on the cluster (else every creation is
//! CLUSTER_AUTHORIZATION_FAILED); without an authorizer every creation is SECURITY_DISABLED,
//! as in Kafka. Each creation is checked as Kafka checks it (`acl::AclBinding::from_codes`:
//! no ANY or MATCH, a `Type:name` principal, `kafka-cluster` for CLUSTER, a name) and a bad
//! one is INVALID_REQUEST with the reason; the good ones are added in one durable write
//! (KAFKA_STORAGE_ERROR for each if it fails). An ACL that exists already succeeds and is
//! kept once.

use std::sync::Arc;

use acl::{AclBinding, AclError, Operation};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::{CreateAclsRequest, CreateAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Access;

impl Handler for CreateAclsRequest {
    const SERVED: (i16, i16) = (1, 3);
    type Needs = Arc<Access>;

    async fn handle(
        access: Self::Needs,
        request: CreateAclsRequest,
        ctx: &RequestContext,
    ) -> CreateAclsResponse {
        let every = |error: ResponseError, message: &str| {
            let result = failure(error, message.to_string());
            CreateAclsResponse::default().with_results(vec![result; request.creations.len()])
        };
        if !ctx.authorize_cluster(Operation::Alter) {
            return every(
                ResponseError::ClusterAuthorizationFailed,
                "CreateAcls needs ALTER on the cluster",
            );
        }
        if !access.authorizer.is_enabled() {
            return every(
                ResponseError::SecurityDisabled,
                "No Authorizer is configured.",
            );
        }
        let checked: Vec<Result<AclBinding, AclError>> = request
            .creations
            .iter()
            .map(|c| {
                AclBinding::from_codes(
                    (c.resource_type, &c.resource_name, c.resource_pattern_type),
                    (&c.principal, &c.host, c.operation, c.permission_type),
                )
            })
            .collect();
        let valid: Vec<AclBinding> = checked.iter().filter_map(|c| c.clone().ok()).collect();
        let stored = if valid.is_empty() {
            Ok(())
        } else {
            let owner = access.clone();
            match crate::blocking::spawn(move || owner.authorizer.create(valid)).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => {
                    tracing::error!(error = %e, "ACLs not saved");
                    Err((ResponseError::KafkaStorageError, e.to_string()))
                }
                Err(e) => {
                    tracing::error!(error = %e, "CreateAcls task failed");
                    Err((ResponseError::UnknownServerError, e.to_string()))
                }
            }
        };
        let results = checked
            .into_iter()
            .map(|c| match (c, &stored) {
                (Err(e), _) => failure(ResponseError::InvalidRequest, e.to_string()),
                (Ok(binding), Ok(())) => {
                    tracing::info!(acl = %binding, principal = %ctx.principal, "ACL created");
                    AclCreationResult::default()
                }
                (Ok(_), Err((error, message))) => failure(*error, message.clone()),
            })
            .collect();
        CreateAclsResponse::default().with_results(results)
    }

    fn throttle_time_ms(response: &mut CreateAclsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &CreateAclsResponse, f: &mut dyn FnMut(i16)) {
        r.results.iter().for_each(|c| f(c.error_code))
    }
}

fn failure(error: ResponseError, message: String) -> AclCreationResult {
    AclCreationResult::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}
