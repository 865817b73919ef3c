//! The console's topic pages and message browser (`/topics/<name>`, `/topics/<name>/messages`)
//! after librdkafka traffic of every kind a partition holds: JSON, binary and hostile records,
//! a compressed batch, a committed and an aborted transaction; internal topics hidden from the
//! lists unless asked for. Plain HTTP for the numbers, headless Chromium for what runs. Group
//! pages (`/groups/<id>`) of a KIP-848 group, a classic one and one of offsets only; the
//! security page's ACLs, SCRAM users (never a secret) and quotas.

use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use test_support::kafka::{self, try_create_topic};
use test_support::TestBroker;

use crate::browser::{after, browser, dom, get, logged};
use crate::console::{HOSTILE, HOSTILE_SHOWN};

const BINARY: &[u8] = b"\x00\x01\xfe\xff";

/// Partition 0 of `orders`: a JSON record, a hostile one, a binary one, three in one lz4
/// batch (key `z`), then a committed and an aborted transaction (offsets 0–5, 6–7, 8–9).
fn produce_every_kind(addr: &str) {
    let send = |producer: &rdkafka::producer::ThreadedProducer<_>, key: &[u8], value: &[u8]| {
        let record = BaseRecord::to("orders")
            .partition(0)
            .key(key)
            .payload(value);
        producer.send(record).map_err(|(e, _)| e).unwrap();
    };
    let plain = kafka::rdkafka_producer(addr, &[("linger.ms", "0")]);
    send(&plain, b"k0", br#"{"id":1,"tags":["a","b"]}"#);
    plain.flush(Duration::from_secs(30)).unwrap();
    let headers = OwnedHeaders::new().insert(Header {
        key: HOSTILE,
        value: Some(HOSTILE),
    });
    let record = BaseRecord::to("orders")
        .partition(0)
        .key(HOSTILE)
        .payload(HOSTILE)
        .headers(headers);
    plain.send(record).map_err(|(e, _)| e).unwrap();
    plain.flush(Duration::from_secs(30)).unwrap();
    send(&plain, b"bin", BINARY);
    plain.flush(Duration::from_secs(30)).unwrap();
    let zipped =
        kafka::rdkafka_producer(addr, &[("compression.type", "lz4"), ("linger.ms", "200")]);
    for i in 0..3 {
        send(&zipped, b"z", format!("zipped-{i}").as_bytes());
    }
    zipped.flush(Duration::from_secs(30)).unwrap();
    let txn = kafka::rdkafka_producer(addr, &[("transactional.id", "console-txn")]);
    txn.init_transactions(Duration::from_secs(30)).unwrap();
    for (value, commit) in [("committed-1", true), ("aborted-1", false)] {
        txn.begin_transaction().unwrap();
        send(&txn, b"t", value.as_bytes());
        txn.flush(Duration::from_secs(30)).unwrap();
        if commit {
            txn.commit_transaction(Duration::from_secs(30)).unwrap();
        } else {
            txn.abort_transaction(Duration::from_secs(30)).unwrap();
        }
    }
}

#[test]
fn a_topics_page_and_its_records_browsed_safely_in_a_real_browser() {
    let broker = TestBroker::start_temp(&["--console-listen", "127.0.0.1:0"]);
    let addr = broker.addr.clone();
    let console = broker.console_addr.clone().expect("the console's address");
    logged(&broker, "console: open to anyone who can reach it");
    assert_eq!(
        try_create_topic(&addr, "orders", 2, &[("retention.ms", "86400000")]),
        0
    );
    assert_eq!(
        try_create_topic(&addr, "prices", 1, &[("cleanup.policy", "compact")]),
        0
    );
    produce_every_kind(&addr);
    let reader = kafka::rdkafka_reader(&addr, "billing", "orders", 0, &[]);
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("orders", 0, Offset::Offset(3))
        .unwrap();
    reader.commit(&commit, CommitMode::Sync).unwrap();

    // Internal topics only when asked for; the overview counts the users' own.
    let (_, topics) = get(&console, "/topics");
    assert!(
        topics.contains("<a href=\"/topics/orders\">orders</a>"),
        "{topics}"
    );
    assert!(!topics.contains("__consumer_offsets"), "{topics}");
    let (_, all) = get(&console, "/topics?internal=true");
    assert!(
        all.contains("<a href=\"/topics/__consumer_offsets\">"),
        "{all}"
    );
    let (_, overview) = get(&console, "/");
    assert_eq!(after(&overview, "Topics<b>", "<"), "2");

    // The topic page: partitions, the group reading it, configs with their source.
    let (status, page) = get(&console, "/topics/orders");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let p0 = after(&page, "<h2>Partitions</h2>", "</tr><tr>");
    assert!(p0.contains("<th>Segments</th>"), "{p0}");
    // Partition 0: log start 0, log end 10 (6 records, 2 transactions of a record and a
    // marker each), last stable 10, 10 offsets.
    let row = after(&page, "<tr><td class=\"n\">0</td>", "</tr>");
    assert!(
        row.starts_with(
            "<td class=\"n\">0</td><td class=\"n\">10</td><td class=\"n\">10</td><td class=\"n\">10</td>"
        ),
        "{row}"
    );
    let group = after(&page, "<td>billing</td>", "</tr>");
    // Partition 0, committed 3, lag 7.
    assert!(
        group.starts_with("<td class=\"n\">0</td><td class=\"n\">3</td><td class=\"n\">7</td>"),
        "{group}"
    );
    let retention = after(&page, "<td>retention.ms</td>", "</tr>");
    assert!(
        retention.contains("86400000") && retention.contains("set on the topic"),
        "{retention}"
    );
    let segment = after(&page, "<td>segment.bytes</td>", "</tr>");
    assert!(segment.contains("<td>default</td>"), "{segment}");
    assert!(
        !page.contains("<h2>Cleaner</h2>"),
        "orders is not compacted"
    );
    let (_, prices) = get(&console, "/topics/prices");
    assert!(prices.contains("<h2>Cleaner</h2>"), "{prices}");

    // The records: markers and the aborted record marked, values as text, JSON or hex.
    let (status, records) = get(&console, "/topics/orders/messages?partition=0");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(
        records.matches("transaction marker: commit").count(),
        1,
        "{records}"
    );
    assert_eq!(
        records.matches("transaction marker: abort").count(),
        1,
        "{records}"
    );
    let aborted = after(&records, "<tr class=\"aborted\">", "</tr>");
    assert!(aborted.contains("aborted-1"), "{aborted}");
    assert_eq!(records.matches("<tr class=\"aborted\">").count(), 1);
    assert!(records.contains("zipped-0") && records.contains("zipped-2"));
    assert!(
        records.contains("<span class=\"bin\">\\xfe\\xff</span>"),
        "{records}"
    );
    assert!(!records.contains(HOSTILE), "the hostile record is escaped");
    let (_, json) = get(&console, "/topics/orders/messages?partition=0&format=json");
    assert!(json.contains("&quot;id&quot;: 1,"), "pretty JSON: {json}");
    let (_, hex) = get(
        &console,
        "/topics/orders/messages?partition=0&offset=2&format=hex",
    );
    assert!(hex.contains("000000  00 01 fe ff"), "{hex}");
    assert!(
        hex.contains("<tr><td class=\"n\">2</td>") && !hex.contains("<tr><td class=\"n\">1</td>"),
        "from offset 2: {hex}"
    );
    let (_, by_key) = get(&console, "/topics/orders/messages?partition=0&key=z");
    assert_eq!(by_key.matches("zipped-").count(), 3, "{by_key}");
    // The other formats' links keep the page's partition, start and key.
    let json_link =
        "href=\"/topics/orders/messages?partition=0&amp;offset=0&amp;key=z&amp;format=json\"";
    assert!(by_key.contains(json_link), "{by_key}");
    assert!(!by_key.contains("committed-1") && !by_key.contains("\\xfe"));
    let (_, last) = get(&console, "/topics/orders/messages?partition=0&from=end");
    assert!(last.contains("aborted-1"));
    let future = (log_core::now_ms() + 3_600_000).to_string();
    let (_, later) = get(&console, &format!("/topics/orders/messages?time={future}"));
    assert!(later.contains("No records from this offset."), "{later}");
    for (path, want) in [
        ("/topics/orders/messages?offset=x", "400 Bad Request"),
        ("/topics/orders/messages?format=xml", "400 Bad Request"),
        ("/topics/orders/messages?partition=9", "404 Not Found"),
        ("/topics/nope", "404 Not Found"),
        ("/topics/nope/messages", "404 Not Found"),
        ("/topics/orders/elsewhere", "404 Not Found"),
    ] {
        assert_eq!(get(&console, path).0, format!("HTTP/1.1 {want}"), "{path}");
    }

    let Some(browser) = browser() else {
        return;
    };
    for path in ["/topics/orders", "/topics/orders/messages?partition=0"] {
        let shown = dom(&browser, &format!("http://{console}{path}"));
        assert!(
            shown.contains("data-js=\"ready\""),
            "the console's script ran on {path}"
        );
        assert!(
            !shown.contains("<b id=\"pwned\""),
            "no injected element on {path}"
        );
        assert!(
            !shown.contains("<title>pwned"),
            "no injected script ran on {path}"
        );
        if path.contains("messages") {
            assert!(
                shown.contains(HOSTILE_SHOWN),
                "the hostile record shown as text"
            );
        }
    }
}

/// A librdkafka member of `group` on `work`, with `protocol` (`consumer` or `classic`),
/// polled until it owns both partitions.
fn member(addr: &str, group: &str, protocol: &str, client_id: &str) -> BaseConsumer {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", addr)
        .set("group.id", group)
        .set("group.protocol", protocol)
        .set("client.id", client_id)
        .set("auto.offset.reset", "earliest")
        .create()
        .unwrap();
    consumer.subscribe(&["work"]).unwrap();
    kafka::wait_until("both partitions owned", Duration::from_secs(30), || {
        let _ = consumer.poll(Duration::from_millis(100));
        consumer.assignment().is_ok_and(|a| a.count() == 2)
    });
    consumer
}

#[test]
fn group_pages_show_members_their_partitions_and_lag() {
    let broker = TestBroker::start_temp(&["--console-listen", "127.0.0.1:0"]);
    let addr = broker.addr.clone();
    let console = broker.console_addr.clone().expect("the console's address");
    assert_eq!(try_create_topic(&addr, "work", 2, &[]), 0);
    kafka::rdkafka_produce(
        &addr,
        &[],
        "work",
        (0..10).map(|i| kafka::Record::new(format!("w{i}")).partition(i % 2)),
    );
    let kip848 = member(&addr, "kip848-g", "consumer", "c848");
    let classic = member(&addr, "classic-g", "classic", "cclassic");
    // A group of committed offsets only, with an id a path would split and markup in it.
    let odd = "a/b<i>";
    let reader = kafka::rdkafka_reader(&addr, odd, "work", 0, &[]);
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("work", 0, Offset::Offset(2))
        .unwrap();
    reader.commit(&commit, CommitMode::Sync).unwrap();

    let (_, groups) = get(&console, "/groups");
    for link in [
        "/groups/kip848-g",
        "/groups/classic-g",
        "/groups/a%2Fb%3Ci%3E",
    ] {
        assert!(
            groups.contains(&format!("<a href=\"{link}\">")),
            "{link}: {groups}"
        );
    }
    let (status, page) = get(&console, "/groups/kip848-g");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        page.contains("Consumer protocol (KIP-848), Stable"),
        "{page}"
    );
    let row = after(&page, "<td>c848</td>", "</tr>");
    assert!(
        row.contains("<td>consumer</td>") && row.contains("<div>work [0, 1]</div>"),
        "{row}"
    );
    let (_, page) = get(&console, "/groups/classic-g");
    assert!(
        page.contains("Classic protocol, Stable, protocol type consumer"),
        "{page}"
    );
    let row = after(&page, "<td>cclassic</td>", "</tr>");
    assert!(row.contains("<div>work [0, 1]</div>"), "{row}");
    let (status, page) = get(&console, "/groups/a%2Fb%3Ci%3E");
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        page.contains("<title>lograil · Group a/b&lt;i&gt;</title>"),
        "{page}"
    );
    // Partition 0: committed 2 of 5.
    let lag = after(&page, "<h2>Lag</h2>", "</table>");
    assert!(lag.contains("<td class=\"n\">0</td><td class=\"n\">2</td><td class=\"n\">5</td><td class=\"n\">3</td>"), "{lag}");
    assert_eq!(get(&console, "/groups/nope").0, "HTTP/1.1 404 Not Found");

    // The member leaves: the page, loaded again, shows the change after what it saw first.
    // It commits first: a group left with no member and no offsets is deleted, and whether
    // librdkafka commits on close depends on whether its polls fetched anything.
    let mut offsets = TopicPartitionList::new();
    offsets
        .add_partition_offset("work", 1, Offset::Offset(1))
        .unwrap();
    kip848.commit(&offsets, CommitMode::Sync).unwrap();
    drop(kip848);
    let mut page = String::new();
    kafka::wait_until("the KIP-848 group empty", Duration::from_secs(30), || {
        page = get(&console, "/groups/kip848-g").1;
        page.contains("Consumer protocol (KIP-848), Empty")
    });
    let history = after(&page, "<h2>State history</h2>", "</table>");
    let states: Vec<&str> = history
        .split("</td><td>")
        .skip(1)
        .map(|cell| &cell[..cell.find("</td>").unwrap()])
        .collect();
    assert_eq!(states, ["Empty", "Stable"], "{history}");
    assert!(history.contains("<td class=\"n\">0</td></tr>"), "{history}");
    drop(classic);
}

