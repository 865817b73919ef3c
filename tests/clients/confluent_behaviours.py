"""Kafka behaviours librdkafka's admin API and consumer rely on, with confluent-kafka, for
tests/e2e/kafka_behaviours.rs.

Usage: confluent_behaviours.py HOST:PORT COMMAND [ARGS...]

  create-assigned TOPIC ASSIGNMENT-JSON   CreateTopics with a manual replica assignment
                                          (a list of broker-id lists, one per partition)
  alter-list TOPIC OP VALUE               IncrementalAlterConfigs of cleanup.policy
                                          (OP: APPEND or SUBTRACT)
  consume-commit TOPIC GROUP COUNT        a group member reads COUNT records, commits, leaves;
                                          then the committed offsets as the client sees them
  list-groups                             ListConsumerGroups and DescribeConsumerGroups

Prints one JSON line: the outcome, with Kafka's error names where the client reported one.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

addr, command, args = sys.argv[1], sys.argv[2], sys.argv[3:]
TIMEOUT = 15


def error_name(e):
    if isinstance(e, KafkaException):
        e = e.args[0]
    if isinstance(e, KafkaError):
        return e.name()
    return f"{type(e).__name__}: {e}"


def error_of(future):
    """The outcome of an admin call: {"error": Kafka's error name or None, "message": ...}."""
    try:
        future.result(timeout=TIMEOUT)
        return {"error": None}
    except Exception as e:  # the client's error, reported by name
        return {"error": error_name(e), "message": str(e)}


admin = AdminClient({"bootstrap.servers": addr})

if command == "create-assigned":
    topic, assignment = args[0], json.loads(args[1])
    futures = admin.create_topics(
        # librdkafka sends num_partitions and replication_factor -1 with an assignment.
        [NewTopic(topic, len(assignment), replica_assignment=assignment)],
        request_timeout=TIMEOUT,
    )
    out = error_of(futures[topic])
    if out["error"] is None:
        metadata = admin.list_topics(topic, timeout=TIMEOUT).topics[topic]
        out["partitions"] = {
            str(p.id): p.replicas for p in metadata.partitions.values()
        }
elif command == "alter-list":
    topic, op, value = args
    resource = ConfigResource(
        ResourceType.TOPIC,
        topic,
        incremental_configs=[
            ConfigEntry(
                "cleanup.policy",
                value,
                incremental_operation=getattr(AlterConfigOpType, op),
            )
        ],
    )
    futures = admin.incremental_alter_configs([resource])
    out = error_of(futures[resource])
elif command == "consume-commit":
    topic, group, count = args[0], args[1], int(args[2])
    consumer = Consumer(
        {
            "bootstrap.servers": addr,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen, deadline = 0, time.time() + 30
    while seen < count and time.time() < deadline:
        message = consumer.poll(1.0)
        if message is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    committed = consumer.committed(
        [TopicPartition(topic, p) for p in range(3)], timeout=TIMEOUT
    )
    consumer.close()
    out = {
        "consumed": seen,
        "committed": [
            {"partition": tp.partition, "offset": tp.offset, "leader_epoch": tp.leader_epoch}
            for tp in committed
        ],
    }
elif command == "list-groups":
    listed = admin.list_consumer_groups(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    groups = sorted(g.group_id for g in listed.valid)
    described = admin.describe_consumer_groups(groups, request_timeout=TIMEOUT)
    out = {
        "listed": {
            g.group_id: {"simple": g.is_simple_consumer_group, "state": g.state.name}
            for g in listed.valid
        },
        "described": {
            group: {
                "simple": d.is_simple_consumer_group,
                "state": d.state.name,
            }
            for group, f in described.items()
            for d in [f.result(timeout=TIMEOUT)]
        },
    }
else:
    raise SystemExit(f"unknown command {command}")

print(json.dumps(out))
