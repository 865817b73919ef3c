//! The share groups' metric families of a scrape: per share partition its records by state,
//! lag and delivery counts, the overload mode, and the tenants of fair turns.

use std::fmt::Error;

use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::broker::Broker;
use crate::metrics::encode::{counter, family, gauge};

pub(super) fn encode(broker: &Broker, encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let now_ms = log_core::now_ms();
    let mut rows = Vec::new();
    for group in broker.shares().groups() {
        for s in broker.shares().summaries(&broker.storage().log, &group) {
            rows.push((group.clone(), s));
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_share_group_records",
            "Records in the window of a share group's partition (from its start offset to the last \
             record fetched) by state: available (to deliver), acquired (locked by a consumer), \
             archived (rejected, past the delivery limit or its deadline; acknowledged records \
             are not counted).",
            MetricType::Gauge,
        )?;
        for (group, s) in &rows {
            let p = s.partition.to_string();
            for (state, count) in [
                ("available", s.available),
                ("acquired", s.acquired),
                ("archived", s.archived),
            ] {
                let labels = [
                    ("group", group.as_str()),
                    ("topic", s.topic.as_str()),
                    ("partition", p.as_str()),
                    ("state", state),
                ];
                gauge(&mut f, &labels, count as u64)?;
            }
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_share_group_oldest_lock_age_seconds",
            "Age of the oldest lock a share consumer holds on a record of the partition; 0 when none.",
            MetricType::Gauge,
        )?;
        for (group, s) in &rows {
            let p = s.partition.to_string();
            let age = s
                .oldest_lock_ms
                .map_or(0.0, |since| (now_ms - since).max(0) as f64 / 1000.0);
            let labels = [
                ("group", group.as_str()),
                ("topic", s.topic.as_str()),
                ("partition", p.as_str()),
            ];
            gauge(&mut f, &labels, age)?;
        }
    }
    share_overload(&rows, encoder)?;
    share_tenants(&rows, now_ms, encoder)
}

type ShareRow = (String, crate::shares::admin::PartitionSummary);

fn share_overload(rows: &[ShareRow], encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    {
        let mut f = family(
            encoder,
            "lograil_share_overloaded",
            "1 while the share partition's overload mode is on (the oldest available record \
             stayed older than lograil.share.overload.target.ms for \
             lograil.share.overload.interval.ms): newest records first, expired ones archived.",
            MetricType::Gauge,
        )?;
        for (group, s) in rows {
            let p = s.partition.to_string();
            let labels = [
                ("group", group.as_str()),
                ("topic", s.topic.as_str()),
                ("partition", p.as_str()),
            ];
            gauge(&mut f, &labels, i64::from(s.overloaded))?;
        }
    }
    let mut f = family(
        encoder,
        "lograil_share_overload_switches",
        "Times the share partition's overload mode switched on (to=\"on\") and off (to=\"off\") \
         since the broker started.",
        MetricType::Counter,
    )?;
    for (group, s) in rows {
        let p = s.partition.to_string();
        for (to, count) in [
            ("on", s.overload_switches[0]),
            ("off", s.overload_switches[1]),
        ] {
            let labels = [
                ("group", group.as_str()),
                ("topic", s.topic.as_str()),
                ("partition", p.as_str()),
                ("to", to),
            ];
            counter(&mut f, &labels, count)?;
        }
    }
    Ok(())
}

/// Per tenant of a share partition with fair turns or the overload mode on: the top
/// tenants by available records ([`crate::shares::admin::TOP_TENANTS`]), the rest summed as
/// `tenant="other"`.
fn share_tenants(
    rows: &[ShareRow],
    now_ms: i64,
    encoder: &mut DescriptorEncoder,
) -> Result<(), Error> {
    type Field = fn(&task_queue::TenantStats, i64) -> Option<f64>;
    let families: [(&str, &str, Field); 3] = [
        (
            "lograil_share_tenant_available",
            "Available records of the tenant in the share partition's look-ahead window (the top \
             tenants by this count; the rest as tenant=\"other\").",
            |t, _| Some(t.available as f64),
        ),
        (
            "lograil_share_tenant_in_flight",
            "Records of the tenant acquired by share consumers now.",
            |t, _| Some(t.in_flight as f64),
        ),
        (
            "lograil_share_tenant_oldest_available_age_seconds",
            "Age of the tenant's oldest available record (from its timestamp); absent when none.",
            |t, now| {
                t.oldest_available_ms
                    .map(|ts| (now - ts).max(0) as f64 / 1000.0)
            },
        ),
    ];
    for (name, help, field) in families {
        let mut f = family(encoder, name, help, MetricType::Gauge)?;
        for (group, s) in rows {
            let p = s.partition.to_string();
            for t in &s.tenants {
                let Some(value) = field(t, now_ms) else {
                    continue;
                };
                let tenant = t
                    .tenant
                    .as_deref()
                    .map_or_else(|| "other".to_string(), crate::metrics::tenant_label);
                let labels = [
                    ("group", group.as_str()),
                    ("topic", s.topic.as_str()),
                    ("partition", p.as_str()),
                    ("tenant", tenant.as_str()),
                ];
                gauge(&mut f, &labels, value)?;
            }
        }
    }
    Ok(())
}
