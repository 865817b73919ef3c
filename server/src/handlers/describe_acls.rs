//! DescribeAcls, versions 1–3: the ACLs the filter matches (`acl::AclBindingFilter`: null and
//! ANY match anything; pattern type ANY the exact name under any pattern type, MATCH every ACL
//! that applies to the name), grouped by resource pattern as Kafka groups them. The request
//! needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED); without an authorizer it
//! is SECURITY_DISABLED, as in Kafka; a filter with UNKNOWN or unknown codes INVALID_REQUEST.

use std::sync::Arc;

use acl::{AclBinding, AclBindingFilter, Operation};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{DescribeAclsRequest, DescribeAclsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Access;

impl Handler for DescribeAclsRequest {
    const SERVED: (i16, i16) = (1, 3);
    type Needs = Arc<Access>;

    async fn handle(
        access: Self::Needs,
        request: DescribeAclsRequest,
        ctx: &RequestContext,
    ) -> DescribeAclsResponse {
        let fail = |error: ResponseError, message: String| {
            DescribeAclsResponse::default()
                .with_error_code(error.code())
                .with_error_message(Some(StrBytes::from_string(message)))
        };
        if !ctx.authorize_cluster(Operation::Describe) {
            return fail(
                ResponseError::ClusterAuthorizationFailed,
                "DescribeAcls needs DESCRIBE on the cluster".to_string(),
            );
        }
        if !access.authorizer.is_enabled() {
            return fail(
                ResponseError::SecurityDisabled,
                "No Authorizer is configured on the broker".to_string(),
            );
        }
        let filter = AclBindingFilter::from_codes(
            (
                request.resource_type_filter,
                request.resource_name_filter.as_deref(),
                request.pattern_type_filter,
            ),
            (
                request.principal_filter.as_deref(),
                request.host_filter.as_deref(),
                request.operation,
                request.permission_type,
            ),
        );
        match filter {
            Ok(filter) => DescribeAclsResponse::default()
                .with_resources(resources(access.authorizer.describe(&filter))),
            Err(e) => fail(ResponseError::InvalidRequest, e.to_string()),
        }
    }

    fn throttle_time_ms(response: &mut DescribeAclsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeAclsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}

/// Sorted bindings as the response's resources, each with its entries.
fn resources(bindings: Vec<AclBinding>) -> Vec<DescribeAclsResource> {
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    let mut last = None;
    for AclBinding { pattern, entry } in bindings {
        let description = AclDescription::default()
            .with_principal(StrBytes::from_string(entry.principal))
            .with_host(StrBytes::from_string(entry.host))
            .with_operation(entry.operation.code())
            .with_permission_type(entry.permission.code());
        match resources.last_mut() {
            Some(resource) if last.as_ref() == Some(&pattern) => resource.acls.push(description),
            _ => {
                resources.push(
                    DescribeAclsResource::default()
                        .with_resource_type(pattern.resource_type.code())
                        .with_resource_name(StrBytes::from_string(pattern.name.clone()))
                        .with_pattern_type(pattern.pattern_type.code())
                        .with_acls(vec![description]),
                );
                last = Some(pattern);
            }
        }
    }
    resources
}
