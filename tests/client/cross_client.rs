//! Cross-client checks with librdkafka (the `rdkafka` crate): what our producer writes reads
//! back identically with librdkafka, and the reverse, with headers and every codec.

use std::time::{Duration, Instant};

use bytes::Bytes;
use consumer::{ProducerRecord, TopicPartition};
use rdkafka::config::ClientConfig as RdConfig;
use rdkafka::consumer::{BaseConsumer, Consumer as _};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer as _, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

use test_support::cluster::{read_all, TestCluster};

/// Key, value and headers of a test record.
type Parts = (
    Option<String>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

/// (partition, offset, timestamp, key, value, headers) as both sides see a record.
type Seen = (
    i32,
    i64,
    i64,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Vec<(String, Option<Vec<u8>>)>,
);

fn record(i: u32, codec: &str) -> Parts {
    let key = (!i.is_multiple_of(4)).then(|| format!("key-{i}"));
    let value = (!i.is_multiple_of(9)).then(|| {
        let mut v = format!("{codec}:{i}:").repeat(30).into_bytes();
        v.extend((0..64u8).map(|b| b ^ i as u8));
        v
    });
    let headers = vec![
        ("a".to_string(), Some(format!("h{i}").into_bytes())),
        ("binary".to_string(), Some(vec![0, 255, i as u8])),
        ("none".to_string(), None),
    ];
    (key, value, headers)
}

fn rd_consume(bootstrap: &str, topic: &str, count: usize) -> Vec<Seen> {
    let consumer: BaseConsumer = RdConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("group.id", "cross-client")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let mut out = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.len() < count {
        assert!(
            Instant::now() < deadline,
            "librdkafka read {} of {count}",
            out.len()
        );
        let Some(m) = consumer.poll(Duration::from_millis(200)) else {
            continue;
        };
        let m = m.unwrap();
        let headers = m
            .headers()
            .map(|h| {
                h.iter()
                    .map(|Header { key, value }| (key.to_string(), value.map(<[u8]>::to_vec)))
                    .collect()
            })
            .unwrap_or_default();
        out.push((
            m.partition(),
            m.offset(),
            m.timestamp().to_millis().unwrap(),
            m.key().map(<[u8]>::to_vec),
            m.payload().map(<[u8]>::to_vec),
            headers,
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_records_read_back_identically_with_librdkafka() {
    let cluster = TestCluster::start();
    for codec in CODECS {
        let topic = cluster.create_topic(&format!("to-rd-{codec}"), 1).await;
        let producer = cluster
            .producer(&[("compression.type", codec), ("linger.ms", "20")])
            .await;
        let mut expected: Vec<Seen> = Vec::new();
        let mut deliveries = Vec::new();
        for i in 0..40u32 {
            let (key, value, headers) = record(i, codec);
            let mut r = ProducerRecord::new(&topic).timestamp(1_650_000_000_000 + i64::from(i));
            r.key = key.clone().map(Bytes::from);
            r.value = value.clone().map(Bytes::from);
            r.headers = headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().map(Bytes::from)))
                .collect();
            deliveries.push(producer.send(r).await.unwrap());
            expected.push((
                0,
                0,
                1_650_000_000_000 + i64::from(i),
                key.map(String::into_bytes),
                value,
                headers,
            ));
        }
        for (d, e) in deliveries.into_iter().zip(expected.iter_mut()) {
            e.1 = d.await.unwrap().offset;
        }
        producer.close().await;
        let bootstrap = cluster.plain_bootstrap().to_string();
        let t = topic.clone();
        let got = tokio::task::spawn_blocking(move || rd_consume(&bootstrap, &t, 40))
            .await
            .unwrap();
        assert_eq!(got, expected, "{codec}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn librdkafka_records_read_back_identically_with_ours() {
    let cluster = TestCluster::start();
    for codec in CODECS {
        let topic = cluster.create_topic(&format!("from-rd-{codec}"), 1).await;
        let bootstrap = cluster.plain_bootstrap().to_string();
        let t = topic.clone();
        let c = codec.to_string();
        let expected: Vec<Seen> = tokio::task::spawn_blocking(move || {
            let producer: ThreadedProducer<DefaultProducerContext> = RdConfig::new()
                .set("bootstrap.servers", &bootstrap)
                .set("compression.type", &c)
                .set("linger.ms", "20")
                .create()
                .unwrap();
            let mut expected = Vec::new();
            for i in 0..40u32 {
                let (key, value, headers) = record(i, &c);
                let mut h = OwnedHeaders::new();
                for (k, v) in &headers {
                    h = h.insert(Header {
                        key: k,
                        value: v.as_deref(),
                    });
                }
                let ts = 1_650_000_000_000 + i64::from(i);
                let mut r: BaseRecord<'_, str, [u8]> =
                    BaseRecord::to(&t).partition(0).timestamp(ts).headers(h);
                if let Some(k) = &key {
                    r = r.key(k.as_str());
                }
                if let Some(v) = &value {
                    r = r.payload(v.as_slice());
                }
                producer.send(r).map_err(|(e, _)| e).unwrap();
                expected.push((
                    0,
                    i64::from(i),
                    ts,
                    key.map(String::into_bytes),
                    value,
                    headers,
                ));
            }
            producer.flush(Duration::from_secs(30)).unwrap();
            expected
        })
        .await
        .unwrap();
        let read = read_all(&cluster, &topic).await;
        let got: Vec<Seen> = read[&0]
            .iter()
            .map(|r| {
                (
                    r.partition,
                    r.offset,
                    r.timestamp,
                    r.key.as_ref().map(|b| b.to_vec()),
                    r.value.as_ref().map(|b| b.to_vec()),
                    r.headers
                        .iter()
                        .map(|(k, v)| (k.clone(), v.as_ref().map(|b| b.to_vec())))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(got, expected, "{codec}");
        let _ = TopicPartition::new(&topic, 0);
    }
}