#[test]
fn the_security_page_lists_acls_scram_users_and_quotas_never_a_secret() {
    let broker = TestBroker::start_temp(&[
        "--listeners",
        "PLAINTEXT://127.0.0.1:0",
        "--authorizer-class-name",
        "acl",
        "--super-users",
        "User:ANONYMOUS",
        "--console-listen",
        "127.0.0.1:0",
    ]);
    let addr = broker.listener("PLAINTEXT").to_string();
    let console = broker.console_addr.clone().expect("the console's address");
    let (_, page) = get(&console, "/security");
    assert!(
        page.contains("No ACLs.") && page.contains("No SCRAM credentials."),
        "{page}"
    );
    crate::security::add_scram_user(&broker, "carol", "carol-secret", "SCRAM-SHA-256");
    let out = crate::security::python(&format!(
        r#"
from confluent_kafka.admin import AdminClient, AclBinding, ResourceType, ResourcePatternType, AclOperation, AclPermissionType
a = AdminClient({{'bootstrap.servers': '{addr}'}})
b = AclBinding(ResourceType.TOPIC, 'orders<x>', ResourcePatternType.PREFIXED, 'User:carol', '*', AclOperation.READ, AclPermissionType.ALLOW)
for f in a.create_acls([b]).values():
    f.result()
print('created')
"#
    ));
    assert!(out.contains("created"), "{out}");
    let quota = [("producer_byte_rate", Some(1024.0))];
    assert_eq!(
        crate::quotas::alter(&addr, &[("client-id", Some("slowpoke"))], &quota, false),
        0
    );

    let (status, page) = get(&console, "/security");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let acl = after(&page, "<h2>ACLs</h2>", "</table>");
    assert!(
        acl.contains(
            "<tr><td>TOPIC</td><td>PREFIXED</td><td>orders&lt;x&gt;</td><td>User:carol</td>\
                      <td>*</td><td>READ</td><td>ALLOW</td></tr>"
        ),
        "{acl}"
    );
    let users = after(&page, "<h2>SCRAM users</h2>", "</table>");
    assert!(
        users.contains("<td>carol</td><td>SCRAM-SHA-256 (8192 iterations)</td>"),
        "{users}"
    );
    let quotas = after(&page, "<h2>Client quotas</h2>", "</table>");
    assert!(
        quotas.contains("<td>client-id=slowpoke</td><td>producer_byte_rate=1024</td>"),
        "{quotas}"
    );
    assert!(!page.contains("carol-secret"));
}
