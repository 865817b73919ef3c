#!/usr/bin/env python3
"""Seconds from this script's start until a real client (librdkafka, through confluent-kafka)
has fetched a first record of TOPIC (any of its PARTITIONS, from offset 0) from ADDR. Start it right before starting the
broker: the consumer retries its connection every 10-50 ms, so the figure is the broker's time
to serve a fetch after a restart, as a client sees it, within ~50 ms.

Usage: first_fetch.py ADDR TOPIC PARTITIONS [TIMEOUT_S]
Prints one line: first_fetch_s=SECONDS (exit 1 and no line on timeout)."""
import sys
import time

start = time.monotonic()
from confluent_kafka import Consumer, TopicPartition  # noqa: E402 (timed from before import)

addr, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 300.0
consumer = Consumer({
    "bootstrap.servers": addr,
    "group.id": "first-fetch",
    "enable.auto.commit": False,
    "reconnect.backoff.ms": 10,
    "reconnect.backoff.max.ms": 50,
    "retry.backoff.ms": 10,
    "retry.backoff.max.ms": 50,
    "fetch.error.backoff.ms": 10,
    "topic.metadata.refresh.interval.ms": 100,
    "socket.connection.setup.timeout.ms": 1000,
    "log_level": 0,
})
consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
while time.monotonic() - start < timeout:
    message = consumer.poll(0.05)
    if message is not None and message.error() is None:
        print(f"first_fetch_s={time.monotonic() - start:.3f}")
        consumer.close()
        sys.exit(0)
sys.exit(f"no record of {topic} from {addr} within {timeout} s")
