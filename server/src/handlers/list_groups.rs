//! ListGroups, versions 0–4: groups with members, and groups that only have committed offsets
//! (listed as Empty, as Kafka does). v4 filters by state.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::RequestContext;
use crate::broker::Broker;
use crate::groups::GroupState;

pub async fn handle(
    broker: &Arc<Broker>,
    request: ListGroupsRequest,
    _: &RequestContext,
) -> Option<ListGroupsResponse> {
    let mut groups: BTreeMap<String, (String, &'static str)> = broker
        .offsets
        .groups()
        .into_iter()
        .map(|g| (g, (String::new(), GroupState::Empty.name())))
        .collect();
    for (id, protocol_type, state) in broker.groups.list() {
        groups.insert(id, (protocol_type, state.name()));
    }
    let filter: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.to_lowercase())
        .collect();
    let listed = groups
        .into_iter()
        .filter(|(_, (_, state))| filter.is_empty() || filter.contains(&state.to_lowercase()))
        .map(|(id, (protocol_type, state))| {
            ListedGroup::default()
                .with_group_id(GroupId(StrBytes::from_string(id)))
                .with_protocol_type(StrBytes::from_string(protocol_type))
                .with_group_state(StrBytes::from_static_str(state))
        })
        .collect();
    Some(ListGroupsResponse::default().with_groups(listed))
}
