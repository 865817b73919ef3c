//! `lograil serve --console-listen`: the read-only web console, loaded in headless Chromium
//! (Debian's `chromium-headless-shell`) after known traffic from librdkafka and a share
//! consumer, with hostile record contents; its HTTP errors; HTTP Basic authentication and
//! the authorizer's filtering when every listener authenticates.

use std::time::Duration;

use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::{Offset, TopicPartitionList};
use test_support::kafka::{self, create_topic, set_configs, GROUP_RESOURCE};
use test_support::TestBroker;

use crate::browser::{after, browser, chromium, dom, dom_after, get, logged};
use crate::metrics::http;
use crate::shares::Member;

/// A script that would retitle the page and add an element, were it ever run or parsed as
/// markup.
pub(crate) const HOSTILE: &str = "<script>document.title='pwned'</script><b id=\"pwned\">x</b>";
/// How the browser serializes [`HOSTILE`] shown as text (quotes are not escaped in text).
pub(crate) const HOSTILE_SHOWN: &str =
    "&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;b id=\"pwned\"&gt;x&lt;/b&gt;";
const BIG_VALUE: usize = 1_000_000;
const WINDOW: (u32, u32) = (1200, 900);

/// Width and height of a PNG file, from its IHDR chunk; fails the test unless it is a PNG.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(
        bytes.len() > 1000 && bytes.starts_with(b"\x89PNG\r\n\x1a\n") && &bytes[12..16] == b"IHDR",
        "not a PNG of some content ({} bytes)",
        bytes.len()
    );
    let be = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (be(16), be(20))
}

/// Dead letters as a retry chain and Spring Kafka write them, with hostile contents: keys,
/// values and headers with markup, invalid UTF-8, a 1 MB value.
fn produce_dead_letters(addr: &str) {
    create_topic(addr, "orders-dlt", 1);
    let producer = kafka::rdkafka_producer(addr, &[("message.max.bytes", "2000000")]);
    let history = format!(
        r#"[{{"attempt":1,"at":1700000000000,"topic":"orders","partition":2,"offset":41,"consumer":"billing/c1/7","class":"Timeout","message":"{}"}},
           {{"attempt":2,"at":1700000001000,"topic":"orders-retry-1000","partition":0,"offset":5,"consumer":"billing/c1/7","class":"PoisonError","message":"bad"}}]"#,
        HOSTILE.replace('"', "\\\"")
    );
    let partition = 2i32.to_be_bytes();
    let offset = 41i64.to_be_bytes();
    let attempts = 3i32.to_be_bytes();
    let headers = OwnedHeaders::new()
        .insert(Header {
            key: "kafka_dlt-original-topic",
            value: Some("orders"),
        })
        .insert(Header {
            key: "kafka_dlt-original-partition",
            value: Some(&partition[..]),
        })
        .insert(Header {
            key: "kafka_dlt-original-offset",
            value: Some(&offset[..]),
        })
        .insert(Header {
            key: "kafka_dlt-exception-fqcn",
            value: Some("com.example.PoisonError<script>"),
        })
        .insert(Header {
            key: "retry_topic-attempts",
            value: Some(&attempts[..]),
        })
        .insert(Header {
            key: "lograil.retry.history",
            value: Some(history.as_str()),
        })
        .insert(Header {
            key: HOSTILE,
            value: Some(HOSTILE),
        });
    let record = BaseRecord::to("orders-dlt")
        .key(HOSTILE)
        .payload(HOSTILE)
        .headers(headers);
    producer.send(record).map_err(|(e, _)| e).unwrap();
    let invalid: &[u8] = b"bad\xff\xfeutf8";
    let record = BaseRecord::to("orders-dlt").key(invalid).payload(invalid);
    producer.send(record).map_err(|(e, _)| e).unwrap();
    let big = vec![b'A'; BIG_VALUE];
    let record = BaseRecord::<str, [u8]>::to("orders-dlt").payload(&big[..]);
    producer.send(record).map_err(|(e, _)| e).unwrap();
    producer.flush(Duration::from_secs(60)).unwrap();
}

