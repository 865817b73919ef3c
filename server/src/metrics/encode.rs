//! The counters [`Metrics`] keeps, encoded for a scrape (the families read from the broker's
//! state are the scrape's own: `scrape`).

use std::collections::HashSet;
use std::fmt::Error;
use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, MetricEncoder};
use prometheus_client::metrics::MetricType;

use super::{lock, Metrics, TopicTraffic};

impl Metrics {
    /// Encodes every family of counters; per-topic ones only for topics in `existing` (the
    /// counters of deleted topics are dropped).
    pub(crate) fn encode_counters(
        &self,
        existing: &HashSet<String>,
        encoder: &mut DescriptorEncoder,
    ) -> Result<(), Error> {
        let metrics = self;
        topics(metrics, existing, encoder)?;
        requests(metrics, encoder)?;
        {
            let mut f = family(
                encoder,
                "lograil_fsync_duration_seconds",
                "Time each fsync (fdatasync) of a log file took, all partitions.",
                MetricType::Histogram,
            )?;
            metrics.fsync.encode(f.encode_family(&[("", ""); 0])?)?;
        }
        {
            let mut f = family(
                encoder,
                "lograil_connections_open",
                "Client connections open now (Kafka protocol).",
                MetricType::Gauge,
            )?;
            gauge(
                &mut f,
                &[("", ""); 0],
                metrics.connections.load(Ordering::Relaxed),
            )?;
        }
        {
            let mut f = family(
                encoder,
                "lograil_authentication_failures",
                "Connections that failed their TLS handshake or SASL authentication.",
                MetricType::Counter,
            )?;
            for (step, count) in ["tls", "sasl"].iter().zip(&metrics.authentication_failures) {
                counter(&mut f, &[("step", *step)], count.load(Ordering::Relaxed))?;
            }
        }
        {
            let mut f = family(
                encoder,
                "lograil_dead_letters_failed",
                "Records a share group archived without the dead letter it configured: its \
                 dead-letter topic refused by Kafka's checks, or an error creating, reading or \
                 writing.",
                MetricType::Counter,
            )?;
            for (reason, count) in ["refused", "error"]
                .iter()
                .zip(&metrics.dead_letters_failed)
            {
                counter(
                    &mut f,
                    &[("reason", *reason)],
                    count.load(Ordering::Relaxed),
                )?;
            }
        }
        throttles(metrics, encoder)?;
        Ok(())
    }
}

/// Starts one metric family.
pub(crate) fn family<'a>(
    encoder: &'a mut DescriptorEncoder,
    name: &'a str,
    help: &str,
    kind: MetricType,
) -> Result<MetricEncoder<'a>, Error> {
    encoder.encode_descriptor(name, help, None, kind)
}

pub(crate) fn gauge(
    family: &mut MetricEncoder,
    labels: &impl EncodeLabelSet,
    value: impl prometheus_client::encoding::EncodeGaugeValue,
) -> Result<(), Error> {
    family.encode_family(labels)?.encode_gauge(&value)
}

pub(crate) fn counter(
    family: &mut MetricEncoder,
    labels: &impl EncodeLabelSet,
    value: impl prometheus_client::encoding::EncodeCounterValue,
) -> Result<(), Error> {
    family
        .encode_family(labels)?
        .encode_counter::<prometheus_client::encoding::NoLabelSet, _, u64>(&value, None)
}

