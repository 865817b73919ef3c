//! Kafka Streams 4.4 (at-least-once): a word count and a windowed word count over known input
//! whose timestamps the test sets, exact after a stop, a deleted state directory and a restart.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use consumer::{ProducerRecord, TopicPartition};
use test_support::cluster::{read_all, unique, TestCluster};

use crate::java::{classpath, JavaApp, TURN};

/// Tumbling window size of the windowed count.
const WINDOW_MS: i64 = 10_000;
const VOCABULARY: [&str; 12] = [
    "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet",
    "kilo", "lima",
];
/// Input lines in all; the first run gets `FIRST` of them (mid-window: window 30 is counted by
/// both runs).
const LINES: usize = 600;
const FIRST: usize = 305;

/// Input line `i`: its text and timestamp. Every line is 1 s after the one before, from
/// `base`; in the second part every tenth line is back in the early windows (late, within the
/// grace period), so windows the first run counted are counted on after the restore.
fn line(i: usize, base: i64) -> (String, i64) {
    let mut seed = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut next = || {
        seed ^= seed >> 31;
        seed = seed.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        seed ^= seed >> 29;
        seed
    };
    let words = 1 + next() % 5;
    let text: Vec<&str> = (0..words)
        .map(|_| VOCABULARY[(next() % VOCABULARY.len() as u64) as usize])
        .collect();
    let offset = if i >= FIRST && i.is_multiple_of(10) {
        i - FIRST
    } else {
        i
    };
    // Capitals and punctuation: the application lower-cases and splits on non-word characters.
    let text = if i.is_multiple_of(7) {
        format!("{}!", text.join(", ").to_uppercase())
    } else {
        text.join(" ")
    };
    (text, base + offset as i64 * 1000)
}

/// What the application must end with for `lines`: word → count, `word@windowStart` → count.
fn expected(lines: &[(String, i64)]) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
    let mut words: BTreeMap<String, u64> = BTreeMap::new();
    let mut windows: BTreeMap<String, u64> = BTreeMap::new();
    for (text, ts) in lines {
        for word in text
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
        {
            *words.entry(word.to_string()).or_default() += 1;
            let start = ts - ts.rem_euclid(WINDOW_MS);
            *windows.entry(format!("{word}@{start}")).or_default() += 1;
        }
    }
    let text = |m: BTreeMap<String, u64>| m.into_iter().map(|(k, v)| (k, v.to_string())).collect();
    (text(words), text(windows))
}

/// The latest value per key of the output topics, and how far each partition has been read.
#[derive(Default)]
struct Output {
    latest: BTreeMap<String, BTreeMap<String, String>>,
    position: BTreeMap<(String, i32), i64>,
}

/// Reads `topics` (2 partitions each) from the beginning for as long as the test runs.
async fn follow(
    cluster: &TestCluster,
    topics: &[&str],
) -> (Arc<Mutex<Output>>, tokio::task::JoinHandle<()>) {
    let consumer = cluster.consumer(None, &[]).await;
    let partitions: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| (0..2).map(|p| TopicPartition::new(*t, p)))
        .collect();
    consumer.assign(&partitions).unwrap();
    consumer.seek_to_beginning(&partitions).unwrap();
    let output = Arc::new(Mutex::new(Output::default()));
    let sink = output.clone();
    let task = tokio::spawn(async move {
        loop {
            let record = consumer.recv().await.unwrap();
            let key = String::from_utf8(record.key.unwrap().to_vec()).unwrap();
            let value = String::from_utf8(record.value.unwrap().to_vec()).unwrap();
            let mut out = sink.lock().unwrap();
            out.latest
                .entry(record.topic.to_string())
                .or_default()
                .insert(key, value);
            out.position.insert(
                (record.topic.to_string(), record.partition),
                record.offset + 1,
            );
        }
    });
    (output, task)
}

