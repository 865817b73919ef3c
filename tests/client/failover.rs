//! A broker killed mid-stream (Kafka only: replication factor 3, acks=all, min.insync.replicas
//! 2): no acknowledged record is lost, none is written twice, and the producer and the group's
//! consumers carry on after the leaders move.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use consumer::{ConsumeError, ProducerRecord};

use crate::cluster::{on_kafka, read_all, unique, wait_until, TestCluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_only_broker_killed_mid_stream_with_acks_all() {
    if !on_kafka() {
        return;
    }
    let cluster = TestCluster::start_exclusive();
    let topic = cluster
        .create_topic_with("failover", 6, &[("min.insync.replicas", "2")])
        .await;
    let group = unique("failover");
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut readers = Vec::new();
    for _ in 0..2 {
        let c = Arc::new(
            cluster
                .consumer(Some(&group), &[("auto.commit.interval.ms", "200")])
                .await,
        );
        c.subscribe(&[&topic]).unwrap();
        let seen = seen.clone();
        let reader = c.clone();
        readers.push((
            c,
            tokio::spawn(async move {
                loop {
                    match reader.recv().await {
                        Ok(r) => seen.lock().unwrap().push(
                            std::str::from_utf8(r.value.as_deref().unwrap())
                                .unwrap()
                                .parse()
                                .unwrap(),
                        ),
                        Err(ConsumeError::Closed) => return,
                        Err(e) => panic!("consumer: {e}"),
                    }
                }
            }),
        ));
    }
    let producer = cluster
        .producer(&[
            ("acks", "all"),
            ("linger.ms", "5"),
            ("request.timeout.ms", "5000"),
        ])
        .await;
    const TOTAL: u32 = 6000;
    let mut deliveries = Vec::new();
    let victim = crate::producer::leader_of(&cluster, &topic, 0).await;
    let mut killed = false;
    for id in 0..TOTAL {
        let record = ProducerRecord::new(&topic)
            .key(format!("key-{}", id % 97))
            .value(id.to_string());
        deliveries.push(producer.send(record).await.unwrap());
        if id == TOTAL / 3 {
            // Let the first third be acknowledged and read, then kill a leader.
            wait_until("a third read", Duration::from_secs(60), || {
                seen.lock().unwrap().len() as u32 > TOTAL / 4
            })
            .await;
            cluster.kill_node(victim);
            killed = true;
        }
        if id % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert!(killed);
    let mut acked = 0;
    for d in deliveries {
        tokio::time::timeout(Duration::from_secs(120), d)
            .await
            .expect("delivered or failed within 120 s")
            .expect("every record acknowledged despite the dead broker");
        acked += 1;
    }
    assert_eq!(acked, TOTAL);
    wait_until(
        "consumers read every record",
        Duration::from_secs(120),
        || seen.lock().unwrap().iter().collect::<BTreeSet<_>>().len() as u32 == TOTAL,
    )
    .await;
    producer.close().await;
    for (c, task) in readers {
        task.abort();
        let _ = task.await;
        Arc::try_unwrap(c).unwrap().close().await;
    }
    cluster.restart_node(victim);

    // The log holds every record exactly once, each key's records in order.
    let read = read_all(&cluster, &topic).await;
    let mut ids = BTreeSet::new();
    let mut per_key: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
    for records in read.values() {
        for r in records {
            let id: u32 = std::str::from_utf8(r.value.as_deref().unwrap())
                .unwrap()
                .parse()
                .unwrap();
            assert!(ids.insert(id), "{id} written twice");
            per_key
                .entry(r.key.clone().unwrap().to_vec())
                .or_default()
                .push(id);
        }
    }
    assert_eq!(ids.len() as u32, TOTAL);
    for (key, list) in per_key {
        assert!(list.windows(2).all(|w| w[0] < w[1]), "order of {key:?}");
    }
}
