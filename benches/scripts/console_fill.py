"""Fills a broker for the console benchmark (benches/scripts/console_pages.sh): TOPICS topics
t0.. of PARTITIONS partitions each, one 100-byte record in every partition, and GROUPS groups
g0.. each committing offset 0 on the 10 first partitions of one topic (so every group has lag).

usage: python3 console_fill.py ADDR TOPICS PARTITIONS GROUPS
"""

import sys

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

addr, topics, partitions, groups = sys.argv[1], *map(int, sys.argv[2:5])
admin = AdminClient({"bootstrap.servers": addr})
names = [f"t{i}" for i in range(topics)]
for name, future in admin.create_topics(
    [NewTopic(n, partitions, 1) for n in names], operation_timeout=60
).items():
    future.result()
producer = Producer({"bootstrap.servers": addr, "linger.ms": 20})
for name in names:
    for p in range(partitions):
        producer.produce(name, b"x" * 100, partition=p)
    producer.poll(0)
producer.flush(60)
futures = []
for g in range(groups):
    topic = names[g % topics]
    offsets = [TopicPartition(topic, p, 0) for p in range(min(10, partitions))]
    futures += admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(f"g{g}", offsets)]
    ).values()
for future in futures:
    future.result()
print(f"{topics * partitions} partitions, {groups} groups")
