//! The message browser beyond one plain partition: all partitions merged by time, page after
//! page (`partition=all`); a viewer who may Describe a topic but not Read it; and a compacted
//! topic whose offsets have gaps after a cleaner pass.

use std::time::Duration;

use rdkafka::producer::{BaseRecord, Producer};
use test_support::kafka::{self, rdkafka_producer, try_create_topic, wait_until};
use test_support::{Certs, TestBroker};

use crate::browser::{after, get};
use crate::compaction::cleaner_runs;
use crate::console_actions::{admin, broker};

/// The records table's rows: (first number cell, value cell) of each.
fn rows(page: &str) -> Vec<(String, String)> {
    if !page.contains("<table class=\"records\">") {
        return Vec::new();
    }
    let table = after(page, "<table class=\"records\">", "</table>");
    table
        .split("<tr")
        .skip(2)
        .map(|row| {
            let first = after(row, "<td class=\"n\">", "</td>").to_string();
            let value = row.rsplit("<td class=\"mono\">").next().unwrap();
            (first, value[..value.find("</td>").unwrap()].to_string())
        })
        .collect()
}

/// The href of the link labelled `label`, unescaped.
fn link(page: &str, label: &str) -> Option<String> {
    let at = page.find(&format!("\">{label}</a>"))?;
    let href = &page[page[..at].rfind("href=\"")? + 6..at];
    Some(href.replace("&amp;", "&"))
}

fn next_link(page: &str) -> Option<String> {
    link(page, "next records →")
}

fn values(page: &str) -> Vec<String> {
    rows(page).into_iter().map(|(_, value)| value).collect()
}

#[test]
fn all_partitions_are_browsed_merged_by_time_page_after_page() {
    let broker = TestBroker::start_temp(&["--console-listen", "127.0.0.1:0"]);
    let addr = broker.addr.clone();
    let console = broker.console_addr.clone().expect("the console's address");
    assert_eq!(try_create_topic(&addr, "merge", 3, &[]), 0);
    let base = log_core::now_ms() - 3_600_000;
    kafka::rdkafka_produce(
        &addr,
        &[],
        "merge",
        (0..120).map(|i| {
            kafka::Record::new(format!("m{i:03}"))
                .key(format!("k{}", i % 7))
                .partition(i % 3)
                .timestamp(base + i64::from(i) * 10)
        }),
    );
    let expect = |range: std::ops::Range<i32>| -> Vec<String> {
        range.map(|i| format!("m{i:03}")).collect()
    };
    let (status, page) = get(&console, "/topics/merge/messages?partition=all");
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    assert_eq!(values(&page), expect(0..50));
    // The first cell is the partition.
    assert_eq!(
        rows(&page)[..3]
            .iter()
            .map(|r| r.0.as_str())
            .collect::<Vec<_>>(),
        ["0", "1", "2"]
    );
    let page = get(&console, &next_link(&page).expect("a second page")).1;
    assert_eq!(values(&page), expect(50..100));
    let page = get(&console, &next_link(&page).expect("a third page")).1;
    assert_eq!(values(&page), expect(100..120));
    assert_eq!(next_link(&page), None, "the last page links no further");

    let (_, page) = get(&console, "/topics/merge/messages?partition=all&from=end");
    assert_eq!(values(&page), expect(70..120));
    let (_, page) = get(
        &console,
        &format!("/topics/merge/messages?partition=all&time={}", base + 555),
    );
    assert_eq!(values(&page), expect(56..106));
    let (_, page) = get(&console, "/topics/merge/messages?partition=all&key=k3");
    let threes: Vec<String> = (0..120)
        .filter(|i| i % 7 == 3)
        .map(|i| format!("m{i:03}"))
        .collect();
    assert_eq!(values(&page), threes);
    assert_eq!(next_link(&page), None);
    // The other formats keep the page's positions.
    let (_, second) = get(
        &console,
        &next_link(&get(&console, "/topics/merge/messages?partition=all").1).unwrap(),
    );
    let json = link(&second, "json").unwrap();
    assert!(json.contains("partition=all&at=0%3A"), "{json}");
    let (_, page) = get(&console, &json);
    assert_eq!(values(&page).len(), 50);
    // The same second page, as JSON (these values are not).
    let first = &values(&page)[0];
    assert!(
        first.contains("not JSON") && first.ends_with(" m050"),
        "{first}"
    );
    assert_eq!(
        get(&console, "/topics/merge/messages?partition=all&offset=3").0,
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(
        get(&console, "/topics/merge/messages?partition=all&at=0:x").0,
        "HTTP/1.1 400 Bad Request"
    );
    assert_eq!(try_create_topic(&addr, "wide", 101, &[]), 0);
    let (status, page) = get(&console, "/topics/wide/messages?partition=all");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        page.contains("more than 100 are browsed one at a time"),
        "{page}"
    );
}

