//! A real Spring Kafka 4.1 `@RetryableTopic` service (`tests/spring/java`, built by
//! `tests/spring/build.sh`) beside lograil's retry chain and `lograil dlt`: Spring's dead
//! letters read, filtered by the class the listener threw and redriven once; a retry handed
//! from lograil to Spring and from Spring to lograil, each side reading the other's retry topic
//! in a group new to it from the earliest offset; Spring's default naming (`<topic>-retry`) and
//! MULTIPLE_TOPICS (`<topic>-retry-0`, `-retry-1`), the same on both sides.
//!
//! One JVM per test. Skipped, with the reason printed, when `java` or `mvn` is not on PATH
//! (`.ci/run` installs both).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use retry_topic::headers as h;
use retry_topic::{Delivery, Event, HandlerError, RetryConfig, SameIntervalTopicReuse};
use serde_json::Value;

use crate::harness::{
    chain_config, count, header, lograil, produce, records_of, value_of, wait_for, Running,
};
use test_support::cluster::{unique, TestCluster};

const LEFE: &str = "org.springframework.kafka.listener.ListenerExecutionFailedException";
const DECLINED: &str = "lograil.spring.PaymentDeclinedException";

/// The Spring application's jar, built when stale; `None` (with the reason printed) without
/// `java` or `mvn`.
fn spring_jar() -> Option<PathBuf> {
    static JAR: OnceLock<Option<PathBuf>> = OnceLock::new();
    JAR.get_or_init(|| {
        let dir = test_support::java::built("spring", "the Spring Kafka application")?;
        Some(dir.join("java/target/spring-retry-app.jar"))
    })
    .clone()
}

/// One `DELIVERY` line of the Spring application.
#[derive(Debug, Clone)]
struct SpringDelivery {
    topic: String,
    offset: i64,
    key: String,
    value: String,
    attempt: u32,
    now: i64,
    due: i64,
    ok: bool,
}

impl SpringDelivery {
    fn parse(line: &str) -> Option<SpringDelivery> {
        let rest = line.strip_prefix("DELIVERY ")?;
        let field = |name: &str| {
            rest.split(' ')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                .map(str::to_string)
        };
        Some(SpringDelivery {
            topic: field("topic")?,
            offset: field("offset")?.parse().ok()?,
            key: field("key")?,
            value: field("value")?,
            attempt: field("attempt")?.parse().ok()?,
            now: field("now")?.parse().ok()?,
            due: field("due")?.parse().ok()?,
            ok: field("outcome")? == "ok",
        })
    }
}

/// The Spring application running against the cluster's plaintext listeners.
struct SpringApp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Arc<Mutex<Vec<String>>>,
    stderr: tempfile::NamedTempFile,
}

impl SpringApp {
    /// Starts it (`naming`: `default` or `multiple`) and waits until every one of its
    /// `containers` (main, retry topics, DLT) has its partitions.
    async fn start(
        jar: &std::path::Path,
        cluster: &TestCluster,
        topic: &str,
        group: &str,
        naming: &str,
        delay_ms: u64,
        containers: usize,
    ) -> SpringApp {
        let stderr = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new("java")
            // A lean start: no JIT tiers beyond C1, the serial collector.
            .args(["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xss512k"])
            .arg("-jar")
            .arg(jar)
            .args(["--bootstrap", cluster.plain_bootstrap()])
            .args(["--topic", topic, "--group", group, "--naming", naming])
            .args(["--attempts", "3", "--delay-ms", &delay_ms.to_string()])
            .env_remove("LD_LIBRARY_PATH")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr.reopen().unwrap())
            .spawn()
            .expect("java starts");
        let stdin = child.stdin.take();
        let lines = test_support::process::collect_lines(child.stdout.take().unwrap());
        let app = SpringApp {
            child,
            stdin,
            lines,
            stderr,
        };
        app.wait("every container assigned", 90, |lines| {
            let groups: BTreeSet<&str> = lines
                .iter()
                .filter_map(|l| l.strip_prefix("ASSIGNED ")?.split(' ').next())
                .collect();
            groups.len() >= containers
        })
        .await;
        app
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    fn deliveries(&self) -> Vec<SpringDelivery> {
        self.lines()
            .iter()
            .filter_map(|l| SpringDelivery::parse(l))
            .collect()
    }

