//! The console's share-group page, `/shares/<id>`, in headless Chromium: after known
//! acknowledgements (one accepted, one released, one rejected into the dead-letter topic, one
//! still held), each record's state and delivery count in the window, the delivery counts, the
//! archive reasons, the member and the dead-letter topic, under a group id made of markup.

use std::time::Duration;

use test_support::kafka::{self, create_topic, set_configs, GROUP_RESOURCE};
use test_support::TestBroker;

use crate::browser::{after, browser, dom, get};
use crate::console::{HOSTILE, HOSTILE_SHOWN};
use crate::shares::{create_dlq, Member};

#[test]
fn a_share_groups_page_shows_each_records_state_and_deliveries() {
    let broker = TestBroker::start_temp(&["--console-listen", "127.0.0.1:0"]);
    let addr = broker.addr.clone();
    let console = broker.console_addr.clone().expect("the console's address");
    create_topic(&addr, "tasks", 1);
    create_dlq(&addr, "dlq.tasks");
    let group = format!("w{HOSTILE}");
    set_configs(
        &addr,
        GROUP_RESOURCE,
        &group,
        &[
            ("share.auto.offset.reset", "earliest"),
            ("group.share.delivery.count.limit", "3"),
            ("errors.deadletterqueue.topic.name", "dlq.tasks"),
        ],
    );
    kafka::rdkafka_produce(
        &addr,
        &[],
        "tasks",
        (0..4).map(|i| kafka::Record::new(format!("t{i}"))),
    );
    let mut member = Member::join(&addr, &group, "m1", "tasks");
    let mut acquired = 0;
    kafka::wait_until("4 records acquired", Duration::from_secs(20), || {
        acquired += member.fetch(&[], 200).len();
        acquired == 4
    });
    // Accept 0, release 1, reject 2 (archived, dead-lettered), keep 3.
    let acks = [(0, 0, vec![1]), (1, 1, vec![2]), (2, 2, vec![3])];
    assert_eq!(member.acknowledge(&acks), (0, 0));
    kafka::wait_until("the dead letter written", Duration::from_secs(20), || {
        crate::shares::read_all(&addr, "dlq.tasks").len() == 1
    });

    let path = format!("/shares/{}", percent_encode(&group));
    let (status, page) = get(&console, &path);
    assert_eq!(status, "HTTP/1.1 200 OK", "{page}");
    let Some(chromium) = browser() else { return };
    let page = dom(&chromium, &format!("http://{console}{path}"));
    // The console's script ran; the group id's markup neither ran nor became an element.
    assert!(page.contains("data-js=\"ready\""), "{page}");
    assert!(
        !page.contains("<title>pwned") && !page.contains("<b id=\"pwned\""),
        "{page}"
    );
    assert!(!page.contains("<script>document"), "{page}");
    assert!(
        page.contains(&format!("Share group w{HOSTILE_SHOWN}")),
        "{page}"
    );
    assert!(page.contains("Delivery limit 3"), "{page}");
    assert!(page.contains(">dlq.tasks</a>"), "{page}");
    let members = after(&page, "<h2>Members</h2>", "</table>");
    assert!(
        members.contains(">m1</td>") && members.contains("tasks [0]"),
        "{members}"
    );
    let window = after(&page, "Window ", "</p>");
    // Offset 0, accepted, is behind the window's start.
    assert_eq!(
        window,
        "1 to 4: 1 available, 1 acquired, 1 archived. Overload mode off."
    );
    // Not finished (offsets 1 and 3) by deliveries so far: none 0, two 1, none 2, none 3+.
    let counts = after(&page, "<td>Records not finished</td>", "</tr>");
    assert_eq!(
        counts,
        "<td class=\"n\">0</td><td class=\"n\">2</td><td class=\"n\">0</td><td class=\"n\">0</td>"
    );
    assert!(
        page.contains("Archived in the window: rejected 1"),
        "{page}"
    );
    let table = after(&page, "<table class=\"window\">", "</table>");
    let row = |offset: &str| {
        after(
            table,
            &format!("<td class=\"n\">{offset}</td><td>"),
            "</tr>",
        )
        .to_string()
    };
    assert!(
        row("1").starts_with("available</td><td class=\"n\">1</td><td>released"),
        "{}",
        row("1")
    );
    assert!(
        row("2").contains("archived: rejected</span></td><td class=\"n\">1</td><td>rejected"),
        "{}",
        row("2")
    );
    assert!(
        row("3").starts_with("acquired by m1, lock ends in "),
        "{}",
        row("3")
    );
    assert_eq!(get(&console, "/shares/nope").0, "HTTP/1.1 404 Not Found");
    let (_, list) = get(&console, "/shares");
    assert!(list.contains(&format!("<a href=\"{path}\">")), "{list}");
}

/// RFC 3986's unreserved characters kept, every other byte `%XX`, as the console writes links.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
