"""Produce keyed records with confluent-kafka (librdkafka), idempotent, then read them back.

Usage: confluent_roundtrip.py HOST:PORT TOPIC COUNT
"""
import sys

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition, OFFSET_BEGINNING, libversion, version

addr, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
print(f"confluent-kafka {version()[0]}, librdkafka {libversion()[0]}")

errors = []


def on_delivery(err, msg):
    if err is not None:
        errors.append(err)


producer = Producer({"bootstrap.servers": addr, "enable.idempotence": True, "linger.ms": 5})
for i in range(count):
    while True:
        try:
            producer.produce(topic, key=f"key-{i % 50}", value=f"value-{i}", on_delivery=on_delivery)
            break
        except BufferError:
            producer.poll(0.01)
    producer.poll(0)
left = producer.flush(30)
assert left == 0, f"{left} messages not delivered"
assert not errors, errors[:5]

partitions = producer.list_topics(topic, timeout=10).topics[topic].partitions
consumer = Consumer({
    "bootstrap.servers": addr,
    "group.id": "confluent-roundtrip",
    "enable.auto.commit": False,
    "enable.partition.eof": True,
})
consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
seen, at_end, last = {}, set(), {}
while len(at_end) < len(partitions):
    msg = consumer.poll(5)
    assert msg is not None, "no message and no EOF within 5 s"
    if msg.error():
        assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
        at_end.add(msg.partition())
        continue
    at_end.discard(msg.partition())
    key, value = msg.key().decode(), msg.value().decode()
    i = int(value.split("-")[1])
    assert value not in seen, f"{value} twice"
    seen[value] = msg.offset()
    assert last.get(key, -1) < i, f"{key}: {i} after {last.get(key)}"
    last[key] = i
consumer.close()
assert len(seen) == count, f"read {len(seen)} of {count}"
print(f"OK {len(seen)}")
