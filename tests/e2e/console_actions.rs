//! The console's actions (`--console-actions`) in a real browser (headless Chromium driven over
//! the DevTools protocol by `cdp.mjs`, which clicks the confirmation's button): a group's
//! offsets reset, records deleted, a dead letter redriven, each only as the authorizer allows
//! the Kafka request it is (ACLs made with confluent-kafka), and never from another origin,
//! without the page's token, twice with one token, or with the console read-only.

use std::path::Path;
use std::process::Command;

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;
use test_support::{Certs, TestBroker};

use crate::browser::{after, browser, get, logged};
use crate::metrics::http;
use crate::security::python;

/// A broker with an authorizer, a PLAINTEXT listener (the console's viewer and the CLI are
/// `User:ANONYMOUS`) and a SASL_PLAINTEXT one for `admin`, the super user, and its console with
/// actions (`actions`) or read-only.
pub(crate) fn broker(certs: &Certs, actions: bool) -> TestBroker {
    let users = certs.path("plain-users");
    std::fs::write(&users, "admin=admin-secret\n").unwrap();
    let mut args = vec![
        "--listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "--sasl-plain-users-file",
        users.to_str().unwrap(),
        "--authorizer-class-name",
        "acl",
        "--super-users",
        "User:admin",
        "--console-listen",
        "127.0.0.1:0",
    ];
    if actions {
        args.push("--console-actions");
    }
    TestBroker::start_temp(&args)
}

/// Runs `body` in Python with `conf` (admin's client settings), `a` (an AdminClient) and the
/// confluent-kafka names it uses in scope; its stdout.
pub(crate) fn admin(broker: &TestBroker, body: &str) -> String {
    let addr = broker.listener("SASL_PLAINTEXT");
    python(&format!(
        r#"
from confluent_kafka import Producer, Consumer, TopicPartition
from confluent_kafka.admin import (AdminClient, NewTopic, AclBinding, AclBindingFilter,
    ResourceType, ResourcePatternType, AclOperation, AclPermissionType)
conf = {{'bootstrap.servers': '{addr}', 'security.protocol': 'SASL_PLAINTEXT',
        'sasl.mechanism': 'PLAIN', 'sasl.username': 'admin', 'sasl.password': 'admin-secret'}}
a = AdminClient(conf)
def acl(kind, name, op, allow=True):
    t = getattr(ResourceType, kind)
    o = getattr(AclOperation, op)
    if allow:
        b = AclBinding(t, name, ResourcePatternType.LITERAL, 'User:ANONYMOUS', '*', o, AclPermissionType.ALLOW)
        [f.result() for f in a.create_acls([b]).values()]
    else:
        b = AclBindingFilter(t, name, ResourcePatternType.LITERAL, 'User:ANONYMOUS', '*', o, AclPermissionType.ALLOW)
        [f.result() for f in a.delete_acls([b]).values()]
def committed(group, topic, n):
    c = Consumer({{**conf, 'group.id': group}})
    print([tp.offset for tp in c.committed([TopicPartition(topic, i) for i in range(n)], timeout=10)])
    c.close()
{body}
"#
    ))
}

/// The page after clicking `selector` on `url` in the browser (`--follow`: after the page's
/// own script navigated).
fn click(browser: &Path, url: &str, selector: &str) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/cdp.mjs");
    let out = Command::new("node")
        .env_remove("LD_LIBRARY_PATH")
        .arg("--experimental-websocket")
        .arg(&script)
        .args([browser.to_str().unwrap(), url, selector])
        .output()
        .expect("run node (the DevTools driver)");
    assert!(
        out.status.success(),
        "cdp.mjs {url} {selector}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// POSTs `form` (already encoded) to the console, with `headers`; status and body.
fn post(console: &str, path: &str, form: &str, headers: &str) -> (String, String) {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {console}\r\n{headers}Content-Type: \
         application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    );
    let (status, _, body) = http(console, request.as_bytes());
    (status, body)
}

/// The confirmation form's fields as a POST body, and its token alone.
fn form_of(page: &str) -> (String, String) {
    let form = after(page, "<form method=\"post\"", "</form>");
    let mut pairs = Vec::new();
    let mut token = String::new();
    for input in form.split("<input type=\"hidden\" ").skip(1) {
        let name = after(input, "name=\"", "\"");
        let value = after(input, "value=\"", "\"");
        if name == "token" {
            token = value.to_string();
        }
        // The page's values are percent-encoded once; the form encodes them again.
        pairs.push(format!("{name}={}", value.replace('%', "%25")));
    }
    (pairs.join("&"), token)
}

