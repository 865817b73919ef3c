//! The checks handlers make, each one line in its handler: what the request's principal, from
//! its address, may do (the broker's [`crate::authorizer::Authorizer`]). Without an authorizer
//! every check is `true` after one branch.

use acl::{Operation, ResourceType, CLUSTER_NAME};
use kafka_protocol::error::ResponseError;

use super::RequestContext;

/// Config resource types (Describe/Alter/IncrementalAlterConfigs): KIP-133's codes.
const CONFIG_TOPIC: i8 = 2;
const CONFIG_BROKER: i8 = 4;
const CONFIG_BROKER_LOGGER: i8 = 8;
const CONFIG_CLIENT_METRICS: i8 = 16;
const CONFIG_GROUP: i8 = 32;

impl RequestContext {
    /// Whether the request may do `operation` on the resource `name` of `resource_type`.
    #[inline]
    pub(crate) fn authorize(
        &self,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        self.authorizer.authorize(
            &self.principal,
            self.peer.ip(),
            operation,
            resource_type,
            name,
        )
    }

    /// Whether the request may do `operation` on topic `name`.
    #[inline]
    pub(crate) fn authorize_topic(&self, operation: Operation, name: &str) -> bool {
        self.authorize(operation, ResourceType::Topic, name)
    }

    /// Whether the request may do `operation` on group `id`.
    #[inline]
    pub(crate) fn authorize_group(&self, operation: Operation, id: &str) -> bool {
        self.authorize(operation, ResourceType::Group, id)
    }

    /// Whether the request may do `operation` on the cluster.
    #[inline]
    pub(crate) fn authorize_cluster(&self, operation: Operation) -> bool {
        self.authorize(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the request may do `operation` on at least one resource of `resource_type`
    /// (KIP-679).
    pub(crate) fn authorize_any(&self, operation: Operation, resource_type: ResourceType) -> bool {
        self.authorizer.authorize_by_resource_type(
            &self.principal,
            self.peer.ip(),
            operation,
            resource_type,
        )
    }

    /// KIP-430's authorized operations of the request on the resource.
    pub(crate) fn authorized_operations(&self, resource_type: ResourceType, name: &str) -> i32 {
        self.authorizer
            .authorized_operations(&self.principal, self.peer.ip(), resource_type, name)
    }

    /// Whether the request may do `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on the
    /// configs of a config resource, as Kafka decides: a topic's on the topic (else
    /// TOPIC_AUTHORIZATION_FAILED), a group's on the group (GROUP_AUTHORIZATION_FAILED), a
    /// broker's, a broker logger's or client metrics' on the cluster
    /// (CLUSTER_AUTHORIZATION_FAILED). Other types are the handler's to refuse.
    pub(crate) fn authorize_configs(
        &self,
        operation: Operation,
        config_type: i8,
        name: &str,
    ) -> Result<(), ResponseError> {
        let (allowed, error) = match config_type {
            CONFIG_TOPIC => (
                self.authorize_topic(operation, name),
                ResponseError::TopicAuthorizationFailed,
            ),
            CONFIG_GROUP => (
                self.authorize_group(operation, name),
                ResponseError::GroupAuthorizationFailed,
            ),
            CONFIG_BROKER | CONFIG_BROKER_LOGGER | CONFIG_CLIENT_METRICS => (
                self.authorize_cluster(operation),
                ResponseError::ClusterAuthorizationFailed,
            ),
            _ => (true, ResponseError::UnknownServerError),
        };
        if allowed {
            Ok(())
        } else {
            Err(error)
        }
    }

    /// KIP-430's cluster operations as Metadata and DescribeCluster give them: those of the
    /// cluster when asked and DESCRIBE is allowed, 0 when asked and it is not, `i32::MIN`
    /// ("not computed") when not asked.
    pub(crate) fn cluster_operations(&self, asked: bool) -> i32 {
        if !asked {
            i32::MIN
        } else if self.authorize_cluster(Operation::Describe) {
            self.authorized_operations(ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        }
    }
}
