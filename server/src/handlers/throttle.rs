//! Quotas on the request path (KIP-219): a Produce or Fetch waits before it is handled until
//! its entity's byte-rate bucket is out of debt; after it is handled, what it used earns the
//! throttle its response carries.

use std::future::Future;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;

use crate::broker::Broker;
use crate::quotas::QuotaKind;

/// Before a Produce or Fetch is handled: waits until the byte-rate bucket of its quota entity
/// is out of debt (every connection of the entity waits on the same bucket; shutdown ends the
/// wait). A Produce's request bytes are then taken out; returns the throttle they earned.
pub(super) async fn wait_for_quota(
    broker: &Broker,
    key: ApiKey,
    user: &str,
    client_id: &str,
    request_bytes: usize,
) -> Duration {
    let kind = match key {
        ApiKey::Produce => QuotaKind::ProducerByteRate,
        ApiKey::Fetch => QuotaKind::ConsumerByteRate,
        _ => return Duration::ZERO,
    };
    let quotas = &broker.admin().quotas;
    let mut shutdown = broker.shutdown();
    // Ends when the debt is paid: each round sleeps until then, and the bucket fills at its
    // quota meanwhile.
    loop {
        let debt = quotas.debt(kind, user, client_id, Instant::now());
        if debt.is_zero() || broker.is_shutting_down() {
            break;
        }
        tokio::select! {
            () = tokio::time::sleep(debt) => {}
            _ = shutdown.changed() => break,
        }
    }
    if kind == QuotaKind::ProducerByteRate {
        quotas.record(kind, user, client_id, request_bytes as f64, Instant::now())
    } else {
        Duration::ZERO
    }
}

/// The throttle a request earned once handled: the longest of its Fetch byte-rate quota's
/// (response bytes) and its `request_percentage` quota's (handler time). (A Produce's bytes
/// were counted before it was handled: [`wait_for_quota`].)
pub(super) fn after_handling(
    broker: &Broker,
    key: ApiKey,
    user: &str,
    client_id: &str,
    response_bytes: Option<usize>,
    busy: Option<Duration>,
) -> Duration {
    let quotas = &broker.admin().quotas;
    let now = Instant::now();
    let by_bytes = match (key, response_bytes) {
        (ApiKey::Fetch, Some(n)) => {
            quotas.record(QuotaKind::ConsumerByteRate, user, client_id, n as f64, now)
        }
        _ => Duration::ZERO,
    };
    let by_time = busy.map_or(Duration::ZERO, |busy| {
        quotas.record(
            QuotaKind::RequestPercentage,
            user,
            client_id,
            busy.as_secs_f64() * 100.0,
            now,
        )
    });
    by_bytes.max(by_time)
}

/// Runs `future`, measuring the time spent polling it (not the time it waited).
pub(super) async fn timed<F: Future>(future: F) -> (F::Output, Duration) {
    let mut future = std::pin::pin!(future);
    let mut busy = Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let started = Instant::now();
        let polled = future.as_mut().poll(cx);
        busy += started.elapsed();
        polled
    })
    .await;
    (output, busy)
}
