"""Transactions with confluent-kafka (librdkafka), for tests/e2e/external_clients.rs; runs
unchanged against Apache Kafka.

Usage: confluent_transactions.py HOST:PORT PREFIX

Topics PREFIX-in and PREFIX-out (2 partitions each) are created; INPUT records are written to
PREFIX-in without a transaction. Then:
  1. a transactional producer commits committed-1-0..4, aborts aborted-0..4 (flushed first,
     so they are in the log) and commits committed-2-0..4 to PREFIX-out;
  2. consume-transform-produce: a read_committed consumer of group PREFIX-group reads the
     input ten records at a time; a transactional producer writes ctp-<value> for each and
     commits the consumer's offsets with send_offsets_to_transaction; its second transaction
     is aborted (flushed first) and the consumer sought back, so those records are written
     again;
  3. a zombie: producer A sends zombie-0 in an open transaction; producer B of the same
     transactional.id runs init_transactions (fencing A, aborting its transaction) and commits
     fresh-0; A's commit_transaction must fail with _FENCED;
  4. PREFIX-out read from the beginning to its end, read_committed and read_uncommitted.
Checks that read_committed sees exactly the committed records (each input record transformed
once), read_uncommitted the aborted too, and the group's committed offsets are the input's end.
Prints one JSON line with what it saw, then "OK transactions"; exits 1 on a failed check.
"""
import json
import sys
import time
from collections import Counter

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

addr, prefix = sys.argv[1], sys.argv[2]
INPUT = 50
TIMEOUT = 30
source, sink, group = f"{prefix}-in", f"{prefix}-out", f"{prefix}-group"


def producer(txn_id):
    p = Producer({"bootstrap.servers": addr, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(TIMEOUT)
    return p


def consumer(isolation, group_id=None):
    conf = {
        "bootstrap.servers": addr,
        "group.id": group_id or f"{prefix}-reader-{isolation}",
        "isolation.level": isolation,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    return Consumer(conf)


admin = AdminClient({"bootstrap.servers": addr})
for topic, future in admin.create_topics(
    [NewTopic(t, 2, replication_factor=1) for t in (source, sink)], request_timeout=TIMEOUT
).items():
    future.result(timeout=TIMEOUT)
plain = Producer({"bootstrap.servers": addr})
for i in range(INPUT):
    plain.produce(source, key=f"k{i}", value=f"in-{i}", partition=i % 2)
assert plain.flush(TIMEOUT) == 0, "input delivered"

# 1. Commit, abort, commit.
p = producer(f"{prefix}-plain")
p.begin_transaction()
for i in range(5):
    p.produce(sink, key=f"k{i}", value=f"committed-1-{i}")
p.commit_transaction(TIMEOUT)
p.begin_transaction()
for i in range(5):
    p.produce(sink, key=f"k{i}", value=f"aborted-{i}")
p.flush(TIMEOUT)
p.abort_transaction(TIMEOUT)
p.begin_transaction()
for i in range(5):
    p.produce(sink, key=f"k{i}", value=f"committed-2-{i}")
p.commit_transaction(TIMEOUT)

# 2. Consume-transform-produce, offsets in the transactions, the second one aborted and redone.
c = consumer("read_committed", group)
c.subscribe([source])
p = producer(f"{prefix}-ctp")
processed, transactions, redone = 0, 0, 0
deadline = time.monotonic() + 60
while processed < INPUT:
    assert time.monotonic() < deadline, f"consume-transform-produce: {processed} of {INPUT}"
    msgs = [m for m in c.consume(num_messages=10, timeout=0.5) if m.error() is None]
    if not msgs:
        continue
    p.begin_transaction()
    firsts, nexts = {}, {}
    for m in msgs:
        p.produce(sink, key=m.key(), value=b"ctp-" + m.value())
        firsts.setdefault(m.partition(), m.offset())
        nexts[m.partition()] = m.offset() + 1
    if transactions == 1 and not redone:
        p.flush(TIMEOUT)
        p.abort_transaction(TIMEOUT)
        redone = len(msgs)
        for partition, offset in firsts.items():
            c.seek(TopicPartition(source, partition, offset))
        continue
    p.send_offsets_to_transaction(
        [TopicPartition(source, part, off) for part, off in nexts.items()],
        c.consumer_group_metadata(),
        TIMEOUT,
    )
    p.commit_transaction(TIMEOUT)
    transactions += 1
    processed += len(msgs)
c.close()

# 3. A zombie fenced by a second init_transactions of its transactional.id.
zombie = producer(f"{prefix}-zombie")
zombie.begin_transaction()
zombie.produce(sink, key="z", value="zombie-0")
zombie.flush(TIMEOUT)
fresh = producer(f"{prefix}-zombie")
fresh.begin_transaction()
fresh.produce(sink, key="z", value="fresh-0")
fresh.commit_transaction(TIMEOUT)
try:
    zombie.commit_transaction(TIMEOUT)
    fenced = None
except KafkaException as e:
    fenced = e.args[0].name()


# 4. The output, both ways.
def read_all(isolation):
    r = consumer(isolation)
    r.assign([TopicPartition(sink, part, 0) for part in range(2)])
    got, at_end = {0: [], 1: []}, set()
    deadline = time.monotonic() + 60
    while len(at_end) < 2:
        assert time.monotonic() < deadline, f"{isolation}: read to the end of {sink}"
        m = r.poll(0.5)
        if m is None:
            continue
        if m.error():
            assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
            at_end.add(m.partition())
            continue
        got[m.partition()].append(m.value().decode())
    r.close()
    return got[0] + got[1]


read_committed, read_uncommitted = read_all("read_committed"), read_all("read_uncommitted")

check = consumer("read_committed", group)
parts = [TopicPartition(source, part) for part in range(2)]
committed = {tp.partition: tp.offset for tp in check.committed(parts, timeout=TIMEOUT)}
ends = {part: check.get_watermark_offsets(TopicPartition(source, part), timeout=TIMEOUT)[1]
        for part in range(2)}
check.close()

print(json.dumps({
    "fenced": fenced,
    "transactions": transactions,
    "redone": redone,
    "read_committed": read_committed,
    "read_uncommitted": read_uncommitted,
    "committed_offsets": committed,
    "input_ends": ends,
}))

want = ([f"committed-1-{i}" for i in range(5)] + [f"committed-2-{i}" for i in range(5)]
        + [f"ctp-in-{i}" for i in range(INPUT)] + ["fresh-0"])
assert fenced == "_FENCED", f"the zombie's commit: {fenced}"
assert transactions >= 2 and redone > 0, (transactions, redone)
assert Counter(read_committed) == Counter(want), "read_committed: the committed records, once"
aborted = [f"aborted-{i}" for i in range(5)] + ["zombie-0"]
got = Counter(read_uncommitted)
ctp = sum(n for v, n in got.items() if v.startswith("ctp-"))
assert ctp == INPUT + redone, f"read_uncommitted: {ctp} transformed records"
assert Counter({v: n for v, n in got.items() if not v.startswith("ctp-")}) == Counter(
    [v for v in want if not v.startswith("ctp-")] + aborted
), "read_uncommitted: the committed and the aborted records"
assert all(got[v] >= 1 for v in want), "read_uncommitted has every committed record"
assert committed == ends, f"the group's committed offsets {committed}, the input's end {ends}"
print("OK transactions")