/// The keys whose latest value is not the expected one, for failure messages.
fn differences(got: &BTreeMap<String, String>, want: &BTreeMap<String, String>) -> String {
    let mut out = Vec::new();
    for (k, v) in want {
        if got.get(k) != Some(v) {
            out.push(format!("{k}: want {v}, got {:?}", got.get(k)));
        }
    }
    for (k, v) in got {
        if !want.contains_key(k) {
            out.push(format!("{k}: unexpected {v}"));
        }
    }
    out.join("; ")
}

/// Waits until the output's latest values are `words` and `windows`.
async fn wait_for_counts(
    app: &mut JavaApp,
    output: &Mutex<Output>,
    topics: (&str, &str),
    words: &BTreeMap<String, String>,
    windows: &BTreeMap<String, String>,
) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        {
            let out = output.lock().unwrap();
            let empty = BTreeMap::new();
            let got_words = out.latest.get(topics.0).unwrap_or(&empty);
            let got_windows = out.latest.get(topics.1).unwrap_or(&empty);
            if got_words == words && got_windows == windows {
                return;
            }
            if Instant::now() > deadline {
                app.fail(&format!(
                    "counts not as expected after 120 s\nwords: {}\nwindows: {}",
                    differences(got_words, words),
                    differences(got_windows, windows)
                ));
            }
        }
        app.alive();
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Starts `Counts.java` as run `run`; `app` is its application id and group protocol.
fn start_app(
    classpath: &str,
    cluster: &TestCluster,
    run: &str,
    (app_id, protocol): (&str, &str),
    topics: [&str; 3],
    state: &Path,
    logs: &Path,
) -> JavaApp {
    let args = [
        ("--bootstrap", cluster.plain_bootstrap().to_string()),
        ("--app-id", app_id.to_string()),
        ("--input", topics[0].to_string()),
        ("--words-out", topics[1].to_string()),
        ("--windows-out", topics[2].to_string()),
        ("--state-dir", state.display().to_string()),
        ("--replication", cluster.replication().to_string()),
        ("--window-ms", WINDOW_MS.to_string()),
        ("--group-protocol", protocol.to_string()),
    ];
    let args: Vec<String> = args
        .into_iter()
        .flat_map(|(k, v)| [k.to_string(), v])
        .collect();
    JavaApp::start(run, classpath, "lograil.ecosystem.Counts", &args, logs)
}

/// The running application's streams group as StreamsGroupDescribe shows it: Stable, one
/// member with every task of both subtopologies (2 partitions each), the topology with the
/// partition counts the broker decided for the internal topics.
fn check_streams_group(addr: &str, app_id: &str, app: &JavaApp) {
    let group = test_support::kafka::describe_streams_group(addr, app_id);
    assert_eq!(group.error_code, 0, "{group:?}");
    assert_eq!(
        group.group_state.as_str(),
        "Stable",
        "{group:?}\n{}",
        app.output()
    );
    assert_eq!(group.members.len(), 1, "{group:?}");
    let member = &group.members[0];
    assert_eq!(member.member_epoch, group.assignment_epoch, "{group:?}");
    let active: Vec<(String, Vec<i32>)> = member
        .assignment
        .active_tasks
        .iter()
        .map(|t| (t.subtopology_id.to_string(), t.partitions.clone()))
        .collect();
    assert_eq!(
        active,
        vec![("0".to_string(), vec![0, 1]), ("1".to_string(), vec![0, 1])],
        "{group:?}"
    );
    let topology = group.topology.as_ref().expect("a topology");
    let subtopologies = topology.subtopologies.as_ref().expect("subtopologies");
    assert_eq!(subtopologies.len(), 2, "{topology:?}");
    let changelogs: Vec<(String, i32)> = subtopologies
        .iter()
        .flat_map(|s| &s.state_changelog_topics)
        .map(|t| (t.name.to_string(), t.partitions))
        .collect();
    assert_eq!(
        changelogs,
        vec![
            (format!("{app_id}-window-counts-changelog"), 2),
            (format!("{app_id}-word-counts-changelog"), 2),
        ],
        "{topology:?}"
    );
}

