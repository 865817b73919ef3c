//! DescribeCluster, versions 0–2: the cluster id (the same one Metadata gives, stable across
//! restarts), this node as the only broker and as the controller. Endpoint type 2 (KIP-919,
//! asking for controllers) is answered with this node too: it is its own controller. Fenced
//! brokers do not exist. KIP-430: the cluster's authorized operations when asked (0 without
//! DESCRIBE on the cluster; every cluster operation without an authorizer), as Kafka. As Kafka,
//! the request itself needs no ACL: nodes and the cluster id are what Metadata gives anyone.

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, DescribeClusterResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::config::BrokerConfig;

const BROKERS: i8 = 1;
const CONTROLLERS: i8 = 2;

impl Handler for DescribeClusterRequest {
    const SERVED: (i16, i16) = (0, 2);
    type Needs = (Arc<BrokerConfig>, Arc<str>);

    async fn handle(
        (broker_config, cluster_id): Self::Needs,
        request: DescribeClusterRequest,
        ctx: &RequestContext,
    ) -> DescribeClusterResponse {
        let node = BrokerId(broker_config.node_id);
        let response = DescribeClusterResponse::default()
            .with_endpoint_type(request.endpoint_type)
            .with_cluster_id(StrBytes::from_string(cluster_id.to_string()))
            .with_controller_id(node)
            .with_cluster_authorized_operations(
                ctx.cluster_operations(request.include_cluster_authorized_operations),
            );
        if !matches!(request.endpoint_type, BROKERS | CONTROLLERS) {
            return response
                .with_controller_id(BrokerId(-1))
                .with_error_code(ResponseError::UnsupportedEndpointType.code())
                .with_error_message(Some(StrBytes::from_string(format!(
                    "endpoint type {} is neither brokers (1) nor controllers (2)",
                    request.endpoint_type
                ))));
        }
        response.with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(node)
            .with_host(StrBytes::from_string(ctx.listener.host.clone()))
            .with_port(ctx.listener.port)
            .with_rack(None)
            .with_is_fenced(false)])
    }

    fn throttle_time_ms(response: &mut DescribeClusterResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &DescribeClusterResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
