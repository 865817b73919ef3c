#![allow(clippy::unwrap_used)]
use super::*;

fn client(name: &str) -> Entity {
    Entity {
        user: None,
        client_id: Some(Name::Named(name.into())),
        ip: None,
    }
}

fn set(kind: QuotaKind, value: f64) -> Op {
    Op {
        kind,
        value: Some(value),
    }
}

/// A client that sends `request` bytes whenever it is not throttled, on a virtual clock:
/// the bytes it got through between `from` and `to`, per second.
fn greedy_rate(window: Window, quota: f64, request: f64, from: f64, to: f64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let quotas = Quotas::open(dir.path(), window).unwrap();
    quotas
        .alter(
            &client("a"),
            &[set(QuotaKind::ProducerByteRate, quota)],
            false,
        )
        .unwrap();
    let start = Instant::now();
    let mut t = 0.0f64;
    let mut sent = 0.0;
    while t < to {
        let throttle = quotas.record(
            QuotaKind::ProducerByteRate,
            ANONYMOUS,
            "a",
            request,
            start + Duration::from_secs_f64(t),
        );
        if t >= from {
            sent += request;
        }
        // 1 ms per request, then the mute.
        t += 0.001 + throttle.as_secs_f64();
    }
    sent / (to - from)
}

#[test]
fn a_greedy_client_is_held_to_its_quota_once_its_burst_is_spent() {
    for request in [16_000.0, 100_000.0, 1_000_000.0] {
        let rate = greedy_rate(Window::default(), 1_000_000.0, request, 2.0, 30.0);
        assert!(
            (rate / 1_000_000.0 - 1.0).abs() < 0.05,
            "{request}-byte requests: rate {rate}"
        );
    }
}

#[test]
fn under_the_quota_nothing_is_throttled() {
    let dir = tempfile::tempdir().unwrap();
    let quotas = Quotas::open(dir.path(), Window::default()).unwrap();
    let now = Instant::now();
    assert_eq!(
        quotas.record(QuotaKind::ProducerByteRate, ANONYMOUS, "a", 1e9, now),
        Duration::ZERO,
        "no quota"
    );
    quotas
        .alter(
            &client("a"),
            &[set(QuotaKind::ProducerByteRate, 1000.0)],
            false,
        )
        .unwrap();
    // A burst of the whole window (11 s at 1000/s) goes through.
    assert_eq!(
        quotas.record(QuotaKind::ProducerByteRate, ANONYMOUS, "a", 11_000.0, now),
        Duration::ZERO
    );
    // The next 1000 bytes are a debt of 1 s.
    let throttle = quotas.record(QuotaKind::ProducerByteRate, ANONYMOUS, "a", 1000.0, now);
    assert_eq!(throttle, Duration::from_secs(1));
    // Half a second later, half of it is paid back.
    let later = now + Duration::from_millis(500);
    let throttle = quotas.record(QuotaKind::ProducerByteRate, ANONYMOUS, "a", 0.0, later);
    assert_eq!(throttle, Duration::from_millis(500));
    assert_eq!(
        quotas.record(QuotaKind::ProducerByteRate, ANONYMOUS, "b", 1e9, now),
        Duration::ZERO,
        "another client id"
    );
    // Capped at the window.
    let throttle = quotas.record(QuotaKind::ProducerByteRate, ANONYMOUS, "a", 1e12, later);
    assert_eq!(throttle, Window::default().length());
}

#[test]
fn the_debt_is_the_entitys_and_is_paid_back_at_the_quota() {
    let dir = tempfile::tempdir().unwrap();
    let quotas = Quotas::open(dir.path(), Window::default()).unwrap();
    let p = QuotaKind::ProducerByteRate;
    let now = Instant::now();
    assert_eq!(
        quotas.debt(p, ANONYMOUS, "a", now),
        Duration::ZERO,
        "no quota"
    );
    quotas
        .alter(&client("a"), &[set(p, 1000.0)], false)
        .unwrap();
    assert_eq!(
        quotas.debt(p, ANONYMOUS, "a", now),
        Duration::ZERO,
        "nothing recorded"
    );
    // The burst (11 s at 1000/s) and 2 s more.
    quotas.record(p, ANONYMOUS, "a", 13_000.0, now);
    assert_eq!(quotas.debt(p, ANONYMOUS, "a", now), Duration::from_secs(2));
    let later = now + Duration::from_millis(1500);
    assert_eq!(
        quotas.debt(p, ANONYMOUS, "a", later),
        Duration::from_millis(500)
    );
    assert_eq!(
        quotas.debt(p, ANONYMOUS, "a", now + Duration::from_secs(3)),
        Duration::ZERO
    );
    assert_eq!(
        quotas.debt(p, ANONYMOUS, "b", now),
        Duration::ZERO,
        "another client id"
    );
    assert_eq!(
        quotas.debt(QuotaKind::ConsumerByteRate, ANONYMOUS, "a", now),
        Duration::ZERO
    );
}