/// lograil's console lists the running streams group: Stable, one member, its 4 tasks run.
fn check_console(console: &str, app_id: &str) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(console).unwrap();
    write!(
        stream,
        "GET /groups HTTP/1.1\r\nHost: console\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut page = String::new();
    stream.read_to_string(&mut page).unwrap();
    // The id links to the group's page (an app id is letters, digits and '-': no escaping).
    let row = format!(
        "<tr><td><a href=\"/groups/{app_id}\">{app_id}</a></td><td>Stable</td><td class=\"n\">"
    );
    assert!(
        page.contains("<h2>Streams groups</h2>") && page.contains(&row),
        "{page}"
    );
    let cells = page.split(&row).nth(1).unwrap();
    let numbers: Vec<&str> = cells
        .split("<td class=\"n\">")
        .skip(1)
        .take(4)
        .map(|c| c.split('<').next().unwrap())
        .collect();
    // Members, tasks, active tasks run, standby tasks.
    assert_eq!(numbers, ["1", "4", "4", "0"], "{page}");
}

/// Kafka 4.4's `kafka-streams-groups.sh` on the running application's group: listed; its
/// state (the `sticky` assignor, Stable, one member); its member with every task; its offsets
/// (the input's and the repartition topic's partitions, each once); refused deletion while it
/// has a member.
fn check_streams_groups_tool(addr: &str, app_id: &str, input: &str, app: &JavaApp) {
    let list = streams_groups_tool(addr, &["--list"]);
    assert!(list.lines().any(|l| l.trim() == app_id), "{list}");
    let state = streams_groups_tool(addr, &["--describe", "--group", app_id, "--state"]);
    let row: Vec<&str> = state
        .lines()
        .find(|l| l.starts_with(app_id))
        .unwrap_or_else(|| panic!("{state}"))
        .split_whitespace()
        .collect();
    assert_eq!(row[3..], ["sticky", "Stable", "1"], "{state}");
    let members = streams_groups_tool(
        addr,
        &["--describe", "--group", app_id, "--members", "--verbose"],
    );
    assert!(
        members.contains(" streams ") && members.contains("ACTIVE: 0:[0,1]; 1:[0,1];"),
        "{members}\n{}",
        app.output()
    );
    let offsets = streams_groups_tool(addr, &["--describe", "--group", app_id, "--offsets"]);
    let mut rows: Vec<(String, String)> = offsets
        .lines()
        .filter(|l| l.starts_with(app_id))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1].to_string(), f[2].to_string())
        })
        .collect();
    rows.sort();
    let repartition = format!("{app_id}-words-repartition");
    let want: Vec<(String, String)> = [input, input, &repartition, &repartition]
        .iter()
        .zip(["0", "1", "0", "1"])
        .map(|(t, p)| (t.to_string(), p.to_string()))
        .collect();
    let mut want = want;
    want.sort();
    assert_eq!(rows, want, "{offsets}");
    let delete = streams_groups_tool(addr, &["--delete", "--group", app_id]);
    assert!(delete.contains("is not EMPTY"), "{delete}");
}

/// Kafka 4.4's `kafka-streams-groups.sh` (`StreamsGroupCommand`) against `addr`: its output
/// (stdout and stderr).
fn streams_groups_tool(addr: &str, args: &[&str]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/kafka/kafka.sh");
    let out = std::process::Command::new(script)
        .args([
            "tool",
            "-",
            "org.apache.kafka.tools.streams.StreamsGroupCommand",
        ])
        .args(["--bootstrap-server", addr])
        .args(args)
        .output()
        .unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The sum of the `RESTORED <store> <partition> <records>` lines of `store`.
fn restored(app: &JavaApp, store: &str) -> i64 {
    app.lines()
        .iter()
        .filter_map(|l| {
            let mut f = l.strip_prefix("RESTORED ")?.split(' ');
            (f.next()? == store).then_some(())?;
            f.nth(1)?.parse::<i64>().ok()
        })
        .sum()
}

/// A word count and a windowed count (groupBy → repartition topic; RocksDB stores with
/// changelogs) over 600 lines: the first 305 counted exactly, the application stopped, the
/// rest produced, its local state deleted; restarted, it restores both stores from their
/// changelogs and ends with every count exact (the latest value per key: at-least-once may
/// repeat intermediate updates). Also: the changelogs were created compacted (`compact`, and
/// `compact,delete` for the windowed store), and Streams purged its repartition topic
/// (DeleteRecords) as it committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_counts_are_exact_after_a_restart_restored_from_the_changelogs() {
    counts_after_a_restart("classic").await;
}

