//! The streams groups' metric families of a scrape: each group's members by state, and its
//! tasks by kind, with those no member runs yet (a topology not ready, tasks in revocation).

use std::fmt::Error;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::broker::Broker;
use crate::metrics::encode::{family, gauge};

pub(super) fn encode(broker: &Broker, encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let streams = &broker.groups().streams;
    let groups: Vec<_> = streams
        .list()
        .into_iter()
        .filter_map(|(id, _)| Some((id.clone(), streams.describe(&id)?)))
        .collect();
    {
        let mut f = family(
            encoder,
            "lograil_streams_group_members",
            "Members of a streams group (KIP-1071), labelled with the group's state (Empty, \
             NotReady, Assigning, Reconciling, Stable).",
            MetricType::Gauge,
        )?;
        for (id, g) in &groups {
            let labels = [("group", id.as_str()), ("state", g.state())];
            gauge(&mut f, &labels, g.members.len() as u64)?;
        }
    }
    let mut f = family(
        encoder,
        "lograil_streams_group_tasks",
        "Tasks of a streams group by kind: active and standby tasks its members run, and \
         unassigned: tasks of its topology no member runs as active (the topology is not \
         ready, or the tasks are moving between members).",
        MetricType::Gauge,
    )?;
    for (id, g) in &groups {
        let active: usize = g.members.values().map(|m| m.assigned.active.len()).sum();
        let standby: usize = g.members.values().map(|m| m.assigned.standby.len()).sum();
        let total: i64 = g.configured.tasks.values().map(|n| i64::from(*n)).sum();
        let unassigned = u64::try_from(total - active as i64).unwrap_or(0);
        for (kind, n) in [
            ("active", active as u64),
            ("standby", standby as u64),
            ("unassigned", unassigned),
        ] {
            gauge(&mut f, &[("group", id.as_str()), ("kind", kind)], n)?;
        }
    }
    Ok(())
}