#[test]
fn a_groups_offsets_are_reset_in_a_browser_only_as_offset_commit_is_authorized() {
    let Some(chromium) = browser() else { return };
    let certs = Certs::new();
    let broker = broker(&certs, true);
    logged(&broker, "console: actions on");
    let console = broker.console_addr.clone().expect("the console's address");
    admin(
        &broker,
        r#"
a.create_topics([NewTopic('orders', 3, 1)])['orders'].result()
p = Producer(conf)
for i in range(30):
    p.produce('orders', key=str(i), value=f'v{i}', partition=i % 3)
p.flush()
c = Consumer({**conf, 'group.id': 'billing', 'enable.auto.commit': False})
c.commit(offsets=[TopicPartition('orders', i, 7) for i in range(3)], asynchronous=False)
c.close()
"#,
    );
    let ask = "/actions/reset-offsets?group=billing&topic=orders&to=earliest";
    // Not even Describe: as if the group did not exist.
    assert_eq!(get(&console, ask).0, "HTTP/1.1 404 Not Found");
    admin(
        &broker,
        "acl('GROUP', 'billing', 'DESCRIBE'); acl('TOPIC', 'orders', 'DESCRIBE')",
    );
    let (status, page) = get(&console, ask);
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{page}");
    assert!(
        page.contains("needs Read on the group and on the topic"),
        "{page}"
    );
    assert!(!page.contains("<form method=\"post\""), "{page}");

    admin(
        &broker,
        "acl('GROUP', 'billing', 'READ'); acl('TOPIC', 'orders', 'READ')",
    );
    // The group page offers the reset; its confirmation shows 7 → 0 on each partition.
    let (_, group_page) = get(&console, "/groups/billing");
    assert!(
        group_page.contains("action=\"/actions/reset-offsets\""),
        "{group_page}"
    );
    let (status, page) = get(&console, ask);
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    let plan = after(&page, "<table>", "</table>");
    assert_eq!(plan.matches("<b>0</b>").count(), 3, "{plan}");
    assert_eq!(plan.matches("<td class=\"n\">7</td>").count(), 3, "{plan}");
    // Nothing changed by looking.
    let committed = "committed('billing', 'orders', 3)";
    assert_eq!(admin(&broker, committed).trim(), "[7, 7, 7]");

    let done = click(
        &chromium,
        &format!("http://{console}{ask}"),
        "form.action button",
    );
    let result = after(&done, "<table>", "</table>");
    assert_eq!(result.matches("<td>committed</td>").count(), 3, "{done}");
    assert_eq!(admin(&broker, committed).trim(), "[0, 0, 0]");
    logged(&broker, "console action");
    let log = std::fs::read_to_string(broker.log_path()).unwrap();
    let line = log.lines().find(|l| l.contains("console action")).unwrap();
    assert!(
        line.contains("User:ANONYMOUS") && line.contains("reset-offsets"),
        "{line}"
    );

    // A form carrying a good token, sent from another origin (a page on file://, whose
    // script submits it): refused, whatever the token.
    let (_, page) = get(
        &console,
        "/actions/reset-offsets?group=billing&topic=orders&to=latest",
    );
    let (fields, token) = form_of(&page);
    let dir = tempfile::tempdir().unwrap();
    let evil = dir.path().join("evil.html");
    let inputs: String = fields
        .split('&')
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap();
            let value = value.replace("%25", "%");
            format!("<input type=hidden name=\"{name}\" value=\"{value}\">")
        })
        .collect();
    std::fs::write(
        &evil,
        format!(
            "<form method=post action=\"http://{console}/actions/reset-offsets\">{inputs}</form>\
             <script>document.forms[0].submit()</script>"
        ),
    )
    .unwrap();
    let refused = click(&chromium, &format!("file://{}", evil.display()), "--follow");
    assert!(
        refused.contains("not sent from this console's own page"),
        "{refused}"
    );
    assert_eq!(admin(&broker, committed).trim(), "[0, 0, 0]");
    // Without the token, or with another one: refused.
    let no_token = fields.replace(&format!("token={}", token.replace('%', "%25")), "token=");
    let (status, body) = post(&console, "/actions/reset-offsets", &no_token, "");
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{body}");
    assert!(body.contains("CSRF"), "{body}");
    // Read on the group taken away after the confirmation: the broker's OffsetCommit says no.
    admin(&broker, "acl('GROUP', 'billing', 'READ', allow=False)");
    let origin = format!("Origin: http://{console}\r\n");
    let (status, body) = post(&console, "/actions/reset-offsets", &fields, &origin);
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{body}");
    assert!(body.contains("GROUP_AUTHORIZATION_FAILED"), "{body}");
    assert_eq!(admin(&broker, committed).trim(), "[0, 0, 0]");
    // The token was spent on that refusal: given back its right, the same form is refused.
    admin(&broker, "acl('GROUP', 'billing', 'READ')");
    let (status, body) = post(&console, "/actions/reset-offsets", &fields, &origin);
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{body}");
    assert!(body.contains("already used"), "{body}");
    assert_eq!(admin(&broker, committed).trim(), "[0, 0, 0]");

    // A group with a member is not reset (its consumers must stop first).
    let member: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", broker.listener("SASL_PLAINTEXT"))
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "PLAIN")
        .set("sasl.username", "admin")
        .set("sasl.password", "admin-secret")
        .set("group.id", "billing")
        .create()
        .unwrap();
    member.subscribe(&["orders"]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while member.assignment().unwrap().count() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the member got no partitions"
        );
        member.poll(std::time::Duration::from_millis(100));
    }
    let (status, page) = get(&console, ask);
    assert_eq!(status, "HTTP/1.1 409 Conflict", "{page}");
    assert!(page.contains("the group has 1 members"), "{page}");
}