#[test]
fn a_viewer_who_may_describe_but_not_read_sees_no_record() {
    let certs = Certs::new();
    let broker = broker(&certs, false);
    let console = broker.console_addr.clone().expect("the console's address");
    admin(
        &broker,
        r#"
a.create_topics([NewTopic('secret', 2, 1)])['secret'].result()
p = Producer(conf)
for i in range(4):
    p.produce('secret', value=f'classified-{i}', partition=i % 2)
p.flush()
acl('TOPIC', 'secret', 'DESCRIBE')
"#,
    );
    for path in [
        "/topics/secret/messages?partition=0",
        "/topics/secret/messages?partition=all",
        "/topics/secret/messages?partition=1&format=hex",
    ] {
        let (status, page) = get(&console, path);
        assert_eq!(status, "HTTP/1.1 200 OK", "{path}");
        assert!(
            page.contains("may describe this topic but not read it"),
            "{path}: {page}"
        );
        assert!(!page.contains("classified"), "{path}: {page}");
        assert!(rows(&page).is_empty(), "{path}");
    }
    // The topic page is there, its records are not.
    let (status, page) = get(&console, "/topics/secret");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(!page.contains("classified"));
    admin(&broker, "acl('TOPIC', 'secret', 'READ')");
    let (_, page) = get(&console, "/topics/secret/messages?partition=all");
    assert_eq!(values(&page).len(), 4, "{page}");
}

#[test]
fn a_compacted_topic_is_browsed_across_its_gaps() {
    let broker = TestBroker::start_temp(&[
        "--log-cleaner-backoff-ms",
        "100",
        "--console-listen",
        "127.0.0.1:0",
    ]);
    let addr = broker.addr.clone();
    let console = broker.console_addr.clone().expect("the console's address");
    let configs = [
        ("cleanup.policy", "compact"),
        ("segment.ms", "100"),
        ("min.cleanable.dirty.ratio", "0.01"),
    ];
    assert_eq!(try_create_topic(&addr, "latest", 1, &configs), 0);
    let producer = rdkafka_producer(&addr, &[("linger.ms", "0")]);
    let send = |key: &str, value: &str| {
        let record = BaseRecord::to("latest")
            .key(key)
            .partition(0)
            .payload(value);
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.flush(Duration::from_secs(10)).unwrap();
    };
    // Offsets 0..10 then 10..20 over the same keys, each round in a segment of its own.
    for round in 0..2 {
        for k in 0..10 {
            send(&format!("k{k}"), &format!("v{round}-{k}"));
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    send("tail", "t");
    wait_until("a cleaner pass", Duration::from_secs(20), || {
        cleaner_runs(&addr, "latest") >= 1
    });
    // A pass may have run before round 1's last records were in a closed segment: the next
    // ones (every 100 ms) clean them.
    let expected: Vec<String> = (10..21).map(|o| o.to_string()).collect();
    let mut page = String::new();
    wait_until("round 0 cleaned away", Duration::from_secs(20), || {
        page = get(&console, "/topics/latest/messages?partition=0&offset=3").1;
        rows(&page).iter().map(|(o, _)| o).eq(expected.iter())
    });
    let shown = rows(&page);
    let offsets: Vec<&str> = shown.iter().map(|(o, _)| o.as_str()).collect();
    assert_eq!(offsets, expected, "{page}");
    assert!(
        shown[..10].iter().all(|(_, v)| v.starts_with("v1-")),
        "{shown:?}"
    );
    let (_, page) = get(&console, "/topics/latest/messages?partition=all");
    assert_eq!(values(&page).len(), 11, "{page}");
}
