//! Acquisition with fair turns and the overload mode, on a test clock.

#![allow(clippy::unwrap_used)]

use crate::{
    AckBatch, AckType, ArchiveReason, FairnessKey, RecordMeta, RecordState, ShareConfig,
    SharePartition, Tenant, TenantStats,
};

fn fair() -> ShareConfig {
    ShareConfig {
        fairness_key: FairnessKey::Key,
        ..ShareConfig::default()
    }
}

fn meta(tenant: &str, timestamp: i64, deadline: Option<i64>) -> RecordMeta {
    RecordMeta {
        tenant: tenant.as_bytes().into(),
        timestamp,
        deadline,
    }
}

/// A partition whose log holds `tenants[i]`'s record at offset i, all metas learned.
fn partition(tenants: &[&str], config: &ShareConfig) -> SharePartition {
    let mut p = SharePartition::new(0);
    let end = tenants.len() as i64;
    let (from, to) = p.unknown_meta(end, config).unwrap();
    assert_eq!((from, to), (0, end.min(config.lookahead() as i64)));
    p.learn(
        from,
        tenants[from as usize..to as usize]
            .iter()
            .map(|t| meta(t, 0, None))
            .collect(),
    );
    assert_eq!(p.unknown_meta(end, config), None);
    p
}

fn accept(p: &mut SharePartition, member: &str, offsets: &[i64], config: &ShareConfig) {
    let batches: Vec<AckBatch> = offsets
        .iter()
        .map(|&o| AckBatch {
            first_offset: o,
            last_offset: o,
            types: vec![AckType::Accept],
        })
        .collect();
    p.acknowledge(member, &batches, 0, config).unwrap();
}

fn offsets(p: &mut SharePartition, n: usize, end: i64, now: i64, c: &ShareConfig) -> Vec<i64> {
    p.acquire("w", now, n, end, c).0.offsets().collect()
}

#[test]
fn one_record_fetches_take_turns_and_a_newcomer_waits_one_round() {
    let config = fair();
    let mut log = vec!["a"; 10];
    log.extend(["b", "b", "c", "c"]);
    let mut p = partition(&log, &config);
    let got: Vec<i64> = (0..8)
        .flat_map(|_| offsets(&mut p, 1, 14, 0, &config))
        .collect();
    assert_eq!(got, vec![0, 10, 12, 1, 11, 13, 2, 3]);
    // b and c are done; d arrives behind a: served at the very next turn.
    p.learn(14, vec![meta("d", 0, None)]);
    assert_eq!(offsets(&mut p, 2, 15, 0, &config), vec![4, 14]);
    // SPEO went to 15 on the way; the offsets between are entries, still available.
    assert_eq!(p.end(), 15);
    assert_eq!(p.entry(9).unwrap().deliveries, 0);
    assert!(matches!(
        p.entry(9).unwrap().state,
        RecordState::Available { .. }
    ));
}

/// What is left of a turn carries over to the next fetch: a tenant of weight 2 fetched one
/// record at a time gets two in a row (each fetch used to end its turn).
#[test]
fn a_turn_spans_one_record_fetches() {
    let mut config = fair();
    config.fairness_weights.insert(b"a".to_vec(), 2);
    let log: Vec<&str> = (0..20).map(|i| if i < 10 { "a" } else { "b" }).collect();
    let mut p = partition(&log, &config);
    let got: Vec<i64> = (0..6)
        .flat_map(|_| offsets(&mut p, 1, 20, 0, &config))
        .collect();
    assert_eq!(got, vec![0, 1, 10, 2, 3, 11]);
}

#[test]
fn weights_are_honoured_over_many_fetches() {
    let mut config = fair();
    config.fairness_weights.insert(b"a".to_vec(), 3);
    let log: Vec<&str> = (0..800)
        .map(|i| if i % 2 == 0 { "a" } else { "b" })
        .collect();
    let mut p = partition(&log, &config);
    let mut served = [0usize; 2];
    for fetch in 0..60 {
        // Fetches of 1 and of 7 alike.
        let n = if fetch % 2 == 0 { 1 } else { 7 };
        let got = offsets(&mut p, n, 800, 0, &config);
        assert_eq!(got.len(), n, "work-conserving");
        for &o in &got {
            served[(o % 2) as usize] += 1;
        }
        accept(&mut p, "w", &got, &config);
    }
    assert_eq!(served[0] + served[1], 240);
    assert_eq!((served[0], served[1]), (180, 60), "3:1");
    // FIFO within a tenant: each served its oldest records.
    assert_eq!(p.start(), 1 + 2 * 60);
}

