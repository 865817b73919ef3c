use std::sync::Arc;

use crate::appender::AppendMode;
use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::groups::Committed;

use super::{consume_rate, OffsetSamples};
use std::time::{Duration, Instant};

fn line<'a>(text: &'a str, series: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
}

#[test]
fn consume_rate_spans_the_window_and_ignores_resets() {
    let mut samples = OffsetSamples::new();
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    assert_eq!(consume_rate(&mut samples, 0, at(0)), None);
    assert_eq!(consume_rate(&mut samples, 100, at(10)), Some(10.0));
    assert_eq!(consume_rate(&mut samples, 700, at(70)), Some(10.0));
    // The sample at 0 s is now out of the window; the one at 10 s is the base.
    assert_eq!(consume_rate(&mut samples, 900, at(80)), Some(800.0 / 70.0));
    // An offset reset backwards: no rate.
    assert_eq!(consume_rate(&mut samples, 5, at(90)), None);
}

#[test]
fn a_scrape_reports_lag_throttles_and_escapes_labels() {
    let dir = tempfile::tempdir().unwrap();
    let config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..BrokerConfig::default()
    };
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let broker = Arc::new(
        Broker::open(
            config,
            stopped,
            Arc::new(crate::metrics::Metrics::new(&crate::handlers::APIS)),
        )
        .unwrap(),
    );
    broker
        .admin()
        .create_topic("t", 1, broker.storage().topic_defaults())
        .unwrap();
    let now = log_core::now_ms();
    // 10 records, the i-th written 100 - i seconds ago.
    let records: Vec<log_core::batch::NewRecord> = (0..10)
        .map(|i| (None, Some(&b"v"[..]), now - (100 - i) * 1000))
        .collect();
    let batch = crate::appender::Batches::parse(log_core::batch::build(&records));
    broker
        .storage()
        .appender()
        .append_records(
            "t",
            0,
            Some(&batch),
            log_core::Ack::Written,
            AppendMode::Blocking,
        )
        .unwrap();
    let commit = |group: &str, offset| {
        let committed = Committed {
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_timestamp: now,
        };
        broker
            .groups()
            .offsets
            .commit(group, vec![(("t".to_string(), 0), committed)])
            .unwrap();
    };
    commit("we\"ird", 4);
    commit("done", 10);
    broker.metrics().record_throttle("slow\nclient", 250);
    broker.metrics().record_throttle("slow\nclient", 750);

    let scraper = Arc::new(super::Scraper::new(broker.clone()));
    for _ in 0..2 {
        // The second scrape reads the timestamp from its cache: the same answer.
        let text = scraper.encode().unwrap();
        let lagging = r#"{group="we\"ird",topic="t",partition="0"}"#;
        let lag = |name: &str| line(&text, &format!("{name}{lagging}"));
        assert_eq!(lag("lograil_consumer_group_lag_records"), Some("6"));
        let seconds: f64 = lag("lograil_consumer_group_lag_seconds")
            .unwrap()
            .parse()
            .unwrap();
        // The record at offset 4 was written 96 s before `now`.
        assert!((96.0..100.0).contains(&seconds), "{seconds}");
        let done = r#"{group="done",topic="t",partition="0"}"#;
        assert_eq!(
            line(&text, &format!("lograil_consumer_group_lag_seconds{done}")),
            Some("0.0")
        );
        assert_eq!(
            line(
                &text,
                &format!("lograil_consumer_group_time_to_drain_seconds{done}")
            ),
            Some("0.0")
        );
        let client = r#"{client_id="slow\nclient"}"#;
        assert_eq!(
            line(
                &text,
                &format!("lograil_client_throttle_seconds_total{client}")
            ),
            Some("1.0")
        );
        assert_eq!(
            line(
                &text,
                &format!("lograil_client_throttled_responses_total{client}")
            ),
            Some("2")
        );
        assert_eq!(
            line(&text, r#"lograil_topic_records_in_total{topic="t"}"#),
            Some("10")
        );
        assert!(text.ends_with("# EOF\n"));
    }
}

#[test]
fn a_scrape_reports_streams_groups_members_and_tasks() {
    use crate::groups::streams::assignor::Tasks;
    use crate::groups::streams::topology::{Subtopology, Topology};
    use crate::groups::streams::Beat;

    let dir = tempfile::tempdir().unwrap();
    let mut config = BrokerConfig {
        data_dir: dir.path().to_path_buf(),
        ..BrokerConfig::default()
    };
    config.groups.streams.initial_delay = Duration::ZERO;
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    let metrics = Arc::new(crate::metrics::Metrics::new(&crate::handlers::APIS));
    let broker = Arc::new(Broker::open(config, stopped, metrics).unwrap());
    broker
        .admin()
        .create_topic("lines", 3, broker.storage().topic_defaults())
        .unwrap();
    let topology = Topology {
        epoch: 0,
        subtopologies: vec![Subtopology {
            id: "0".into(),
            source_topics: vec!["lines".into()],
            source_regex: vec![],
            changelogs: vec![],
            repartition_sinks: vec![],
            repartition_sources: vec![],
            copartition_groups: vec![],
        }],
    };
    let join = Beat {
        member_id: "m".into(),
        rebalance_timeout_ms: 1000,
        topology: Some(topology),
        owned: Some(Tasks::default()),
        process_id: Some("p".into()),
        ..Beat::default()
    };
    let partitions = |t: &str| Some(broker.storage().log.topic(t)?.partitions().len() as i32);
    let answer = broker
        .groups()
        .streams
        .heartbeat("app", join, Instant::now(), &partitions)
        .unwrap();
    assert_eq!(answer.tasks.unwrap().active.len(), 3);
    let scraper = Arc::new(super::Scraper::new(broker.clone()));
    let text = scraper.encode().unwrap();
    let members = line(
        &text,
        "lograil_streams_group_members{group=\"app\",state=\"Stable\"}",
    );
    assert_eq!(members, Some("1"), "{text}");
    let tasks = |kind: &str| {
        let series = format!("lograil_streams_group_tasks{{group=\"app\",kind=\"{kind}\"}}");
        line(&text, &series).map(str::to_string)
    };
    assert_eq!(tasks("active").as_deref(), Some("3"));
    assert_eq!(tasks("standby").as_deref(), Some("0"));
    assert_eq!(tasks("unassigned").as_deref(), Some("0"));
}