#[test]
fn records_are_deleted_and_a_dead_letter_redriven_once_as_the_authorizer_allows() {
    let Some(chromium) = browser() else { return };
    let certs = Certs::new();
    let broker = broker(&certs, true);
    logged(&broker, "console: actions on");
    let console = broker.console_addr.clone().expect("the console's address");
    admin(
        &broker,
        r#"
for t, n in [('orders', 2), ('orders-dlt', 1)]:
    a.create_topics([NewTopic(t, n, 1)])[t].result()
p = Producer(conf)
for i in range(10):
    p.produce('orders', value=f'v{i}', partition=0)
headers = [('kafka_dlt-original-topic', b'orders'),
           ('kafka_dlt-original-partition', (1).to_bytes(4, 'big')),
           ('kafka_dlt-original-offset', (7).to_bytes(8, 'big')),
           ('kafka_dlt-exception-fqcn', b'java.lang.IllegalStateException'),
           ('trace', b't-1')]
p.produce('orders-dlt', key=b'k<1>', value=b'poison', headers=headers)
p.flush()
acl('TOPIC', 'orders', 'DESCRIBE')
acl('TOPIC', 'orders-dlt', 'DESCRIBE')
"#,
    );
    let watermarks = r#"
c = Consumer({**conf, 'group.id': 'w'})
print(c.get_watermark_offsets(TopicPartition('orders', 0), timeout=10))
"#;
    let delete = "/actions/delete-records?topic=orders&partition=0&offset=4";
    let (status, page) = get(&console, delete);
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{page}");
    assert!(page.contains("needs Delete on the topic"), "{page}");
    admin(&broker, "acl('TOPIC', 'orders', 'DELETE')");
    let (_, topic_page) = get(&console, "/topics/orders");
    assert!(
        topic_page.contains("action=\"/actions/delete-records\""),
        "{topic_page}"
    );
    let (status, page) = get(&console, delete);
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    assert!(page.contains("(4 records) will be deleted"), "{page}");
    assert_eq!(admin(&broker, watermarks).trim(), "(0, 10)");
    let done = click(
        &chromium,
        &format!("http://{console}{delete}"),
        "form.action button",
    );
    assert!(
        done.contains("the log start of orders [0] is now 4"),
        "{done}"
    );
    assert_eq!(admin(&broker, watermarks).trim(), "(4, 10)");

    // Redrive: Read on the dead letters, Write on the origin, Create and Write on the ledger.
    let redrive = "/actions/redrive?topic=orders-dlt&partition=0&offset=0";
    let (status, page) = get(&console, redrive);
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{page}");
    assert!(
        page.contains("needs Read on the dead-letter topic"),
        "{page}"
    );
    admin(&broker, "acl('TOPIC', 'orders-dlt', 'READ')");
    let (_, letters) = get(
        &console,
        "/dead-letters/records?topic=orders-dlt&partition=0",
    );
    assert!(
        letters.contains("href=\"/actions/redrive?topic=orders-dlt&amp;partition=0&amp;offset=0\""),
        "{letters}"
    );
    let (status, page) = get(&console, redrive);
    assert_eq!(status, "HTTP/1.1 403 Forbidden", "{page}");
    assert!(page.contains("needs Write on the original topic"), "{page}");
    admin(&broker, "acl('TOPIC', 'orders', 'WRITE')");
    let (status, page) = get(&console, redrive);
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    assert!(
        page.contains("is copied to orders [1]") && page.contains("k&lt;1&gt;"),
        "{page}"
    );
    // The ledger is made as the viewer: without Create, the redrive is refused, nothing copied.
    let refused = click(
        &chromium,
        &format!("http://{console}{redrive}"),
        "form.action button",
    );
    assert!(refused.contains("TOPIC_AUTHORIZATION_FAILED"), "{refused}");
    admin(
        &broker,
        "acl('TOPIC', 'orders-dlt-redrive-log', 'CREATE'); acl('TOPIC', 'orders-dlt-redrive-log', 'WRITE'); \
         acl('TOPIC', 'orders-dlt-redrive-log', 'READ')",
    );
    let done = click(
        &chromium,
        &format!("http://{console}{redrive}"),
        "form.action button",
    );
    assert!(
        done.contains("Redriven to orders [1] at offset 0"),
        "{done}"
    );
    let copy = admin(
        &broker,
        r#"
c = Consumer({**conf, 'group.id': 'check'})
c.assign([TopicPartition('orders', 1, 0)])
m = c.poll(10)
print(m.key(), m.value(), sorted(m.headers()))
print(c.poll(1))
"#,
    );
    assert_eq!(
        copy.trim(),
        "b'k<1>' b'poison' [('lograil.redrive.of', b'orders-dlt/0/0'), ('trace', b't-1')]\nNone"
    );
    // Once: the console says so, and `lograil dlt redrive` reads the same ledger.
    let (status, page) = get(&console, redrive);
    assert_eq!(status, "HTTP/1.1 409 Conflict", "{page}");
    assert!(page.contains("redriven already"), "{page}");
    admin(
        &broker,
        "acl('GROUP', '*', 'READ'); acl('TOPIC', 'orders-dlt', 'DESCRIBE_CONFIGS'); \
         acl('TOPIC', 'orders-dlt-redrive-log', 'DESCRIBE_CONFIGS')",
    );
    let (ok, out, err) = test_support::lograil(&[
        "dlt",
        "redrive",
        "--from",
        "orders-dlt",
        "--json",
        "--bootstrap-server",
        broker.listener("PLAINTEXT"),
    ]);
    assert!(ok, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (
            report["redriven"].as_array().map(Vec::len),
            report["already"].as_u64()
        ),
        (Some(0), Some(1)),
        "{out}"
    );
}