#[test]
fn connections_over_an_ips_rate_are_held_and_not_counted() {
    let dir = tempfile::tempdir().unwrap();
    let window = Window {
        size: Duration::from_secs(1),
        samples: 2,
    };
    let quotas = Quotas::open(dir.path(), window).unwrap();
    let kind = QuotaKind::ConnectionCreationRate;
    let ip = |name: Option<&str>| Entity::from_components([(IP, name)]).unwrap();
    let a: IpAddr = [10, 0, 0, 1].into();
    let b: IpAddr = [10, 0, 0, 2].into();
    let now = Instant::now();
    assert_eq!(quotas.admit_connection(a, now), Duration::ZERO, "no quota");
    quotas
        .alter(&ip(Some("10.0.0.1")), &[set(kind, 2.0)], false)
        .unwrap();
    assert!(!quotas.any(), "an ip quota is not a client quota");
    // A burst of the window's worth (2 s at 2/s), then one every half second.
    for _ in 0..4 {
        assert_eq!(quotas.admit_connection(a, now), Duration::ZERO);
    }
    assert_eq!(quotas.admit_connection(a, now), Duration::from_millis(500));
    // The refused one was not counted.
    assert_eq!(quotas.admit_connection(a, now), Duration::from_millis(500));
    let later = now + Duration::from_millis(500);
    assert_eq!(quotas.admit_connection(a, later), Duration::ZERO);
    assert_eq!(
        quotas.admit_connection(b, now),
        Duration::ZERO,
        "another address"
    );
    // The default ip entity gives each address its own rate.
    quotas.alter(&ip(None), &[set(kind, 1.0)], false).unwrap();
    assert_eq!(quotas.admit_connection(b, later), Duration::ZERO);
    assert_eq!(quotas.admit_connection(b, later), Duration::ZERO);
    assert_eq!(quotas.admit_connection(b, later), Duration::from_secs(1));
    // Kafka's rules for ip entities.
    assert_eq!(
        Entity::from_components([(IP, Some("10.0.0.1")), (CLIENT_ID, Some("c"))]),
        Err(QuotaError::IpCombined)
    );
    assert!(Entity::from_components([(IP, Some("host.example"))]).is_err());
    assert_eq!(
        ip(Some("0:0:0:0:0:0:0:1")).ip,
        Some(Name::Named("::1".into())),
        "kept canonical"
    );
    assert!(quotas
        .alter(
            &ip(Some("10.0.0.1")),
            &[set(QuotaKind::ProducerByteRate, 1.0)],
            false
        )
        .is_err());
    assert!(quotas
        .alter(&client("c"), &[set(kind, 1.0)], false)
        .is_err());
}

#[test]
fn precedence_is_kafkas() {
    let dir = tempfile::tempdir().unwrap();
    let quotas = Quotas::open(dir.path(), Window::default()).unwrap();
    let p = QuotaKind::ProducerByteRate;
    let entity = |user: Option<Name>, client_id: Option<Name>| Entity {
        user,
        client_id,
        ip: None,
    };
    let named = |n: &str| Some(Name::Named(n.into()));
    quotas
        .alter(&entity(None, Some(Name::Default)), &[set(p, 8.0)], false)
        .unwrap();
    assert_eq!(quotas.effective(ANONYMOUS, "x"), vec![(p, 8.0)]);
    quotas
        .alter(&entity(None, named("x")), &[set(p, 7.0)], false)
        .unwrap();
    assert_eq!(quotas.effective(ANONYMOUS, "x"), vec![(p, 7.0)]);
    assert_eq!(quotas.effective(ANONYMOUS, "y"), vec![(p, 8.0)]);
    quotas
        .alter(&entity(Some(Name::Default), None), &[set(p, 6.0)], false)
        .unwrap();
    assert_eq!(quotas.effective(ANONYMOUS, "x"), vec![(p, 6.0)]);
    quotas
        .alter(&entity(named(ANONYMOUS), named("x")), &[set(p, 1.0)], false)
        .unwrap();
    assert_eq!(quotas.effective(ANONYMOUS, "x"), vec![(p, 1.0)]);
    assert_eq!(quotas.effective(ANONYMOUS, "y"), vec![(p, 6.0)]);
    // Removal.
    quotas
        .alter(
            &entity(named(ANONYMOUS), named("x")),
            &[Op {
                kind: p,
                value: None,
            }],
            false,
        )
        .unwrap();
    assert_eq!(quotas.effective(ANONYMOUS, "x"), vec![(p, 6.0)]);
}

#[test]
fn quotas_are_validated_persisted_and_reopened() {
    let dir = tempfile::tempdir().unwrap();
    let quotas = Quotas::open(dir.path(), Window::default()).unwrap();
    assert!(quotas
        .alter(
            &client("a"),
            &[set(QuotaKind::ProducerByteRate, 1.5)],
            false
        )
        .is_err());
    assert!(quotas
        .alter(
            &client("a"),
            &[set(QuotaKind::ConsumerByteRate, -1.0)],
            false
        )
        .is_err());
    quotas
        .alter(
            &client("a"),
            &[set(QuotaKind::ProducerByteRate, 100.0)],
            true,
        )
        .unwrap();
    assert!(!quotas.any(), "validate only");
    quotas
        .alter(
            &client("a"),
            &[
                set(QuotaKind::ProducerByteRate, 100.0),
                set(QuotaKind::RequestPercentage, 12.5),
            ],
            false,
        )
        .unwrap();
    drop(quotas);
    let reopened = Quotas::open(dir.path(), Window::default()).unwrap();
    assert!(reopened.any() && reopened.any_request_quota());
    let all = reopened.describe(&[], false);
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].1[&QuotaKind::RequestPercentage], 12.5);
    fs::write(dir.path().join(FILE), "{garbage").unwrap();
    let err = Quotas::open(dir.path(), Window::default()).unwrap_err();
    assert!(err.to_string().contains("client-quotas"), "{err}");
}
