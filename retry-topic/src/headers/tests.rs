use super::*;

#[test]
fn big_integer_matches_java() {
    // Values from Java's BigInteger.valueOf(v).toByteArray().
    assert_eq!(big_integer(0), vec![0x00]);
    assert_eq!(big_integer(127), vec![0x7f]);
    assert_eq!(big_integer(128), vec![0x00, 0x80]);
    assert_eq!(big_integer(-1), vec![0xff]);
    assert_eq!(big_integer(-128), vec![0x80]);
    assert_eq!(big_integer(-129), vec![0xff, 0x7f]);
    // 2026-01-01T00:00:00Z in ms = 1767225600000 = 0x019B_76DA_A800.
    assert_eq!(
        big_integer(1_767_225_600_000),
        vec![0x01, 0x9b, 0x76, 0xda, 0xa8, 0x00]
    );
    assert_eq!(big_integer(i64::MAX).len(), 8);
    for v in [
        0,
        1,
        -1,
        255,
        256,
        -256,
        1_767_225_600_000,
        i64::MIN,
        i64::MAX,
    ] {
        assert_eq!(read_big_integer(&big_integer(v)), Some(v), "{v}");
    }
    assert_eq!(read_big_integer(&[]), None);
    assert_eq!(read_big_integer(&[0; 9]), None);
}

fn record(headers: &[(&str, &[u8])]) -> ConsumerRecord {
    ConsumerRecord {
        topic: "orders".into(),
        partition: 2,
        offset: 7,
        timestamp: 1000,
        timestamp_type: TimestampType::CreateTime,
        key: None,
        value: None,
        headers: headers
            .iter()
            .map(|(n, v)| (n.to_string(), Some(Bytes::copy_from_slice(v))))
            .collect(),
    }
}

#[test]
fn attempts_reads_spring_forms_and_refuses_garbage() {
    assert_eq!(attempts(&record(&[])), Ok(1));
    assert_eq!(attempts(&record(&[(ATTEMPTS, &[0, 0, 0, 3])])), Ok(3));
    assert_eq!(attempts(&record(&[(ATTEMPTS, &[2])])), Ok(2));
    assert!(attempts(&record(&[(ATTEMPTS, &[0, 3])])).is_err());
    assert!(attempts(&record(&[(ATTEMPTS, &[0, 0, 0, 0])])).is_err());
    assert!(attempts(&record(&[(ATTEMPTS, &[0xff, 0xff, 0xff, 0xff])])).is_err());
}

#[test]
fn deadline_reads_both_encodings() {
    assert_eq!(deadline(&record(&[(DEADLINE, b"1234")])), Ok(Some(1234)));
    assert_eq!(
        deadline(&record(&[(DEADLINE, &1234i64.to_be_bytes())])),
        Ok(Some(1234))
    );
    assert!(deadline(&record(&[(DEADLINE, b"soon")])).is_err());
    assert_eq!(deadline(&record(&[])), Ok(None));
}

#[test]
fn origin_reads_either_family() {
    let dlt = record(&[
        (DLT_ORIGINAL_TOPIC, b"orders"),
        (DLT_ORIGINAL_PARTITION, &3i32.to_be_bytes()),
        (DLT_ORIGINAL_OFFSET, &42i64.to_be_bytes()),
        (DLT_ORIGINAL_TIMESTAMP, &99i64.to_be_bytes()),
        (DLT_ORIGINAL_TIMESTAMP_TYPE, b"CreateTime"),
        (DLT_ORIGINAL_CONSUMER_GROUP, b"billing"),
    ]);
    let o = Origin::from_headers(&dlt).unwrap().unwrap();
    assert_eq!(
        (o.topic.as_str(), o.partition, o.offset, o.timestamp),
        ("orders", 3, 42, 99)
    );
    assert_eq!(o.group.as_deref(), Some("billing"));
    let retry = record(&[
        (ORIGINAL_TOPIC, b"x"),
        (ORIGINAL_OFFSET, &5i64.to_be_bytes()),
    ]);
    assert_eq!(Origin::from_headers(&retry).unwrap().unwrap().offset, 5);
    assert_eq!(Origin::from_headers(&record(&[])), Ok(None));
    let bad = record(&[
        (DLT_ORIGINAL_TOPIC, b"x"),
        (DLT_ORIGINAL_PARTITION, &[1, 2]),
    ]);
    assert!(Origin::from_headers(&bad).is_err());
}

#[test]
fn exception_names_the_cause_spring_wrapped() {
    let spring = record(&[
        (
            EXCEPTION_FQCN,
            b"org.springframework.kafka.listener.ListenerExecutionFailedException",
        ),
        (EXCEPTION_CAUSE_FQCN, b"app.PaymentDeclinedException"),
        (EXCEPTION_MESSAGE, b"Listener failed; card declined"),
        (
            EXCEPTION_STACKTRACE,
            b"ListenerExecutionFailedException\n\tat x",
        ),
    ]);
    let e = exception(&spring);
    assert_eq!(e.class.as_deref(), Some("app.PaymentDeclinedException"));
    assert_eq!(
        e.wrapper.as_deref(),
        Some("org.springframework.kafka.listener.ListenerExecutionFailedException")
    );
    assert_eq!(e.message.as_deref(), Some("Listener failed; card declined"));
    assert!(e.stack_trace.unwrap().contains("\tat x"));
    // Ours: no cause, the class as written; the dead-letter family first.
    let ours = record(&[
        (EXCEPTION_FQCN, b"a::Retry"),
        (DLT_EXCEPTION_FQCN, b"a::Fatal"),
    ]);
    let e = exception(&ours);
    assert_eq!((e.class.as_deref(), e.wrapper), (Some("a::Fatal"), None));
}

#[test]
fn clear_exception_drops_both_families_and_keeps_the_rest() {
    let mut set = HeaderSet::from_record(&record(&[
        (EXCEPTION_CAUSE_FQCN, b"x"),
        (EXCEPTION_STACKTRACE, b"y"),
        (DLT_EXCEPTION_CAUSE_FQCN, b"x"),
        ("kafka_dlt-key-exception-fqcn", b"k"),
        (ATTEMPTS, &[0, 0, 0, 2]),
        ("trace", b"t"),
    ]));
    set.clear_exception();
    let left: Vec<&str> = set.0.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(left, [ATTEMPTS, "trace"]);
}

#[test]
fn clip_keeps_short_messages_and_cuts_long_ones() {
    assert_eq!(clip("boom"), "boom");
    let long = "é".repeat(MESSAGE_LIMIT + 10);
    assert_eq!(clip(&long).chars().count(), MESSAGE_LIMIT + 1);
}
