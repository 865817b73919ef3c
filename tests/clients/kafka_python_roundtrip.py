"""Produce and read back with kafka-python, letting it infer the broker version (2.0.x probes
ApiVersions and picks request versions from what the broker advertises).

Usage: kafka_python_roundtrip.py HOST:PORT TOPIC COUNT
"""
import sys
import time

import kafka
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

addr, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(f"kafka-python {kafka.__version__}")

producer = KafkaProducer(bootstrap_servers=addr, acks="all", linger_ms=5)
print(f"inferred broker version {producer.config['api_version']}")
futures = [
    producer.send(topic, key=f"key-{i % 50}".encode(), value=f"value-{i}".encode())
    for i in range(count)
]
producer.flush(30)
offsets = [f.get(timeout=30) for f in futures]
assert len(offsets) == count
producer.close()

consumer = KafkaConsumer(
    bootstrap_servers=addr,
    group_id=None,
    enable_auto_commit=False,
    auto_offset_reset="earliest",
)
partitions = None
deadline = time.time() + 10
while not partitions and time.time() < deadline:
    partitions = consumer.partitions_for_topic(topic)
assert partitions, "no partitions"
tps = [TopicPartition(topic, p) for p in sorted(partitions)]
consumer.assign(tps)
consumer.seek_to_beginning(*tps)
seen, last = set(), {}
deadline = time.time() + 60
while len(seen) < count:
    assert time.time() < deadline, f"read {len(seen)} of {count} in 60 s"
    for tp, messages in consumer.poll(timeout_ms=1000).items():
        for msg in messages:
            key, value = msg.key.decode(), msg.value.decode()
            i = int(value.split("-")[1])
            assert value not in seen, f"{value} twice"
            seen.add(value)
            assert last.get(key, -1) < i, f"{key}: {i} after {last.get(key)}"
            last[key] = i
consumer.close()
print(f"OK {len(seen)}")
