//! What fair acquisition costs per call. `cargo test --release -p task-queue --lib -- --ignored
//! fair_acquire_cost --nocapture`

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use crate::{AckBatch, AckType, FairnessKey, RecordMeta, ShareConfig, SharePartition, Tenant};

#[test]
#[ignore = "a measurement, not a check: run in a release build"]
fn fair_acquire_cost() {
    let fair = ShareConfig {
        fairness_key: FairnessKey::Key,
        ..ShareConfig::default()
    };
    let overload = ShareConfig {
        overload_target_ms: Some(60_000),
        ..fair.clone()
    };
    for (name, config) in [
        ("offset order", ShareConfig::default()),
        ("fair turns", fair),
        ("fair turns and overload mode", overload),
    ] {
        measure(name, &config);
    }
}

fn measure(name: &str, config: &ShareConfig) {
    // 100 tenants; tenant 0 writes half of the records.
    let tenant = |o: i64| -> Tenant {
        let t = if o % 2 == 0 { 0 } else { (o / 2) % 99 + 1 };
        format!("tenant-{t}").into_bytes().into()
    };
    let mut p = SharePartition::new(0);
    let mut log_end = 20_000;
    let (mut acquire, mut learn, mut rounds) = (Duration::ZERO, Duration::ZERO, 0u32);
    for round in 0..200 {
        let started = Instant::now();
        if let Some((from, to)) = p.unknown_meta(log_end, config) {
            let metas = (from..to)
                .map(|o| RecordMeta {
                    tenant: tenant(o),
                    timestamp: o,
                    deadline: None,
                })
                .collect();
            p.learn(from, metas);
        }
        let learned = started.elapsed();
        let started = Instant::now();
        let (got, _) = p.acquire("w", 1_000 + round, 500, log_end, config);
        let took = started.elapsed();
        assert_eq!(got.count(), 500);
        if round >= 20 {
            acquire += took;
            learn += learned;
            rounds += 1;
        }
        let acks: Vec<AckBatch> = got
            .ranges
            .iter()
            .map(|&(first, last, _)| AckBatch {
                first_offset: first,
                last_offset: last,
                types: vec![AckType::Accept],
            })
            .collect();
        p.acknowledge("w", &acks, 1_000 + round, config).unwrap();
        log_end += 500;
    }
    let window = p.entries().count();
    println!(
        "{name}: acquire of 500 from a 20000-record window, 100 tenants: {:?} per call \
         (learning the new metas: {:?}); {window} entries SPSO..SPEO at the end",
        acquire / rounds,
        learn / rounds
    );
}