#[test]
fn work_conserving_within_the_window_and_past_it() {
    let mut config = fair();
    config.fairness_window = 100;
    // One tenant only, 300 records, metas for the first 100 (the window).
    let mut p = partition(&vec!["a"; 300], &config);
    assert_eq!(
        offsets(&mut p, 150, 300, 0, &config),
        (0..150).collect::<Vec<_>>()
    );
    // The lock limit still holds.
    config.max_record_locks = 160;
    assert_eq!(offsets(&mut p, 100, 300, 0, &config).len(), 10);
}

#[test]
fn fairness_off_again_forgets_the_window() {
    let mut config = fair();
    let mut p = partition(&["a", "a", "b"], &config);
    assert_eq!(offsets(&mut p, 2, 3, 0, &config), vec![0, 2]);
    config.fairness_key = FairnessKey::None;
    assert_eq!(p.unknown_meta(3, &config), None);
    assert_eq!(offsets(&mut p, 2, 3, 0, &config), vec![1]);
    assert!(p.tenant_stats(10).is_empty());
}

#[test]
fn codel_switches_on_after_an_interval_above_target_and_off_when_drained() {
    let config = ShareConfig {
        overload_target_ms: Some(100),
        overload_interval_ms: 1000,
        max_record_locks: 100,
        ..ShareConfig::default()
    };
    let mut p = SharePartition::new(0);
    p.learn(0, (0..10).map(|i| meta("", i, None)).collect());
    let at = |p: &mut SharePartition, now: i64| p.acquire("w", now, 0, 10, &config).1;
    assert_eq!(at(&mut p, 50).overload, None, "below target");
    assert_eq!(at(&mut p, 200).overload, None, "above since 200");
    assert_eq!(at(&mut p, 1100).overload, None);
    assert!(!p.overloaded());
    assert_eq!(at(&mut p, 1200).overload, Some(true));
    assert!(p.overloaded());
    assert_eq!(at(&mut p, 1300).overload, None, "still on");
    // Newest first while on.
    let (got, changes) = p.acquire("w", 1400, 3, 10, &config);
    assert_eq!(got.ranges, vec![(7, 9, 1)]);
    assert_eq!(changes.overload, None);
    // Drained: the next acquisition finds none available and switches it off.
    let (got, _) = p.acquire("w", 1500, 100, 10, &config);
    assert_eq!(got.count(), 7);
    assert_eq!(at(&mut p, 1600).overload, Some(false));
    assert!(!p.overloaded());
    // Above again, but it dipped in between: the interval starts over.
    let mut q = SharePartition::new(0);
    q.learn(0, vec![meta("", 0, None), meta("", 5_000, None)]);
    let at = |q: &mut SharePartition, now: i64, n| q.acquire("w", now, n, 2, &config).1;
    assert_eq!(at(&mut q, 1_000, 0).overload, None);
    // Offset 0 taken: the oldest available is 5000, within target at 5050.
    assert_eq!(at(&mut q, 1_100, 1).overload, None);
    assert_eq!(at(&mut q, 5_050, 0).overload, None);
    assert_eq!(at(&mut q, 5_200, 0).overload, None);
    assert_eq!(at(&mut q, 6_150, 0).overload, None, "950 ms above");
    assert_eq!(at(&mut q, 6_200, 0).overload, Some(true));
}