#[test]
fn the_console_shows_the_brokers_numbers_and_hostile_records_safely_in_a_real_browser() {
    let broker = TestBroker::start_temp(&["--console-listen", "127.0.0.1:0"]);
    let addr = broker.addr.clone();
    let console = broker
        .console_addr
        .clone()
        .expect("the start-up line names the console");
    logged(&broker, "console: open to anyone who can reach it");

    // 10 records; a group with a hostile name commits offset 4: lag 6.
    create_topic(&addr, "events", 1);
    kafka::rdkafka_produce(
        &addr,
        &[],
        "events",
        (0..10).map(|i| kafka::Record::new(format!("e{i}")).key(format!("k{i}"))),
    );
    let reader = kafka::rdkafka_reader(&addr, HOSTILE, "events", 0, &[]);
    let mut commit = TopicPartitionList::new();
    commit
        .add_partition_offset("events", 0, Offset::Offset(4))
        .unwrap();
    reader.commit(&commit, CommitMode::Sync).unwrap();

    // A share group with fair turns by key holding 3 records acquired, of two tenants.
    create_topic(&addr, "jobs", 1);
    set_configs(
        &addr,
        GROUP_RESOURCE,
        "workers",
        &[
            ("share.auto.offset.reset", "earliest"),
            ("lograil.share.fairness.key", "key"),
        ],
    );
    kafka::rdkafka_produce(
        &addr,
        &[],
        "jobs",
        [HOSTILE, HOSTILE, "quiet"]
            .into_iter()
            .enumerate()
            .map(|(i, tenant)| kafka::Record::new(format!("job{i}")).key(tenant)),
    );
    let mut member = Member::join(&addr, "workers", "w1", "jobs");
    let mut acquired = 0;
    kafka::wait_until("3 records acquired", Duration::from_secs(20), || {
        acquired += member.fetch(&[], 200).len();
        acquired == 3
    });

    produce_dead_letters(&addr);
    // Spring Kafka's older dead-letter name, more records than a page holds; more partitions
    // than a topics page holds.
    create_topic(&addr, "bulk.DLT", 1);
    kafka::rdkafka_produce(
        &addr,
        &[],
        "bulk.DLT",
        (0..60).map(|i| kafka::Record::new(format!("dead{i}"))),
    );
    create_topic(&addr, "wide", 205);

    // Plain HTTP: the numbers, escaped; bounded pages; errors.
    let (status, groups) = get(&console, "/groups");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let row = after(&groups, "&lt;script&gt;document.title=", "</tr>");
    assert!(
        row.contains("<td class=\"n lag-records\">6</td>"),
        "lag 6: {row}"
    );
    assert!(!groups.contains(HOSTILE), "the group name is escaped");
    let (status, records) = get(
        &console,
        "/dead-letters/records?topic=orders-dlt&partition=0",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        records.len() < 100_000,
        "a 1 MB value is cut: the page is {} bytes",
        records.len()
    );
    assert!(
        records.contains("… (976.6 KiB in all)"),
        "the cut value's size"
    );
    // (request, status, whether the console answered it rather than the HTTP layer).
    for (request, want, console_answered) in [
        (&b"GET /nowhere HTTP/1.1\r\n\r\n"[..], "404 Not Found", true),
        (
            b"GET /topics/../etc HTTP/1.1\r\n\r\n",
            "404 Not Found",
            true,
        ),
        (
            b"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
            "405 Method Not Allowed",
            true,
        ),
        (
            b"DELETE /dead-letters HTTP/1.1\r\n\r\n",
            "405 Method Not Allowed",
            true,
        ),
        (
            b"GET /topics?page=x HTTP/1.1\r\n\r\n",
            "400 Bad Request",
            true,
        ),
        (b"GET /topics?%zz HTTP/1.1\r\n\r\n", "400 Bad Request", true),
        (
            b"GET /dead-letters/records?topic=events HTTP/1.1\r\n\r\n",
            "404 Not Found",
            true,
        ),
        (b"GET / HTTP/9.9\r\n\r\n", "400 Bad Request", false),
        (
            b"GET / HTTP/1.1\r\nno colon here\r\n\r\n",
            "400 Bad Request",
            false,
        ),
        (
            b"\x00\x00\x00\x1f\x00\x12\x00\x03",
            "400 Bad Request",
            false,
        ),
    ] {
        let (status, headers, _) = http(&console, request);
        assert_eq!(status, format!("HTTP/1.1 {want}"), "{request:?}");
        if console_answered {
            assert!(headers["content-security-policy"].contains("default-src 'none'"));
        }
    }
    // Pages are bounded: 50 dead letters, then a link to the next ones; 200 partitions.
    let (_, first) = get(&console, "/dead-letters/records?topic=bulk.DLT");
    assert_eq!(first.matches("<table class=\"record\">").count(), 50);
    assert!(first.contains("dead49") && !first.contains("dead50"));
    let next = "/dead-letters/records?topic=bulk.DLT&amp;partition=0&amp;from=50";
    assert!(first.contains(next), "a link to the next page");
    let (_, second) = get(&console, &next.replace("&amp;", "&"));
    assert_eq!(second.matches("<table class=\"record\">").count(), 10);
    assert!(second.contains("dead50") && second.contains("dead59"));
    let (_, topics) = get(&console, "/topics");
    assert_eq!(topics.matches("<tr><td>").count(), 200);
    assert!(topics.contains("href=\"/topics?page=1\""));
    let (_, rest) = get(&console, "/topics?page=1");
    assert!(
        rest.contains(">wide</a></td><td class=\"n\">204</td>"),
        "the last partition"
    );
    let mut huge = b"GET / HTTP/1.1\r\n".to_vec();
    huge.extend(std::iter::repeat_n(b'x', 20_000));
    assert_eq!(
        http(&console, &huge).0,
        "HTTP/1.1 431 Request Header Fields Too Large"
    );
    let (status, headers, _) = http(&console, b"GET / HTTP/1.1\r\n\r\n");
    assert_eq!(status, "HTTP/1.1 200 OK");
    let csp = &headers["content-security-policy"];
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(
        kafka::api_versions_answered(&addr),
        "the broker is unharmed"
    );

    let Some(browser) = browser() else {
        return;
    };
    let url = |path: &str| format!("http://{console}{path}");
    // The console's own script runs under its policy; an injected one would too if it were
    // markup, and it would retitle the page and add an element.
    let unharmed = |page: &str, dom: &str| {
        assert!(
            dom.contains("data-js=\"ready\""),
            "the console's script ran on {page}"
        );
        assert!(
            !dom.contains("pwned</title>") && !dom.contains("<title>pwned"),
            "no injected script ran on {page}"
        );
        assert!(
            !dom.contains("<b id=\"pwned\""),
            "no injected element on {page}"
        );
        assert!(
            !dom.contains("<script>document"),
            "no injected script on {page}"
        );
    };

    let overview = dom(&browser, &url("/"));
    unharmed("/", &overview);
    assert!(overview.contains("<title>lograil · Overview</title>"));
    assert_eq!(after(&overview, "Share groups<b>", "<"), "1");
    assert_eq!(after(&overview, "Dead letters<b>", "<"), "63");

    let topics = dom(&browser, &url("/topics"));
    unharmed("/topics", &topics);
    let events = after(&topics, ">events</a></td>", "</tr>");
    // Partition 0, log start 0, log end 10, 10 records.
    assert!(
        events.starts_with(
            "<td class=\"n\">0</td><td class=\"n\">0</td><td class=\"n\">10</td><td class=\"n\">10</td>"
        ),
        "{events}"
    );

    let groups = dom(&browser, &url("/groups"));
    unharmed("/groups", &groups);
    assert!(
        groups.contains(HOSTILE_SHOWN),
        "the group name shown as text"
    );
    let row = after(&groups, HOSTILE_SHOWN, "</tr>");
    assert!(row.contains("<td class=\"n lag-records\">6</td>"), "{row}");

    // After the script's refresh (5 s in), the new content is there, as safe.
    let refreshed = dom_after(&browser, &url("/groups"), 7000);
    assert!(
        refreshed.contains("data-refreshes=\"1\""),
        "the page refreshed once"
    );
    unharmed("/groups refreshed", &refreshed);
    let row = after(&refreshed, HOSTILE_SHOWN, "</tr>");
    assert!(row.contains("<td class=\"n lag-records\">6</td>"), "{row}");

    let shares = dom(&browser, &url("/shares"));
    unharmed("/shares", &shares);
    let jobs = after(&shares, "<td>jobs</td>", "</tr>");
    // Partition 0, start 0, end 3, available 0, acquired 3, archived 0.
    assert!(
        jobs.starts_with(
            "<td class=\"n\">0</td><td class=\"n\">0</td><td class=\"n\">3</td><td class=\"n\">0</td><td class=\"n\">3</td><td class=\"n\">0</td>"
        ),
        "{jobs}"
    );
    // Per tenant: available, in flight.
    let tenant = after(&shares, &format!("<td>{HOSTILE_SHOWN}</td>"), "</tr>");
    assert!(
        tenant.starts_with("<td class=\"n\">0</td><td class=\"n\">2</td>"),
        "{tenant}"
    );
    let quiet = after(&shares, "<td>quiet</td>", "</tr>");
    assert!(
        quiet.starts_with("<td class=\"n\">0</td><td class=\"n\">1</td>"),
        "{quiet}"
    );

    let letters = dom(
        &browser,
        &url("/dead-letters/records?topic=orders-dlt&partition=0"),
    );
    unharmed("/dead-letters/records", &letters);
    assert!(letters.contains("orders [2] @ 41"), "the origin");
    assert!(
        letters.contains("com.example.PoisonError&lt;script&gt;"),
        "the error class"
    );
    assert_eq!(
        after(&letters, "<th>Attempts</th><td class=\"n\">", "<"),
        "3"
    );
    let history = after(&letters, "<th>Attempt history</th>", "</table>");
    assert!(history.contains("Timeout") && history.contains("orders-retry-1000 [0] @ 5"));
    assert!(
        history.contains(HOSTILE_SHOWN),
        "a hostile history message as text"
    );
    assert!(
        letters.contains(&format!("<td class=\"mono\">{HOSTILE_SHOWN}</td>")),
        "key"
    );
    assert!(
        letters.contains(&format!("{HOSTILE_SHOWN} = {HOSTILE_SHOWN}")),
        "a hostile header name and value as text"
    );
    assert!(
        letters.contains("bad<span class=\"bin\">\\xff\\xfe</span>utf8"),
        "invalid UTF-8 as escaped bytes: {}",
        after(&letters, "<th>Offset</th><td class=\"n\">1<", "</table>")
    );
    assert!(
        letters.contains("… (976.6 KiB in all)"),
        "the 1 MB value is cut"
    );
    assert!(
        !letters.contains(&"A".repeat(2000)),
        "no more than a prefix of it"
    );

    let shot = broker.data_dir.with_extension("console.png");
    let (width, height) = WINDOW;
    chromium(
        &browser,
        2000,
        &[
            &format!("--screenshot={}", shot.display()),
            &format!("--window-size={width},{height}"),
            &url("/dead-letters/records?topic=orders-dlt&partition=0"),
        ],
    );
    let png = std::fs::read(&shot).expect("a screenshot");
    assert_eq!(png_size(&png), WINDOW);
    let kept = std::env::temp_dir().join("lograil-console-dead-letters.png");
    std::fs::copy(&shot, &kept).unwrap();
    println!(
        "console screenshot: {} ({} bytes)",
        kept.display(),
        png.len()
    );
    assert!(
        kafka::api_versions_answered(&addr),
        "the broker is unharmed"
    );
}

