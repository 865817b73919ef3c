//! The checks handlers make, each one line in its handler: what the request's principal, from
//! its address, may do (the broker's [`crate::authorizer::Authorizer`]). Without an authorizer
//! every check is `true` after one branch.

use acl::{Operation, ResourceType, CLUSTER_NAME};

use super::RequestContext;
use crate::broker::Broker;

impl RequestContext {
    /// Whether the request may do `operation` on the resource `name` of `resource_type`.
    #[inline]
    pub(crate) fn authorize(
        &self,
        broker: &Broker,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        broker.authorizer.authorize(
            &self.principal,
            self.peer.ip(),
            operation,
            resource_type,
            name,
        )
    }

    /// Whether the request may do `operation` on topic `name`.
    #[inline]
    pub(crate) fn authorize_topic(&self, broker: &Broker, operation: Operation, name: &str) -> bool {
        self.authorize(broker, operation, ResourceType::Topic, name)
    }

    /// Whether the request may do `operation` on group `id`.
    #[inline]
    pub(crate) fn authorize_group(&self, broker: &Broker, operation: Operation, id: &str) -> bool {
        self.authorize(broker, operation, ResourceType::Group, id)
    }

    /// Whether the request may do `operation` on the cluster.
    #[inline]
    pub(crate) fn authorize_cluster(&self, broker: &Broker, operation: Operation) -> bool {
        self.authorize(broker, operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Whether the request may do `operation` on at least one resource of `resource_type`
    /// (KIP-679).
    pub(crate) fn authorize_any(
        &self,
        broker: &Broker,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        broker.authorizer.authorize_by_resource_type(
            &self.principal,
            self.peer.ip(),
            operation,
            resource_type,
        )
    }

    /// KIP-430's authorized operations of the request on the resource.
    pub(crate) fn authorized_operations(
        &self,
        broker: &Broker,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        broker.authorizer.authorized_operations(
            &self.principal,
            self.peer.ip(),
            resource_type,
            name,
        )
    }

    /// KIP-430's cluster operations as Metadata and DescribeCluster give them: those of the
    /// cluster when asked and DESCRIBE is allowed, 0 when asked and it is not, `i32::MIN`
    /// ("not computed") when not asked.
    pub(crate) fn cluster_operations(&self, broker: &Broker, asked: bool) -> i32 {
        if !asked {
            i32::MIN
        } else if self.authorize_cluster(broker, Operation::Describe) {
            self.authorized_operations(broker, ResourceType::Cluster, CLUSTER_NAME)
        } else {
            0
        }
    }
}
