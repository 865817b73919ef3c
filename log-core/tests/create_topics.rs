//! Topic creation does its file work without holding the topic map: a big creation leaves
//! other topics readable and creatable, and concurrent creations of one name make one topic.
// A test is one scenario, read top to bottom: the 80-line bound (clippy.toml) holds product code.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

use std::sync::{Arc, Barrier};

use log_core::{Log, TopicConfig, TopicError};

#[test]
fn concurrent_creations_of_one_name_make_one_topic() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path()).unwrap());
    let start = Arc::new(Barrier::new(8));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let (log, start) = (log.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                log.create_topic("same", 20, TopicConfig::default())
                    .map(|t| t.partitions().len())
            })
        })
        .collect();
    let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    let created: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(created, vec![&20], "exactly one creation succeeds");
    assert!(results
        .iter()
        .filter_map(|r| r.as_ref().err())
        .all(|e| matches!(e, TopicError::AlreadyExists(_))));
    drop(log);
    let log = Log::open(dir.path()).unwrap();
    assert_eq!(log.topic("same").unwrap().partitions().len(), 20);
}

#[test]
fn other_topics_are_served_while_a_big_topic_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Log::open(dir.path()).unwrap());
    log.create_topic("small", 1, TopicConfig::default())
        .unwrap();
    let big = {
        let log = log.clone();
        std::thread::spawn(move || log.create_topic("big", 3000, TopicConfig::default()))
    };
    // Wait until the creation is under way (its first partition directory exists)...
    while !dir.path().join("big-0").exists() {
        assert!(!big.is_finished(), "the creation ended before it began");
        std::thread::yield_now();
    }
    // ...then, before it ends, another topic is read and one more created.
    assert!(log.topic("small").is_some());
    log.create_topic("another", 1, TopicConfig::default())
        .unwrap();
    assert!(
        log.topic("big").is_none() && !dir.path().join("big.topic").exists(),
        "the big creation was over before the others were served: they waited for it"
    );
    assert!(matches!(
        log.create_topic("big", 1, TopicConfig::default()),
        Err(TopicError::AlreadyExists(_))
    ));
    assert_eq!(big.join().unwrap().unwrap().partitions().len(), 3000);
}
