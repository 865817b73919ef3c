//! A broker killed mid-stream (Kafka only: replication factor 3, acks=all, min.insync.replicas
//! 2): no acknowledged record is lost, none is written twice, and the producer and the group's
//! consumers carry on after the leaders move.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use consumer::{ConsumeError, ProducerRecord};

use test_support::cluster::{on_kafka, read_all, unique, TestCluster};
use test_support::kafka::wait_until_async;

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
    // Timeouts with room for a loaded CI machine: three JVMs on two shared cores can take
    // seconds to answer an acks=all request while the cluster fences the dead broker.
    let producer = cluster
        .producer(&[
            ("acks", "all"),
            ("linger.ms", "5"),
            ("request.timeout.ms", "15000"),
            ("delivery.timeout.ms", "300000"),
        ])
        .await;
    const TOTAL: u32 = 6000;
    let mut deliveries = Vec::new();
    let victim = crate::producer::leader_of(&cluster, &topic, 0).await;
    let mut killed = None;
    for id in 0..TOTAL {
        let record = ProducerRecord::new(&topic)
            .key(format!("key-{}", id % 97))
            .value(id.to_string());
        deliveries.push(producer.send(record).await.unwrap());
        if id == TOTAL / 3 {
            // Let the first third be acknowledged and read, then kill a leader.
            wait_until_async("a third read", Duration::from_secs(60), || {
                seen.lock().unwrap().len() as u32 > TOTAL / 4
            })
            .await;
            killed = Some(cluster.kill_node(victim));
        }
        if id % 50 == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    assert!(killed.is_some());
    let mut acked = 0;
    for d in deliveries {
        tokio::time::timeout(Duration::from_secs(300), d)
            .await
            .expect("delivered or failed within 300 s")
            .unwrap_or_else(|e| {
                panic!(
                    "record {acked} not acknowledged despite the dead broker: {e} ({:?})",
                    producer.stats()
                )
            });
        acked += 1;
    }
    assert_eq!(acked, TOTAL);
    wait_until_async(
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
    drop(killed); // restarts the broker

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

/// The group's coordinator dies: members find the new one, keep their partitions moving,
/// commit again, and read everything produced before and after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafka_only_group_coordinator_killed() {
    if !on_kafka() {
        return;
    }
    let cluster = TestCluster::start_exclusive();
    let topic = cluster.create_topic("coordinator", 6).await;
    let group = unique("coordinator");
    let seen: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut readers = Vec::new();
    for _ in 0..2 {
        let c = Arc::new(
            cluster
                .consumer(Some(&group), &[("enable.auto.commit", "false")])
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
                        Ok(r) => {
                            let n = {
                                let mut seen = seen.lock().unwrap();
                                seen.push(
                                    std::str::from_utf8(r.value.as_deref().unwrap())
                                        .unwrap()
                                        .parse()
                                        .unwrap(),
                                );
                                seen.len()
                            };
                            // Commit as we go (and at the end of what is there); a commit
                            // during the failover may fail and is made good by a later one.
                            if n % 50 == 0 || r.offset % 50 == 0 {
                                let _ = reader.commit().await;
                            }
                        }
                        Err(ConsumeError::Closed) => return,
                        Err(e) => panic!("consumer: {e}"),
                    }
                }
            }),
        ));
    }
    // As above: room for a loaded machine while the cluster moves leaders.
    let producer = cluster
        .producer(&[("linger.ms", "5"), ("delivery.timeout.ms", "300000")])
        .await;
    let send = |from: u32, to: u32| {
        let producer = producer.clone();
        let topic = topic.clone();
        async move {
            let mut deliveries = Vec::new();
            for id in from..to {
                let record = ProducerRecord::new(&topic)
                    .key(format!("k{}", id % 31))
                    .value(id.to_string());
                deliveries.push(producer.send(record).await.unwrap());
            }
            for d in deliveries {
                d.await
                    .unwrap_or_else(|e| panic!("{e} ({:?})", producer.stats()));
            }
        }
    };
    send(0, 1000).await;
    wait_until_async("the first 1000 read", Duration::from_secs(60), || {
        seen.lock().unwrap().iter().collect::<BTreeSet<_>>().len() == 1000
    })
    .await;
    let coordinator = cluster
        .admin()
        .await
        .group_coordinator(&group)
        .await
        .unwrap();
    let killed = cluster.kill_node(coordinator);
    send(1000, 2000).await;
    wait_until_async(
        "all 2000 read after the coordinator died",
        Duration::from_secs(120),
        || seen.lock().unwrap().iter().collect::<BTreeSet<_>>().len() == 2000,
    )
    .await;
    // The group works at the new coordinator: its committed offsets reach the log end.
    for (c, _) in &readers {
        c.commit().await.unwrap();
    }
    let mut admin = cluster.admin().await;
    let ends = admin.list_offsets(&topic, 6, -1).await.unwrap();
    wait_until_async_committed(&mut admin, &group, &topic, &ends).await;
    let new_coordinator = admin.group_coordinator(&group).await.unwrap();
    assert_ne!(new_coordinator, coordinator);
    producer.close().await;
    for (c, task) in readers {
        task.abort();
        let _ = task.await;
        Arc::try_unwrap(c).unwrap().close().await;
    }
    drop(killed);
}

async fn wait_until_async_committed(
    admin: &mut consumer::Admin,
    group: &str,
    topic: &str,
    ends: &[i64],
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let committed = admin.committed_offsets(group).await.unwrap();
        let done = ends.iter().enumerate().all(|(p, end)| {
            committed
                .get(&(topic.to_string(), p as i32))
                .copied()
                .unwrap_or(0)
                == *end
        });
        if done {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "committed {committed:?}, log ends {ends:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
