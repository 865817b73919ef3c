"""One Kafka client action with confluent-kafka (librdkafka), for tests/e2e/acls.rs.

Usage: confluent_acls.py HOST:PORT COMMAND JSON-ARGUMENT

Prints one JSON line: the outcome, with Kafka's error names (TOPIC_AUTHORIZATION_FAILED ...)
where the client reported an error. ACL bindings and filters are lists
[resource type, name, pattern type, principal, host, operation, permission] of Kafka's names
(`BROKER` is librdkafka's name of the CLUSTER resource type); a filter's null fields are None.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

addr, command, argument = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
TIMEOUT = 15


def error_name(e):
    if isinstance(e, KafkaException):
        e = e.args[0]
    if isinstance(e, KafkaError):
        return e.name()
    return f"{type(e).__name__}: {e}"


_admin = []


def admin():
    """One client for the process: a client dropped while its futures wait fails them."""
    if not _admin:
        _admin.append(AdminClient({"bootstrap.servers": addr}))
    return _admin[0]


def binding_args(fields):
    rt, name, pattern, principal, host, op, perm = fields
    return (ResourceType[rt], name, ResourcePatternType[pattern], principal, host,
            AclOperation[op], AclPermissionType[perm])


def listed(binding):
    return [binding.restype.name, binding.name, binding.resource_pattern_type.name,
            binding.principal, binding.host, binding.operation.name, binding.permission_type.name]


def create(bindings):
    futures = admin().create_acls([AclBinding(*binding_args(b)) for b in bindings],
                                  request_timeout=TIMEOUT)
    out = []
    for future in futures.values():
        try:
            future.result()
            out.append("OK")
        except Exception as e:
            out.append(error_name(e))
    return out


def describe(fields):
    try:
        found = admin().describe_acls(AclBindingFilter(*binding_args(fields)),
                                      request_timeout=TIMEOUT).result()
    except Exception as e:
        return {"error": error_name(e)}
    return {"acls": sorted(listed(b) for b in found)}


def delete(filters):
    futures = admin().delete_acls([AclBindingFilter(*binding_args(f)) for f in filters],
                                  request_timeout=TIMEOUT)
    out = []
    for future in futures.values():
        try:
            out.append(sorted(listed(b) for b in future.result()))
        except Exception as e:
            out.append(error_name(e))
    return out


def create_topic(args):
    futures = admin().create_topics([NewTopic(args["topic"], args.get("partitions", 1))],
                                    request_timeout=TIMEOUT)
    try:
        futures[args["topic"]].result()
        return "OK"
    except Exception as e:
        return error_name(e)


def produce(args):
    errors = []
    delivered = []
    idempotent = args.get("idempotent", False)
    config = {
        "bootstrap.servers": addr,
        "enable.idempotence": idempotent,
        "message.timeout.ms": args.get("timeout_ms", 10000),
        "error_cb": lambda e: errors.append(e),
    }
    producer = Producer(config)

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            delivered.append(msg.offset())

    try:
        for i in range(args["count"]):
            producer.produce(args["topic"], value=f"value-{i}", on_delivery=on_delivery)
        producer.flush(TIMEOUT)
        # Deliveries may fail (the topic refused) before the producer id is: wait for the
        # idempotent producer's fatal error, if it is to come.
        deadline = time.time() + 3
        while idempotent and len(delivered) < args["count"] and time.time() < deadline:
            if any(e.fatal() for e in errors):
                break
            producer.poll(0.1)
    except KafkaException as e:
        errors.insert(0, e.args[0])
    fatal = [e for e in errors if e.fatal()]
    if fatal:
        return {"error": fatal[0].name(), "fatal": True, "delivered": len(delivered)}
    if errors:
        return {"error": errors[0].name(), "delivered": len(delivered)}
    return {"delivered": len(delivered)}


def consume(args):
    consumer = Consumer({
        "bootstrap.servers": addr,
        "group.id": args["group"],
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    consumer.subscribe([args["topic"]])
    got = 0
    deadline = time.time() + args.get("timeout", TIMEOUT)
    try:
        while got < args["count"] and time.time() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return {"error": msg.error().name(), "consumed": got}
            got += 1
        if got:
            consumer.commit(asynchronous=False)
        return {"consumed": got}
    except Exception as e:
        return {"error": error_name(e), "consumed": got}
    finally:
        consumer.close()


def topics(args):
    try:
        metadata = admin().list_topics(topic=args.get("topic"), timeout=TIMEOUT)
    except Exception as e:
        return {"error": error_name(e)}
    return {
        "topics": sorted(t for t, m in metadata.topics.items() if m.error is None),
        "errors": {t: m.error.name() for t, m in metadata.topics.items() if m.error is not None},
    }


def commit(args):
    consumer = Consumer({"bootstrap.servers": addr, "group.id": args["group"]})
    offsets = [TopicPartition(t, p, o) for t, p, o in args["offsets"]]
    try:
        done = consumer.commit(offsets=offsets, asynchronous=False)
        return {f"{tp.topic}-{tp.partition}": tp.error.name() if tp.error else "OK" for tp in done}
    except Exception as e:
        return {"error": error_name(e)}
    finally:
        consumer.close()


def committed(args):
    consumer = Consumer({"bootstrap.servers": addr, "group.id": args["group"]})
    partitions = [TopicPartition(t, p) for t, p in args["partitions"]]
    try:
        found = consumer.committed(partitions, timeout=TIMEOUT)
        return {f"{tp.topic}-{tp.partition}": tp.error.name() if tp.error else tp.offset
                for tp in found}
    except Exception as e:
        return {"error": error_name(e)}
    finally:
        consumer.close()


def group_offsets(args):
    from confluent_kafka import ConsumerGroupTopicPartitions
    futures = admin().list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(args["group"])], request_timeout=TIMEOUT)
    try:
        result = futures[args["group"]].result()
    except Exception as e:
        return {"error": error_name(e)}
    return {"partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in result.topic_partitions)}


def list_offsets(args):
    tp = TopicPartition(args["topic"], 0)
    try:
        result = admin().list_offsets({tp: OffsetSpec.latest()}, request_timeout=TIMEOUT)[tp].result()
        return {"offset": result.offset}
    except Exception as e:
        return {"error": error_name(e)}


def describe_configs(args):
    resource = ConfigResource(args.get("type", "TOPIC"), args["name"])
    try:
        configs = admin().describe_configs([resource], request_timeout=TIMEOUT)[resource].result()
        return {"configs": len(configs)}
    except Exception as e:
        return {"error": error_name(e)}


def groups(_args):
    try:
        result = admin().list_consumer_groups(request_timeout=TIMEOUT).result()
    except Exception as e:
        return {"error": error_name(e)}
    return {"groups": sorted(g.group_id for g in result.valid)}


def group_operations(args):
    futures = admin().describe_consumer_groups([args["group"]], include_authorized_operations=True,
                                               request_timeout=TIMEOUT)
    try:
        group = futures[args["group"]].result()
    except Exception as e:
        return {"error": error_name(e)}
    ops = group.authorized_operations
    return {"operations": None if ops is None else sorted(op.name for op in ops)}


def cluster_operations(_args):
    try:
        cluster = admin().describe_cluster(include_authorized_operations=True,
                                           request_timeout=TIMEOUT).result()
    except Exception as e:
        return {"error": error_name(e)}
    ops = cluster.authorized_operations
    return {"operations": None if ops is None else sorted(op.name for op in ops)}


COMMANDS = {
    "create": create,
    "describe": describe,
    "delete": delete,
    "create_topic": create_topic,
    "produce": produce,
    "consume": consume,
    "topics": topics,
    "commit": commit,
    "committed": committed,
    "group_offsets": group_offsets,
    "list_offsets": list_offsets,
    "describe_configs": describe_configs,
    "groups": groups,
    "group_operations": group_operations,
    "cluster_operations": cluster_operations,
}

print(json.dumps(COMMANDS[command](argument)))
