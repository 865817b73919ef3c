use super::*;

const S: Duration = Duration::from_secs(1);

#[test]
fn spring_default_names() {
    // Spring Kafka 4.1's @RetryableTopic defaults: 3 attempts, a fixed 1 s back-off, one
    // retry topic with nothing appended (same-interval reuse).
    let t = RetryConfig::new("orders", "g").topology().unwrap();
    assert_eq!(t.dlt, "orders-dlt");
    assert_eq!(t.read_topics(), vec!["orders", "orders-retry"]);
    assert_eq!(t.stages[0].delay, S);
    assert_eq!(t.stage_for_attempt(2), Some(0));
    assert_eq!(t.stage_for_attempt(3), Some(0));
    assert_eq!(t.stage_for_attempt(4), None);
    assert_eq!(t.stage_for_attempt(1), None);
    // One retry of any back-off is one topic too.
    let t = RetryConfig::new("orders", "g")
        .exponential(S, 2.0, 10 * S, false)
        .max_attempts(2)
        .topology()
        .unwrap();
    assert_eq!(names(&t), ["orders-retry"]);
}

fn names(t: &Topology) -> Vec<&str> {
    t.stages.iter().map(|s| s.topic.as_str()).collect()
}

fn stages(t: &Topology, attempts: u32) -> Vec<Option<usize>> {
    (2..=attempts).map(|a| t.stage_for_attempt(a)).collect()
}

#[test]
fn spring_strategies_name_as_spring_does() {
    // The cases of Spring's DestinationTopicPropertiesFactoryTests and its topic-naming
    // page. A fixed back-off over multiple topics is suffixed by index.
    let t = RetryConfig::new("orders", "g")
        .topic_reuse(SameIntervalTopicReuse::MultipleTopics)
        .topology()
        .unwrap();
    assert_eq!(names(&t), ["orders-retry-0", "orders-retry-1"]);
    assert_eq!(stages(&t, 3), [Some(0), Some(1)]);
    // Exponential: delay suffixes, the capped delay's topic reused...
    let exp = RetryConfig::new("orders", "g")
        .exponential(S, 2.0, 4 * S, false)
        .max_attempts(6);
    let t = exp.clone().topology().unwrap();
    assert_eq!(
        names(&t),
        [
            "orders-retry-1000",
            "orders-retry-2000",
            "orders-retry-4000"
        ]
    );
    assert_eq!(stages(&t, 6), [Some(0), Some(1), Some(2), Some(2), Some(2)]);
    // ...or one topic per retry, the repeated delay indexed.
    let t = exp
        .clone()
        .topic_reuse(SameIntervalTopicReuse::MultipleTopics)
        .topology()
        .unwrap();
    assert_eq!(
        names(&t),
        [
            "orders-retry-1000",
            "orders-retry-2000",
            "orders-retry-4000-0",
            "orders-retry-4000-1",
            "orders-retry-4000-2"
        ]
    );
    assert_eq!(stages(&t, 6), [Some(0), Some(1), Some(2), Some(3), Some(4)]);
    // Index suffixes, the last topic reused.
    let t = exp
        .clone()
        .topic_suffixing(TopicSuffixing::IndexValue)
        .topology()
        .unwrap();
    assert_eq!(
        names(&t),
        ["orders-retry-0", "orders-retry-1", "orders-retry-2"]
    );
    assert_eq!(t.stages[2].delay, 4 * S);
    // Index suffixes over multiple topics: one index per retry.
    let t = exp
        .topic_suffixing(TopicSuffixing::IndexValue)
        .topic_reuse(SameIntervalTopicReuse::MultipleTopics)
        .topology()
        .unwrap();
    assert_eq!(names(&t).len(), 5);
    assert_eq!(t.stages[4].topic, "orders-retry-4");
    // Spring's suffixes can be changed; the index or delay goes after them.
    let t = RetryConfig::new("orders", "g")
        .suffixes("-again", "-dead")
        .delays([S, 2 * S])
        .topology()
        .unwrap();
    assert_eq!(names(&t), ["orders-again-1000", "orders-again-2000"]);
    assert_eq!(t.dlt, "orders-dead");
    // A fixed back-off with one attempt left over multiple topics: the delay, as Spring.
    let t = RetryConfig::new("orders", "g")
        .topic_reuse(SameIntervalTopicReuse::MultipleTopics)
        .max_attempts(2)
        .topology()
        .unwrap();
    assert_eq!(names(&t), ["orders-retry-1000"]);
}