#[test]
fn a_read_only_console_has_no_actions() {
    let certs = Certs::new();
    let broker = broker(&certs, false);
    let console = broker.console_addr.clone().expect("the console's address");
    admin(&broker, "a.create_topics([NewTopic('orders', 1, 1)])['orders'].result()\nacl('TOPIC', 'orders', 'ALL')");
    let (status, body) = get(
        &console,
        "/actions/delete-records?topic=orders&partition=0&offset=0",
    );
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    assert!(body.contains("--console-actions"), "{body}");
    let (status, _) = post(&console, "/actions/delete-records", "topic=orders", "");
    assert_eq!(status, "HTTP/1.1 404 Not Found");
    let (status, _) = post(&console, "/topics/orders", "", "");
    assert_eq!(status, "HTTP/1.1 405 Method Not Allowed");
    let (_, page) = get(&console, "/topics/orders");
    assert!(!page.contains("/actions/"), "{page}");
    let (_, headers, _) = http(
        &console,
        format!("GET / HTTP/1.1\r\nHost: {console}\r\n\r\n").as_bytes(),
    );
    assert!(
        headers["content-security-policy"].ends_with("form-action 'none'"),
        "{headers:?}"
    );
}

#[test]
fn a_group_named_in_markup_and_control_characters_is_reset_by_its_exact_name() {
    let certs = Certs::new();
    let broker = broker(&certs, true);
    let console = broker.console_addr.clone().expect("the console's address");
    // Markup, quotes, a tab and a percent sign: what an attribute, a form and a URL each mangle.
    let group = "g<b id=\"x\">'\t%41&";
    let py_group = "'g<b id=\"x\">\\'\\t%41&'";
    admin(
        &broker,
        &format!(
            r#"
a.create_topics([NewTopic('jobs', 1, 1)])['jobs'].result()
p = Producer(conf)
for i in range(5):
    p.produce('jobs', value=f'j{{i}}')
p.flush()
c = Consumer({{**conf, 'group.id': {py_group}, 'enable.auto.commit': False}})
c.commit(offsets=[TopicPartition('jobs', 0, 1)], asynchronous=False)
c.close()
acl('GROUP', {py_group}, 'READ'); acl('TOPIC', 'jobs', 'READ')
"#
        ),
    );
    let encoded: String = group
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'0'..=b'9' => char::from(b).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let ask = format!("/actions/reset-offsets?group={encoded}&topic=jobs&to=offset&value=4");
    let (status, page) = get(&console, &ask);
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    assert!(!page.contains("<b id="), "{page}");
    let (fields, _) = form_of(&page);
    let origin = format!("Origin: http://{console}\r\n");
    let (status, body) = post(&console, "/actions/reset-offsets", &fields, &origin);
    assert_eq!(status, "HTTP/1.1 200 OK", "{body}");
    assert!(body.contains("<td>committed</td>"), "{body}");
    let committed = admin(&broker, &format!("committed({py_group}, 'jobs', 1)"));
    assert_eq!(committed.trim(), "[4]");
}