#[test]
fn overload_archives_expired_records_and_serves_newest_first_per_tenant() {
    let config = ShareConfig {
        overload_target_ms: Some(100),
        overload_interval_ms: 100,
        fairness_key: FairnessKey::Key,
        ..ShareConfig::default()
    };
    let mut p = SharePartition::new(0);
    // a: 0..4 (1 and 2 due by 500), b: 4..6; all written at 0.
    p.learn(
        0,
        vec![
            meta("a", 0, None),
            meta("a", 0, Some(400)),
            meta("a", 0, Some(450)),
            meta("a", 0, Some(10_000)),
            meta("b", 0, None),
            meta("b", 0, Some(300)),
        ],
    );
    // Not overloaded yet: nothing expires, oldest first.
    let (got, changes) = p.acquire("w", 450, 1, 6, &config);
    assert_eq!(got.ranges, vec![(0, 0, 1)]);
    assert!(changes.archived.is_empty());
    let (got, changes) = p.acquire("w", 600, 3, 6, &config);
    assert_eq!(changes.overload, Some(true));
    let mut expired: Vec<(i64, ArchiveReason)> = changes
        .archived
        .iter()
        .map(|a| (a.offset, a.reason))
        .collect();
    expired.sort_unstable_by_key(|(o, _)| *o);
    assert_eq!(
        expired,
        vec![
            (1, ArchiveReason::Expired),
            (2, ArchiveReason::Expired),
            (5, ArchiveReason::Expired)
        ]
    );
    assert!(changes.offsets.contains(&5), "persisted");
    // Then a's newest (3), b's newest (4): all that is left.
    assert_eq!(got.offsets().collect::<Vec<_>>(), vec![3, 4]);
    assert_eq!(p.end(), 6);
}

#[test]
fn tenant_stats_rank_by_available_and_sum_the_rest() {
    let config = fair();
    let mut log = vec!["a"; 5];
    log.extend(["b"; 3]);
    log.extend(["c", "c", "d"]);
    let mut p = SharePartition::new(0);
    p.learn(
        0,
        log.iter()
            .enumerate()
            .map(|(i, t)| meta(t, 100 + i as i64, None))
            .collect(),
    );
    // One record of each tenant in flight (a0, b5, c8, d10), a0 then accepted.
    let got = offsets(&mut p, 4, 11, 0, &config);
    assert_eq!(got, vec![0, 5, 8, 10]);
    accept(&mut p, "w", &[0], &config);
    let stats = p.tenant_stats(2);
    let tenant = |t: &str| Some(Tenant::from(t.as_bytes()));
    assert_eq!(
        stats,
        vec![
            TenantStats {
                tenant: tenant("a"),
                available: 4,
                in_flight: 0,
                oldest_available_ms: Some(101)
            },
            TenantStats {
                tenant: tenant("b"),
                available: 2,
                in_flight: 1,
                oldest_available_ms: Some(106)
            },
            TenantStats {
                tenant: None,
                available: 1,
                in_flight: 2,
                oldest_available_ms: Some(109)
            },
        ]
    );
    assert_eq!(p.tenant_stats(10).len(), 4);
}

#[test]
fn restore_and_reset_ask_for_the_window_again() {
    let config = fair();
    let mut p = partition(&["a", "a", "b", "b"], &config);
    assert_eq!(offsets(&mut p, 2, 4, 0, &config), vec![0, 2]);
    // What the store would replay: the changed entries, SPSO and SPEO.
    let entries = p.entries().map(|(o, e)| (o, e.clone())).collect();
    let mut r = SharePartition::restore(p.start(), p.end(), entries);
    assert_eq!((r.start(), r.end()), (0, 3));
    assert!(matches!(
        r.entry(1).unwrap().state,
        RecordState::Available { .. }
    ));
    assert_eq!(r.entry(2).unwrap().deliveries, 1);
    assert_eq!(r.unknown_meta(4, &config), Some((0, 4)));
    r.learn(
        0,
        ["a", "a", "b", "b"]
            .iter()
            .map(|t| meta(t, 0, None))
            .collect(),
    );
    assert_eq!(offsets(&mut r, 4, 4, 0, &config), vec![0, 1, 2, 3]);
    p.reset_start(3);
    assert_eq!(p.unknown_meta(4, &config), None, "3 was known already");
    p.reset_start(1);
    assert_eq!(p.unknown_meta(4, &config), Some((1, 4)));
}
