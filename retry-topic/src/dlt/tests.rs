use super::redrive::{parse_id, record_id};
use super::*;
use consumer::TimestampType;

fn record(headers: &[(&str, &[u8])]) -> ConsumerRecord {
    ConsumerRecord {
        topic: "orders-dlt".into(),
        partition: 1,
        offset: 4,
        timestamp: 10,
        timestamp_type: TimestampType::CreateTime,
        key: Some(Bytes::from_static(b"k")),
        value: Some(Bytes::from_static(b"v")),
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), Some(Bytes::copy_from_slice(v))))
            .collect(),
    }
}

#[test]
fn a_record_without_chain_headers_is_read_with_a_problem_noted() {
    let d = DeadLetter::read(&record(&[("trace", b"abc")]));
    assert!(d.origin.is_none());
    assert_eq!(d.problems.len(), 1);
    assert_eq!(d.headers, vec![("trace".to_string(), "abc".to_string())]);
    assert!(!d.matches("expired"));
}

#[test]
fn filter_matches_whole_or_last_segment() {
    let d = DeadLetter::read(&record(&[
        (
            headers::DLT_EXCEPTION_FQCN,
            b"java.lang.IllegalStateException",
        ),
        (headers::ATTEMPTS, &[0, 0, 0, 3]),
    ]));
    assert!(d.matches("java.lang.IllegalStateException"));
    assert!(d.matches("IllegalStateException"));
    assert!(!d.matches("State"));
    assert_eq!(d.attempts, Some(2));
    let r = DeadLetter::read(&record(&[(
        headers::DLT_EXCEPTION_FQCN,
        b"app::errors::Timeout",
    )]));
    assert!(r.matches("Timeout"));
}

#[test]
fn ids_round_trip_and_headers_print_as_numbers_text_or_hex() {
    assert_eq!(parse_id(&record_id("a/b-dlt", 3, 17)), (3, 17));
    let four = Bytes::from_static(&[0, 0, 0, 3]);
    assert_eq!(header_text("x-custom", &four), "0x00000003");
    // Spring's numbers, in their widths; a number of another width stays hex.
    assert_eq!(header_text(headers::DLT_ORIGINAL_PARTITION, &four), "3");
    assert_eq!(header_text(headers::ATTEMPTS, &four), "3");
    let offset = Bytes::copy_from_slice(&1234i64.to_be_bytes());
    assert_eq!(header_text(headers::ORIGINAL_OFFSET, &offset), "1234");
    assert_eq!(
        header_text(headers::DLT_ORIGINAL_OFFSET, &four),
        "0x00000003"
    );
    let due = Bytes::from(headers::big_integer(1_700_000_000_123));
    assert_eq!(
        header_text(headers::BACKOFF_TIMESTAMP, &due),
        "1700000000123"
    );
    // A Java stack trace is text.
    let trace = "x.ListenerExecutionFailedException: failed\n\tat x.A.b(A.java:1)\r\n";
    assert_eq!(
        header_text(headers::DLT_EXCEPTION_STACKTRACE, &Bytes::from(trace)),
        trace
    );
}

#[test]
fn spring_records_match_their_cause_class() {
    let d = DeadLetter::read(&record(&[
        (headers::ORIGINAL_TOPIC, b"orders"),
        (
            headers::EXCEPTION_FQCN,
            b"org.springframework.kafka.listener.ListenerExecutionFailedException",
        ),
        (
            headers::EXCEPTION_CAUSE_FQCN,
            b"shop.PaymentDeclinedException",
        ),
    ]));
    assert_eq!(d.class.as_deref(), Some("shop.PaymentDeclinedException"));
    assert!(d.matches("PaymentDeclinedException"));
    assert!(d.matches("shop.PaymentDeclinedException"));
    assert!(d.matches("ListenerExecutionFailedException"));
    assert!(!d.matches("IllegalStateException"));
}
