//! DeleteAcls, versions 1–3: each filter (matched as DescribeAcls matches) deletes the ACLs it
//! matches, and its result lists them; all filters are applied in one durable write
//! (KAFKA_STORAGE_ERROR for each if it fails). The request needs ALTER on the cluster (else
//! every filter is CLUSTER_AUTHORIZATION_FAILED); without an authorizer every filter is
//! SECURITY_DISABLED, as in Kafka; a filter with UNKNOWN or unknown codes INVALID_REQUEST.
//! Filters are not capped in number: only a principal with ALTER on the cluster gets this far.

use std::sync::Arc;

use acl::{AclBindingFilter, AclError, Operation};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{DeleteAclsRequest, DeleteAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Access;

impl Handler for DeleteAclsRequest {
    const SERVED: (i16, i16) = (1, 3);
    type Needs = Arc<Access>;

    async fn handle(
        access: Self::Needs,
        request: DeleteAclsRequest,
        ctx: &RequestContext,
    ) -> DeleteAclsResponse {
        let every = |error: ResponseError, message: &str| {
            let result = failure(error, message.to_string());
            DeleteAclsResponse::default().with_filter_results(vec![result; request.filters.len()])
        };
        if !ctx.authorize_cluster(Operation::Alter) {
            return every(
                ResponseError::ClusterAuthorizationFailed,
                "DeleteAcls needs ALTER on the cluster",
            );
        }
        if !access.authorizer.is_enabled() {
            return every(
                ResponseError::SecurityDisabled,
                "No Authorizer is configured.",
            );
        }
        let checked: Vec<Result<AclBindingFilter, AclError>> = request
            .filters
            .iter()
            .map(|f| {
                AclBindingFilter::from_codes(
                    (
                        f.resource_type_filter,
                        f.resource_name_filter.as_deref(),
                        f.pattern_type_filter,
                    ),
                    (
                        f.principal_filter.as_deref(),
                        f.host_filter.as_deref(),
                        f.operation,
                        f.permission_type,
                    ),
                )
            })
            .collect();
        let valid: Vec<AclBindingFilter> = checked.iter().filter_map(|c| c.clone().ok()).collect();
        let owner = access.clone();
        let deleted = match crate::blocking::spawn(move || owner.authorizer.delete(&valid)).await {
            Ok(Ok(deleted)) => Ok(deleted),
            Ok(Err(e)) => {
                tracing::error!(error = %e, "ACLs not saved");
                Err((ResponseError::KafkaStorageError, e.to_string()))
            }
            Err(e) => {
                tracing::error!(error = %e, "DeleteAcls task failed");
                Err((ResponseError::UnknownServerError, e.to_string()))
            }
        };
        let mut deleted = deleted.map(Vec::into_iter);
        let results = checked
            .into_iter()
            .map(|c| match (c, &mut deleted) {
                (Err(e), _) => failure(ResponseError::InvalidRequest, e.to_string()),
                (Ok(_), Err((error, message))) => failure(*error, message.clone()),
                (Ok(_), Ok(deleted)) => {
                    let matching = deleted.next().unwrap_or_default();
                    for binding in &matching {
                        tracing::info!(acl = %binding, principal = %ctx.principal, "ACL deleted");
                    }
                    DeleteAclsFilterResult::default().with_matching_acls(
                        matching
                            .into_iter()
                            .map(|b| {
                                DeleteAclsMatchingAcl::default()
                                    .with_resource_type(b.pattern.resource_type.code())
                                    .with_resource_name(StrBytes::from_string(b.pattern.name))
                                    .with_pattern_type(b.pattern.pattern_type.code())
                                    .with_principal(StrBytes::from_string(b.entry.principal))
                                    .with_host(StrBytes::from_string(b.entry.host))
                                    .with_operation(b.entry.operation.code())
                                    .with_permission_type(b.entry.permission.code())
                            })
                            .collect(),
                    )
                }
            })
            .collect();
        DeleteAclsResponse::default().with_filter_results(results)
    }

    fn throttle_time_ms(response: &mut DeleteAclsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DeleteAclsResponse, f: &mut dyn FnMut(i16)) {
        for result in &r.filter_results {
            f(result.error_code);
            result.matching_acls.iter().for_each(|m| f(m.error_code));
        }
    }
}

fn failure(error: ResponseError, message: String) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(error.code())
        .with_error_message(Some(StrBytes::from_string(message)))
}
