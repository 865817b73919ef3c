//! ListGroups, versions 0–5: groups with members, and groups that only have committed offsets
//! (listed as Empty, as Kafka does; a group whose members left keeps its protocol type,
//! `consumer`, so librdkafka does not take it for a simple group). v4 filters by state; v5 gives each group's type
//! (Classic; Consumer for KIP-848 consumer-protocol groups, protocol type `consumer`, their
//! states Empty, Assigning, Reconciling or Stable; Share for share groups: listed from v5 on
//! only; in lower case on the wire, as Kafka sends them) and filters by type (any case).
//! Authorization, as Kafka: DESCRIBE on the cluster lists every group; without it, only the
//! groups with DESCRIBE on them are listed (no error).

use std::collections::BTreeMap;
use std::sync::Arc;

use acl::Operation;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse};
use kafka_protocol::protocol::StrBytes;

use super::Handler;
use super::RequestContext;
use crate::broker::Groups;
use crate::groups::GroupState;
use crate::shares::Shares;

/// Group types as Kafka's coordinator sends them (`Group.GroupType`); its admin client shows
/// them capitalized.
const CLASSIC: &str = "classic";
const SHARE: &str = "share";
const CONSUMER: &str = "consumer";
const STREAMS: &str = "streams";

impl Handler for ListGroupsRequest {
    const SERVED: (i16, i16) = (0, 5);
    type Needs = (Arc<Groups>, Arc<Shares>);

    async fn handle(
        (groups, shares): Self::Needs,
        request: ListGroupsRequest,
        ctx: &RequestContext,
    ) -> ListGroupsResponse {
        // id → (protocol type, state, group type)
        let mut listed: BTreeMap<String, (String, &'static str, &'static str)> = groups
            .offsets
            .groups()
            .into_iter()
            .map(|g| (g, (String::new(), GroupState::Empty.name(), CLASSIC)))
            .collect();
        for (id, protocol_type, state) in groups.classic.list() {
            listed.insert(id, (protocol_type, state.name(), CLASSIC));
        }
        // Consumer-protocol groups (KIP-848): protocol type "consumer", as Kafka lists them.
        for (id, state) in groups.consumer.list() {
            let classic_live = listed
                .get(&id)
                .is_some_and(|(_, s, _)| *s != GroupState::Empty.name());
            if !classic_live {
                listed.insert(id, ("consumer".to_string(), state, CONSUMER));
            }
        }
        // Streams groups (KIP-1071): protocol type "streams".
        for (id, state) in groups.streams.list() {
            listed.insert(id, ("streams".to_string(), state, STREAMS));
        }
        if ctx.version >= 5 {
            let members: BTreeMap<String, usize> = shares.members.list().into_iter().collect();
            for id in shares.groups() {
                let state = if members.get(&id).is_some_and(|n| *n > 0) {
                    "Stable"
                } else {
                    "Empty"
                };
                listed.insert(id, ("share".to_string(), state, SHARE));
            }
        }
        let types: Vec<String> = request
            .types_filter
            .iter()
            .map(|t| t.to_lowercase())
            .collect();
        let filter: Vec<String> = request
            .states_filter
            .iter()
            .map(|s| s.to_lowercase())
            .collect();
        // Every group with DESCRIBE on the cluster, else those with DESCRIBE on the group.
        let all = ctx.authorize_cluster(Operation::Describe);
        let listed = listed
            .into_iter()
            .filter(|(id, _)| all || ctx.authorize_group(Operation::Describe, id))
            .filter(|(_, (_, state, _))| {
                filter.is_empty() || filter.contains(&state.to_lowercase())
            })
            .filter(|(_, (_, _, kind))| types.is_empty() || types.contains(&kind.to_lowercase()))
            .map(|(id, (protocol_type, state, kind))| {
                ListedGroup::default()
                    .with_group_id(GroupId(StrBytes::from_string(id)))
                    .with_protocol_type(StrBytes::from_string(protocol_type))
                    .with_group_state(StrBytes::from_static_str(state))
                    .with_group_type(StrBytes::from_static_str(kind))
            })
            .collect();
        ListGroupsResponse::default().with_groups(listed)
    }

    fn throttle_time_ms(response: &mut ListGroupsResponse) -> Option<&mut i32> {
        Some(&mut response.throttle_time_ms)
    }

    fn each_error(r: &ListGroupsResponse, f: &mut dyn FnMut(i16)) {
        f(r.error_code)
    }
}