/// Per topic counters; those of deleted topics are dropped.
fn topics(
    metrics: &Metrics,
    existing: &HashSet<String>,
    encoder: &mut DescriptorEncoder,
) -> Result<(), Error> {
    let traffic: Vec<(String, Arc<TopicTraffic>)> = {
        let mut topics = metrics
            .topics
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        topics.retain(|name, _| existing.contains(name));
        let mut list: Vec<_> = topics.iter().map(|(n, t)| (n.clone(), t.clone())).collect();
        list.sort_by(|a, b| a.0.cmp(&b.0));
        list
    };
    type Field = fn(&TopicTraffic) -> &std::sync::atomic::AtomicU64;
    let families: [(&str, &str, Field); 4] = [
        (
            "lograil_topic_bytes_in",
            "Bytes of record batches producers appended to the topic (retried duplicates not counted).",
            |t| &t.bytes_in,
        ),
        (
            "lograil_topic_records_in",
            "Records producers appended to the topic.",
            |t| &t.records_in,
        ),
        (
            "lograil_topic_bytes_out",
            "Bytes of record batches fetch and share-fetch responses carried from the topic.",
            |t| &t.bytes_out,
        ),
        (
            "lograil_topic_records_out",
            "Records fetch responses carried from the topic (whole batches), and records share \
             fetches acquired.",
            |t| &t.records_out,
        ),
    ];
    for (name, help, field) in families {
        let mut f = family(encoder, name, help, MetricType::Counter)?;
        for (topic, t) in &traffic {
            counter(
                &mut f,
                &[("topic", topic.as_str())],
                field(t).load(Ordering::Relaxed),
            )?;
        }
    }
    let mut f = family(
        encoder,
        "lograil_dead_letter_records",
        "Records that arrived in a dead-letter topic: a retry chain's (named ...-dlt or ...DLT) \
         or a share group's errors.deadletterqueue.topic.name.",
        MetricType::Counter,
    )?;
    for (topic, t) in &traffic {
        let count = t.dead_letters.load(Ordering::Relaxed);
        if count > 0 || vocabulary::is_dead_letter_topic(topic) {
            counter(&mut f, &[("topic", topic.as_str())], count)?;
        }
    }
    Ok(())
}

fn requests(metrics: &Metrics, encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let table = &metrics.requests;
    let mut rows = Vec::new();
    for (api, min, versions) in &table.served {
        for (version, stats) in (*min..).zip(versions) {
            if stats.count.get() > 0 {
                rows.push((api.as_str(), version.to_string(), stats));
            }
        }
    }
    if table.unknown.count.get() > 0 {
        rows.push(("unknown", "unknown".to_string(), &table.unknown));
    }
    type Count = fn(&super::RequestStats) -> u64;
    let counted: [(&str, &str, Count); 2] = [
        (
            "lograil_requests",
            "Requests received, per API and version (api=\"unknown\": an API or version not served).",
            |s| s.count.get(),
        ),
        (
            "lograil_request_errors",
            "Requests the broker could not answer (malformed, a version not served, over a cap): \
             it closed the connection.",
            |s| s.errors.get(),
        ),
    ];
    for (name, help, count) in counted {
        let mut f = family(encoder, name, help, MetricType::Counter)?;
        for (api, version, stats) in &rows {
            counter(
                &mut f,
                &[("api", *api), ("version", version.as_str())],
                count(stats),
            )?;
        }
    }
    {
        let mut f = family(
            encoder,
            "lograil_response_errors",
            "Kafka error codes in responses (top level, per topic, partition or group), per API, \
             version and error (Kafka's name, e.g. UNKNOWN_TOPIC_OR_PARTITION).",
            MetricType::Counter,
        )?;
        for (api, version, stats) in &rows {
            let mut codes = lock(&stats.codes).clone();
            codes.sort_unstable();
            for (code, n) in codes {
                let name = super::errors::error_name(code);
                let labels = [
                    ("api", *api),
                    ("version", version.as_str()),
                    ("error", name.as_str()),
                ];
                counter(&mut f, &labels, n)?;
            }
        }
    }
    let mut f = family(
        encoder,
        "lograil_request_duration_seconds",
        "Time from a request's whole arrival to its response being ready, per API and version \
         (a long-polling fetch's wait included).",
        MetricType::Histogram,
    )?;
    for (api, version, stats) in &rows {
        stats
            .latency
            .encode(f.encode_family(&[("api", *api), ("version", version.as_str())])?)?;
    }
    Ok(())
}

fn throttles(metrics: &Metrics, encoder: &mut DescriptorEncoder) -> Result<(), Error> {
    let rows = metrics.throttles();
    {
        let mut f = family(
            encoder,
            "lograil_client_throttle_seconds",
            "Throttle time (throttle_time_ms) given to the client by quotas, per client id.",
            MetricType::Counter,
        )?;
        for (client, _, millis) in &rows {
            counter(
                &mut f,
                &[("client_id", client.as_str())],
                *millis as f64 / 1000.0,
            )?;
        }
    }
    let mut f = family(
        encoder,
        "lograil_client_throttled_responses",
        "Responses that carried a throttle time, per client id.",
        MetricType::Counter,
    )?;
    for (client, responses, _) in &rows {
        counter(&mut f, &[("client_id", client.as_str())], *responses)?;
    }
    Ok(())
}