#[test]
fn always_delay_value_keeps_the_names_lograil_used_before() {
    let t = RetryConfig::new("orders", "g")
        .topic_suffixing(TopicSuffixing::AlwaysDelayValue)
        .topology()
        .unwrap();
    assert_eq!(names(&t), ["orders-retry-1000"]);
    assert_eq!(stages(&t, 3), [Some(0), Some(0)]);
}

#[test]
fn one_topic_per_distinct_delay() {
    let t = RetryConfig::new("orders", "g")
        .delays([S, 10 * S, 60 * S])
        .max_attempts(6)
        .topology()
        .unwrap();
    let names: Vec<_> = t.stages.iter().map(|s| s.topic.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "orders-retry-1000",
            "orders-retry-10000",
            "orders-retry-60000"
        ]
    );
    let stages: Vec<_> = (2..=6).map(|a| t.stage_for_attempt(a)).collect();
    assert_eq!(stages, vec![Some(0), Some(1), Some(2), Some(2), Some(2)]);
    assert_eq!(t.place("orders-retry-10000"), Some(Place::Retry(1)));
    assert_eq!(t.place("orders"), Some(Place::Main));
    assert_eq!(t.place("orders-dlt"), None);
}

#[test]
fn exponential_is_capped_and_reuses_the_capped_stage() {
    let t = RetryConfig::new("o", "g")
        .exponential(S, 2.0, 5 * S, false)
        .max_attempts(6)
        .topology()
        .unwrap();
    let delays: Vec<_> = t.stages.iter().map(|s| s.delay.as_secs()).collect();
    assert_eq!(delays, vec![1, 2, 4, 5]);
    assert_eq!(t.stage_for_attempt(6), Some(3));
    assert_eq!(t.wait(1), 2 * S);
}

#[test]
fn exponential_delays_are_counted_as_spring_counts_them() {
    // Spring Framework's ExponentialBackOff: previous * multiplier, cut to whole ms; the
    // 7th is 11389 (7593 * 1.5), not 1000 * 1.5^6 = 11390.6.
    let t = RetryConfig::new("o", "g")
        .exponential(S, 1.5, 60 * S, false)
        .max_attempts(8)
        .topology()
        .unwrap();
    let delays: Vec<_> = t.stages.iter().map(|s| s.delay.as_millis()).collect();
    assert_eq!(delays, [1000, 1500, 2250, 3375, 5062, 7593, 11389]);
    assert_eq!(t.stages[6].topic, "o-retry-11389");
}

#[test]
fn full_jitter_stays_within_the_stage_delay() {
    let t = RetryConfig::new("o", "g")
        .exponential(S, 2.0, 5 * S, true)
        .topology()
        .unwrap();
    for _ in 0..100 {
        assert!(t.wait(0) <= S);
    }
}

#[test]
fn bad_settings_are_refused() {
    assert!(RetryConfig::new("o", "g")
        .max_attempts(0)
        .topology()
        .is_err());
    assert!(RetryConfig::new("o", "g").delays([]).topology().is_err());
    assert!(RetryConfig::new("o", "g")
        .exponential(S, 0.5, S, false)
        .topology()
        .is_err());
    // One attempt: no retry topics at all, failures go straight to the DLT.
    let t = RetryConfig::new("o", "g")
        .max_attempts(1)
        .topology()
        .unwrap();
    assert!(t.stages.is_empty());
}