    /// The topics its containers were assigned.
    fn assigned_topics(&self) -> BTreeSet<String> {
        self.lines()
            .iter()
            .filter_map(|l| l.strip_prefix("ASSIGNED "))
            .flat_map(|l| {
                let (_, tps) = l.split_once(' ').unwrap_or_default();
                tps.split(',')
                    .filter_map(|tp| tp.rsplit_once('-').map(|(t, _)| t.to_string()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The groups its containers joined.
    fn groups(&self) -> BTreeSet<String> {
        self.lines()
            .iter()
            .filter_map(|l| Some(l.strip_prefix("ASSIGNED ")?.split(' ').next()?.to_string()))
            .collect()
    }

    async fn wait(&self, what: &str, secs: u64, check: impl Fn(&[String]) -> bool) {
        let lines = self.lines.clone();
        let mut stderr = self.stderr.reopen().unwrap();
        let done = tokio::time::timeout(Duration::from_secs(secs), async {
            loop {
                if check(&lines.lock().unwrap()) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        if done.is_err() {
            let mut log = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut log);
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "Spring application: no {what} in {secs} s\nstdout:\n{}\nstderr (last lines, newest first):\n{}",
                lines.lock().unwrap().join("\n"),
                tail.join("\n")
            );
        }
    }

    /// Stops it as a service stops (its containers commit and leave their groups); its
    /// deliveries, all of them.
    async fn stop(mut self) -> Vec<SpringDelivery> {
        drop(self.stdin.take());
        self.wait("STOPPED", 60, |l| l.iter().any(|l| l == "STOPPED"))
            .await;
        let _ = self.child.wait();
        self.deliveries()
    }
}

impl Drop for SpringApp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[derive(Debug, thiserror::Error)]
#[error("ledger unavailable")]
struct LedgerDown;

/// Spring → lograil: a Spring service's dead letters are shown with the class its listener
/// threw (not Spring's wrapper), filtered by it, redriven once; Spring's stack trace is text;
/// `dlt parked` counts what Spring's retry group consumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spring_dead_letters_are_shown_filtered_by_cause_and_redriven_once() {
    let Some(jar) = spring_jar() else { return };
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("spring-dlt", 1).await;
    let group = unique("spring-billing");
    let dlt = format!("{topic}-dlt");
    // lograil's defaults for Spring's (3 attempts, a fixed back-off).
    let ours = RetryConfig::new(&topic, &group)
        .delays([Duration::from_millis(200)])
        .topology()
        .unwrap();

    let app = SpringApp::start(&jar, &cluster, &topic, &group, "default", 200, 3).await;
    let mut sent = Vec::new();
    for i in 1..=3 {
        sent.push((format!("k{i}"), format!("decline-{i}")));
    }
    sent.push(("k4".to_string(), "fail-until-9".to_string()));
    let records: Vec<_> = sent
        .iter()
        .map(|(k, v)| (Some(k.as_str()), v.as_str(), Vec::new()))
        .collect();
    produce(&cluster, &topic, 0, &records).await;
    app.wait("4 dead letters", 60, |l| {
        l.iter().filter(|l| l.starts_with("DLT ")).count() == 4
    })
    .await;
    let topics = app.assigned_topics();
    let groups = app.groups();
    app.stop().await;
    assert_eq!(
        topics,
        BTreeSet::from([topic.clone(), format!("{topic}-retry"), dlt.clone()]),
        "Spring's default names"
    );
    let mut lograils: BTreeSet<String> = ours.read_topics().into_iter().collect();
    lograils.insert(ours.dlt.clone());
    assert_eq!(lograils, topics, "lograil's defaults name Spring's topics");
    // Spring's group per retry topic: the main group with the topic's suffix.
    assert!(groups.contains(&format!("{group}-retry")), "{groups:?}");

    let (ok, out, err) = lograil(&cluster, &["dlt", "show", "--from", &dlt, "--json"]);
    assert!(ok, "{err}");
    let shown: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(shown.len(), 4);
    let declined: Vec<&Value> = shown.iter().filter(|d| d["class"] == DECLINED).collect();
    assert_eq!(declined.len(), 3, "{out}");
    for d in &declined {
        assert_eq!(d["wrapper"], LEFE);
        assert_eq!(d["origin"]["topic"], topic.as_str());
        assert_eq!(d["origin"]["group"], group.as_str());
        assert_eq!(d["attempts"], 3);
        let trace = d["stack_trace"].as_str().unwrap();
        assert!(
            trace.starts_with(LEFE) && trace.contains("\n\tat "),
            "{trace}"
        );
    }
    assert!(shown
        .iter()
        .any(|d| d["class"] == "lograil.spring.TransientException"));
    let (ok, text, err) = lograil(
        &cluster,
        &[
            "dlt",
            "show",
            "--from",
            &dlt,
            "--partition",
            "0",
            "--offset",
            "0",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        text.contains(&format!("error:    {DECLINED}: "))
            && text.contains(&format!("wrapped:  in {LEFE}")),
        "{text}"
    );
    assert!(
        text.contains(&format!("kafka_exception-stacktrace: {LEFE}")),
        "the stack trace is text:\n{text}"
    );
    assert!(!text.contains("stacktrace: 0x"), "{text}");

    let (ok, out, err) = lograil(
        &cluster,
        &[
            "dlt",
            "list",
            "--from",
            &dlt,
            "--filter",
            "PaymentDeclinedException",
            "--json",
        ],
    );
    assert!(ok, "{err}");
    let listed: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(
        listed.len(),
        3,
        "--filter by the cause matches Spring's 3: {out}"
    );

    // Spring's retry group consumed every retry: nothing is waiting.
    let (ok, out, err) = lograil(
        &cluster,
        &[
            "dlt", "parked", "--topic", &topic, "--group", &group, "--json",
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(out.trim(), "[]", "keys Spring consumed are not parked");

    let redrive = || {
        let (ok, out, err) = lograil(
            &cluster,
            &[
                "dlt",
                "redrive",
                "--from",
                &dlt,
                "--filter",
                "PaymentDeclinedException",
                "--json",
            ],
        );
        assert!(ok, "{err}");
        serde_json::from_str::<Value>(&out).unwrap()
    };
    let first = redrive();
    assert_eq!(first["redriven"].as_array().unwrap().len(), 3, "{first}");
    assert_eq!(first["filtered"], 1);
    let again = redrive();
    assert_eq!(again["redriven"].as_array().unwrap().len(), 0, "{again}");
    assert_eq!(again["already"], 3);
    let back = records_of(&cluster, &topic).await;
    let redriven: Vec<_> = back
        .iter()
        .filter(|r| header(r, h::REDRIVE_OF).is_some())
        .collect();
    assert_eq!(redriven.len(), 3);
    let mut values: Vec<String> = redriven.iter().map(|r| value_of(r)).collect();
    values.sort();
    assert_eq!(values, ["decline-1", "decline-2", "decline-3"]);
    for r in redriven {
        assert_eq!(header(r, h::EXCEPTION_CAUSE_FQCN), None);
        assert_eq!(header(r, h::EXCEPTION_STACKTRACE), None);
        assert_eq!(header(r, h::ATTEMPTS), None);
    }
}

/// lograil → Spring, MULTIPLE_TOPICS on both sides: lograil's first failure goes to
/// `<topic>-retry-0`; Spring, whose group for that topic is new to it, reads it from the
/// earliest offset when due, fails it again to `<topic>-retry-1` and succeeds there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lograil_hands_a_retry_to_spring_over_multiple_topics() {
    let Some(jar) = spring_jar() else { return };
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("to-spring", 1).await;
    let group = unique("to-spring-g");
    let delay = Duration::from_millis(2500);
    let config = chain_config(&cluster, &topic, &group)
        .delays([delay])
        .topic_reuse(SameIntervalTopicReuse::MultipleTopics);
    let topology = config.topology().unwrap();
    let retry0 = format!("{topic}-retry-0");
    let retry1 = format!("{topic}-retry-1");
    assert_eq!(
        topology.read_topics(),
        [topic.clone(), retry0.clone(), retry1.clone()]
    );
    let handler = |_d: Delivery| async move { Err::<(), _>(HandlerError::from(LedgerDown)) };
    let running = Running::start(&cluster, config, handler).await;
    produce(
        &cluster,
        &topic,
        0,
        &[(Some("k"), "fail-until-3-x", Vec::new())],
    )
    .await;
    wait_for("lograil forwarded to retry-0", 30, || {
        running.count(|e| matches!(e, Event::Forwarded { to, .. } if *to == retry0)) == 1
    })
    .await;
    // Stopped before the retry is due: the record waits in retry-0 for Spring.
    running.stop().await;

    let app = SpringApp::start(&jar, &cluster, &topic, &group, "multiple", 2500, 4).await;
    app.wait("attempt 3 on retry-1", 60, |l| {
        l.iter()
            .filter_map(|l| SpringDelivery::parse(l))
            .any(|d| d.topic == retry1 && d.ok)
    })
    .await;
    let topics = app.assigned_topics();
    let deliveries = app.stop().await;
    assert_eq!(
        topics,
        BTreeSet::from([
            topic.clone(),
            retry0.clone(),
            retry1.clone(),
            format!("{topic}-dlt")
        ]),
        "Spring's MULTIPLE_TOPICS names are lograil's"
    );
    assert!(
        deliveries.iter().all(|d| d.topic != topic),
        "lograil committed the main record: {deliveries:?}"
    );
    let second = deliveries
        .iter()
        .find(|d| d.topic == retry0)
        .expect("Spring read lograil's retry");
    assert_eq!((second.attempt, second.offset, second.ok), (2, 0, false));
    assert_eq!(
        (second.key.as_str(), second.value.as_str()),
        ("k", "fail-until-3-x")
    );
    assert!(second.due > 0 && second.now >= second.due, "{second:?}");
    let third = deliveries.iter().find(|d| d.topic == retry1).unwrap();
    assert_eq!(third.attempt, 3);
    assert_eq!(count(&cluster, &format!("{topic}-dlt")).await, 0);
}

/// Spring → lograil, Spring's default naming: Spring's first failure goes to `<topic>-retry`;
/// lograil, whose group is new to that topic, reads it from the earliest offset when due,
/// fails it once more and succeeds on attempt 3. Its forward carries its own exception headers
/// and none of Spring's from attempt 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spring_hands_a_retry_to_lograil_without_its_stale_exception_headers() {
    let Some(jar) = spring_jar() else { return };
    let cluster = TestCluster::start();
    let topic = cluster.create_topic("from-spring", 1).await;
    let group = unique("from-spring-g");
    let retry = format!("{topic}-retry");

    // Long enough for Spring to stop before its retry is due (it takes under a second).
    const DELAY_MS: i64 = 4000;
    let app = SpringApp::start(
        &jar,
        &cluster,
        &topic,
        &group,
        "default",
        DELAY_MS as u64,
        3,
    )
    .await;
    produce(
        &cluster,
        &topic,
        0,
        &[(Some("k"), "fail-until-9-y", Vec::new())],
    )
    .await;
    app.wait("attempt 1", 30, |l| {
        l.iter()
            .filter_map(|l| SpringDelivery::parse(l))
            .any(|d| d.attempt == 1)
    })
    .await;
    // Forwarded by Spring and its main offset committed; then it stops, before the retry is
    // due, so its retry group consumes nothing.
    let mut admin = cluster.admin().await;
    let mut forwarded_and_committed = false;
    for _ in 0..200 {
        let committed = admin.committed_offsets(&group).await.unwrap();
        if count(&cluster, &retry).await == 1 && committed.get(&(topic.clone(), 0)) == Some(&1) {
            forwarded_and_committed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        forwarded_and_committed,
        "Spring forwarded and committed the main record"
    );
    let spring_topics = app.assigned_topics();
    let spring = app.stop().await;
    let first = &spring[0];
    eprintln!(
        "Spring stopped {} ms after its attempt 1, {} ms before its retry was due",
        now_ms() - first.now,
        first.now + DELAY_MS - now_ms()
    );
    assert!(
        spring.iter().all(|d| d.attempt == 1),
        "Spring stopped before its retry: {spring:?}"
    );
    let spring_retry_group = admin
        .committed_offsets(&format!("{group}-retry"))
        .await
        .unwrap();
    assert_eq!(spring_retry_group.get(&(retry.clone(), 0)), None);

    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = attempts.clone();
    let handler = move |d: Delivery| {
        let seen = seen.clone();
        async move {
            seen.lock().unwrap().push((
                d.record.topic.to_string(),
                d.attempt,
                now_ms(),
                h::backoff_timestamp(&d.record).unwrap().unwrap_or(-1),
            ));
            if d.attempt < 3 {
                return Err(HandlerError::from(LedgerDown));
            }
            Ok(())
        }
    };
    let config = chain_config(&cluster, &topic, &group).delays([Duration::from_millis(300)]);
    let topology = config.topology().unwrap();
    let mut lograils: BTreeSet<String> = topology.read_topics().into_iter().collect();
    lograils.insert(topology.dlt.clone());
    assert_eq!(
        lograils, spring_topics,
        "lograil's defaults name Spring's topics"
    );
    let running = Running::start(&cluster, config, handler).await;
    wait_for("attempt 3 processed", 60, || {
        attempts.lock().unwrap().len() == 2
    })
    .await;
    running.stop().await;
    let attempts = attempts.lock().unwrap().clone();
    assert_eq!(attempts[0].0, retry, "{attempts:?}");
    assert_eq!(
        attempts[0].1, 2,
        "lograil took Spring's retry: {attempts:?}"
    );
    assert!(
        attempts[0].2 >= attempts[0].3,
        "not before Spring's due time: {attempts:?}"
    );
    assert_eq!((attempts[1].0.as_str(), attempts[1].1), (retry.as_str(), 3));

    let forwarded = records_of(&cluster, &retry).await;
    assert_eq!(forwarded.len(), 2);
    let ours = &forwarded[1];
    assert_eq!(header(ours, h::ATTEMPTS), Some(&3u32.to_be_bytes()[..]));
    assert_eq!(header(ours, h::ORIGINAL_TOPIC), Some(topic.as_bytes()));
    assert_eq!(
        header(ours, h::ORIGINAL_OFFSET),
        Some(&0i64.to_be_bytes()[..])
    );
    let class = String::from_utf8_lossy(header(ours, h::EXCEPTION_FQCN).unwrap()).into_owned();
    assert!(class.ends_with("LedgerDown"), "{class}");
    for stale in [h::EXCEPTION_CAUSE_FQCN, h::EXCEPTION_STACKTRACE] {
        assert_eq!(
            header(ours, stale),
            None,
            "Spring's {stale} stayed beside ours"
        );
    }
    assert_eq!(
        ours.headers
            .iter()
            .filter(|(n, _)| n == h::EXCEPTION_FQCN)
            .count(),
        1,
        "one exception class, ours"
    );
    // Spring's own forward had them: the stale check checks something.
    let spring = &forwarded[0];
    assert_eq!(
        header(spring, h::EXCEPTION_CAUSE_FQCN),
        Some(&b"lograil.spring.TransientException"[..])
    );
    assert!(header(spring, h::EXCEPTION_STACKTRACE).is_some());
}