/// The same with KIP-1071's streams group protocol: the broker configures the topology, creates
/// the repartition topic and the changelogs with the configs the topology gives (checked
/// below: compacted, rolling every 500 ms), and assigns the tasks; StreamsGroupDescribe and
/// Kafka 4.4's `kafka-streams-groups.sh` (list, describe, delete) show the group, its topology,
/// member and offsets while the application runs, and delete it once stopped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_protocol_counts_are_exact_after_a_restart() {
    counts_after_a_restart("streams").await;
}

async fn counts_after_a_restart(protocol: &str) {
    let Some(classpath) = classpath() else { return };
    let _turn = TURN.lock().await;
    // A streams group's first assignment waits for more members (3 s by default), and its
    // members heartbeat every 5 s: shorter here (lograil only; Kafka 4.4's minimum is 5 s).
    let cluster = TestCluster::start_with(&[
        "--log-cleaner-backoff-ms",
        "200",
        "--group-streams-initial-rebalance-delay-ms",
        "500",
        "--group-streams-heartbeat-interval-ms",
        "1000",
        "--console-listen",
        "127.0.0.1:0",
    ]);
    let input = cluster.create_topic("streams-lines", 2).await;
    let words_out = cluster.create_topic("streams-words", 2).await;
    let windows_out = cluster.create_topic("streams-windows", 2).await;
    let topics = [input.as_str(), words_out.as_str(), windows_out.as_str()];
    let app_id = unique("streams-counts");
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");

    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    // Recent enough for every retention (the broker deletes by record time too).
    let base = (now - 30 * 60_000) / WINDOW_MS * WINDOW_MS;
    let lines: Vec<(String, i64)> = (0..LINES).map(|i| line(i, base)).collect();
    let produce = |range: std::ops::Range<usize>| {
        lines[range.clone()]
            .iter()
            .zip(range)
            .map(|((text, ts), i)| {
                ProducerRecord::new(input.as_str())
                    .key(format!("line-{i}"))
                    .value(text.clone())
                    .timestamp(*ts)
            })
            .collect::<Vec<_>>()
    };
    let (output, reader) = follow(&cluster, &[&words_out, &windows_out]).await;

    // First run: the first part, counted exactly. Sent in five steps 700 ms apart once the
    // application runs, so its changelogs roll segments (segment.ms=500) the cleaner can compact.
    let mut first = start_app(
        &classpath,
        &cluster,
        "streams-1",
        (&app_id, protocol),
        topics,
        &state,
        dir.path(),
    );
    first
        .wait("RUNNING", 90, |l| l.iter().any(|l| l == "STATE RUNNING"))
        .await;
    for step in 0..5 {
        cluster
            .produce(&[], produce(step * FIRST / 5..(step + 1) * FIRST / 5))
            .await;
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let (words, windows) = expected(&lines[..FIRST]);
    wait_for_counts(
        &mut first,
        &output,
        (&words_out, &windows_out),
        &words,
        &windows,
    )
    .await;

    // Changelogs as Streams asked for them.
    let addr = cluster.address_of(1);
    if protocol == "streams" {
        check_streams_group(&addr, &app_id, &first);
        check_streams_groups_tool(&addr, &app_id, &input, &first);
        if let Some(console) = cluster.console_addr() {
            check_console(&console, &app_id);
        }
    }
    for (store, policy) in [
        ("word-counts", "compact"),
        ("window-counts", "compact,delete"),
    ] {
        let changelog = format!("{app_id}-{store}-changelog");
        let configs = test_support::kafka::describe_configs(&addr, 2, &changelog);
        let got = configs.iter().find(|(name, _, _)| name == "cleanup.policy");
        assert_eq!(
            got.map(|c| c.1.as_str()),
            Some(policy),
            "{changelog}: {configs:?}"
        );
    }
    // Streams deletes what it has committed from its repartition topic.
    let repartition = format!("{app_id}-words-repartition");
    let partitions: Vec<TopicPartition> = (0..2)
        .map(|p| TopicPartition::new(&repartition, p))
        .collect();
    let probe = cluster.consumer(None, &[]).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let starts = probe.beginning_offsets(&partitions).await.unwrap();
        if starts.values().any(|&s| s > 0) {
            break;
        }
        if Instant::now() > deadline {
            first.fail(&format!(
                "{repartition} not purged in 60 s: start offsets {starts:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    probe.close().await;

    first.stop().await;
    assert!(
        first.lines().iter().any(|l| l == "CLOSED"),
        "{}",
        first.output()
    );
    assert!(
        state.join(&app_id).is_dir(),
        "the first run kept its stores under {}",
        state.display()
    );

    // On lograil (its cleaner looking every 200 ms) the word counts' changelog is compacted
    // before the second run restores from it: fewer records than offsets.
    let changelog = format!("{app_id}-word-counts-changelog");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let records: usize = read_all(&cluster, &changelog)
            .await
            .values()
            .map(Vec::len)
            .sum();
        let probe = cluster.consumer(None, &[]).await;
        let partitions: Vec<TopicPartition> =
            (0..2).map(|p| TopicPartition::new(&changelog, p)).collect();
        let ends = probe.end_offsets(&partitions).await.unwrap();
        let starts = probe.beginning_offsets(&partitions).await.unwrap();
        probe.close().await;
        let offsets: i64 = partitions.iter().map(|tp| ends[tp] - starts[tp]).sum();
        if (records as i64) < offsets || cluster.is_kafka() {
            eprintln!("streams: {changelog}: {records} records over {offsets} offsets");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{changelog} not compacted in 30 s: {records} records over {offsets} offsets"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The rest, and no local state: the second run must restore both stores from Kafka.
    cluster.produce(&[], produce(FIRST..LINES)).await;
    std::fs::remove_dir_all(&state).unwrap();
    let mut second = start_app(
        &classpath,
        &cluster,
        "streams-2",
        (&app_id, protocol),
        topics,
        &state,
        dir.path(),
    );
    let (words, windows) = expected(&lines);
    wait_for_counts(
        &mut second,
        &output,
        (&words_out, &windows_out),
        &words,
        &windows,
    )
    .await;
    for store in ["word-counts", "window-counts"] {
        assert!(
            restored(&second, store) > 0,
            "{store} restored from its changelog:\n{}",
            second.output()
        );
    }
    second.stop().await;
    if protocol == "streams" {
        // Stopped: the group can be deleted, offsets and all.
        let delete = streams_groups_tool(&addr, &["--delete", "--group", &app_id]);
        assert!(delete.contains("was successful"), "{delete}");
        let list = streams_groups_tool(&addr, &["--list"]);
        assert!(!list.lines().any(|l| l.trim() == app_id), "{list}");
    }

    // Read to the end of what the application wrote: the latest values are still exact.
    let ends = {
        let probe = cluster.consumer(None, &[]).await;
        let partitions: Vec<TopicPartition> = [&words_out, &windows_out]
            .iter()
            .flat_map(|t| (0..2).map(|p| TopicPartition::new(t.as_str(), p)))
            .collect();
        let ends = probe.end_offsets(&partitions).await.unwrap();
        probe.close().await;
        ends
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let read_to_ends = || {
        let out = output.lock().unwrap();
        let read = ends.iter().all(|(tp, end)| {
            let position = out.position.get(&(tp.topic.to_string(), tp.partition));
            *end == 0 || position.copied() >= Some(*end)
        });
        read.then(|| {
            (
                out.latest[&words_out].clone(),
                out.latest[&windows_out].clone(),
            )
        })
    };
    loop {
        if let Some((got_words, got_windows)) = read_to_ends() {
            assert_eq!(got_words, words);
            assert_eq!(got_windows, windows);
            break;
        }
        assert!(Instant::now() < deadline, "output read to {ends:?} in 30 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    reader.abort();
}