#[test]
fn with_every_listener_authenticating_the_console_asks_for_a_broker_user_and_filters_by_acls() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("plain-users");
    std::fs::write(&users, "admin=admin-secret\nbob=bob-secret\n").unwrap();
    let broker = TestBroker::start_temp(&[
        "--listeners",
        "SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-plain-users-file",
        users.to_str().unwrap(),
        "--authorizer-class-name",
        "acl",
        "--super-users",
        "User:admin",
        "--console-listen",
        "127.0.0.1:0",
        "--console-actions",
        "--connection-failed-authentication-delay-ms",
        "400",
    ]);
    let addr = broker.listener("SASL_PLAINTEXT").to_string();
    let console = broker.console_addr.clone().expect("the console's address");
    logged(&broker, "console: HTTP Basic authentication");
    let admin = [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", "PLAIN"),
        ("sasl.username", "admin"),
        ("sasl.password", "admin-secret"),
    ];
    kafka::rdkafka_produce(
        &addr,
        &admin,
        "payroll",
        (0..5).map(|i| kafka::Record::new(format!("p{i}"))),
    );

    // Base64 of `user:password`.
    let basic = |user_password: &str| {
        let known = [
            ("admin:guess", "YWRtaW46Z3Vlc3M="),
            ("mallory:admin-secret", "bWFsbG9yeTphZG1pbi1zZWNyZXQ="),
            ("admin:admin-secret", "YWRtaW46YWRtaW4tc2VjcmV0"),
            ("bob:bob-secret", "Ym9iOmJvYi1zZWNyZXQ="),
        ];
        let (_, encoded) = known.iter().find(|(k, _)| *k == user_password).unwrap();
        Some(encoded.to_string())
    };
    let as_user = |path: &str, credentials: Option<String>| {
        let mut request = format!("GET {path} HTTP/1.1\r\n");
        if let Some(c) = credentials {
            request.push_str(&format!("Authorization: Basic {c}\r\n"));
        }
        request.push_str("\r\n");
        http(&console, request.as_bytes())
    };
    for path in ["/", "/topics", "/console.js", "/nowhere"] {
        let (status, headers, body) = as_user(path, None);
        assert_eq!(status, "HTTP/1.1 401 Unauthorized", "{path}");
        assert!(headers["www-authenticate"].starts_with("Basic realm="));
        assert!(!body.contains("payroll"));
    }
    for wrong in [
        basic("admin:guess"),
        basic("mallory:admin-secret"),
        Some("!!!".to_string()),
    ] {
        let checked = wrong.as_deref() != Some("!!!");
        let started = std::time::Instant::now();
        assert_eq!(as_user("/topics", wrong).0, "HTTP/1.1 401 Unauthorized");
        // A wrong password or user is answered after the failed-authentication delay.
        if checked {
            assert!(
                started.elapsed() >= std::time::Duration::from_millis(400),
                "answered in {:?}",
                started.elapsed()
            );
        }
    }
    let (status, _, body) = as_user("/topics", basic("admin:admin-secret"));
    assert_eq!(status, "HTTP/1.1 200 OK");
    let payroll = after(&body, ">payroll</a></td>", "</tr>");
    assert!(payroll.contains("<td class=\"n\">5</td>"), "{payroll}");
    assert!(body.contains("User:admin"));
    // bob has no ACLs: he is in, and sees no topic.
    let (status, _, body) = as_user("/topics", basic("bob:bob-secret"));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("User:bob"));
    assert!(
        !body.contains("payroll"),
        "a topic bob may not describe is hidden"
    );
    // Nor its page, nor its records; admin reads them.
    for path in ["/topics/payroll", "/topics/payroll/messages"] {
        assert_eq!(
            as_user(path, basic("bob:bob-secret")).0,
            "HTTP/1.1 404 Not Found"
        );
    }
    let (_, _, records) = as_user("/topics/payroll/messages", basic("admin:admin-secret"));
    assert!(records.contains("p4"), "{records}");
    let (_, _, body) = as_user("/security", basic("bob:bob-secret"));
    // ACLs and SCRAM users need Describe on the cluster, quotas DescribeConfigs on it.
    assert_eq!(
        body.matches("Needs Describe on the cluster.").count(),
        2,
        "{body}"
    );
    assert!(
        body.contains("Needs DescribeConfigs on the cluster.")
            && !body.contains("<th>Principal</th>")
    );
    let (status, _, body) = as_user("/limits", basic("bob:bob-secret"));
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(body.contains("Needs DescribeConfigs on the cluster."));
    // Actions: nothing without credentials, not even a POST's form read; bob may not see the
    // records he would delete, so for him they do not exist; admin gets the confirmation.
    let delete = "/actions/delete-records?topic=payroll&partition=0&offset=2";
    assert_eq!(as_user(delete, None).0, "HTTP/1.1 401 Unauthorized");
    let post = b"POST /actions/delete-records HTTP/1.1\r\nContent-Type: \
                 application/x-www-form-urlencoded\r\nContent-Length: 34\r\n\r\n\
                 topic=payroll&partition=0&offset=2";
    assert_eq!(http(&console, post).0, "HTTP/1.1 401 Unauthorized");
    assert_eq!(
        as_user(delete, basic("bob:bob-secret")).0,
        "HTTP/1.1 404 Not Found"
    );
    let (status, _, body) = as_user(delete, basic("admin:admin-secret"));
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(body.contains("(2 records) will be deleted"), "{body}");
    assert_eq!(
        as_user("/", basic("admin:admin-secret")).0,
        "HTTP/1.1 200 OK"
    );
}
