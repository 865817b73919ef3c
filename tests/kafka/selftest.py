#!/usr/bin/env python3
"""Python half of selftest.sh (needs confluent-kafka).

selftest.py KAFKA_SH DIR NODE TOPIC SHARE_TOPIC

1. Produces with acks=all and idempotence around a SIGKILL of node NODE (`kafka.sh kill`) and its
   `kafka.sh restart`, and checks that every acknowledged record can be consumed afterwards (and,
   with several brokers, also while the node is down).
2. If this confluent-kafka has a ShareConsumer (KIP-932), two members of one share group read
   SHARE_TOPIC (which must exist: share groups start at the latest offset); together they must
   get every record (how the two split them is printed).
"""
import subprocess
import sys
import threading
import time
import uuid

import confluent_kafka
from confluent_kafka import Consumer, Producer

kafka_sh, cluster_dir, node, topic, share_topic = sys.argv[1:6]
with open(f"{cluster_dir}/bootstrap") as f:
    bootstrap = f.read().strip()
brokers = len(bootstrap.split(","))


def kafka(*args):
    started = time.time()
    subprocess.run([kafka_sh, *args], check=True, stdout=subprocess.DEVNULL)
    return time.time() - started


def consume_all(expect, timeout=90):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"selftest-{uuid.uuid4()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    seen, deadline = set(), time.time() + timeout
    while not expect <= seen and time.time() < deadline:
        for m in c.consume(500, 1.0):
            if not m.error():
                seen.add(int(m.value()))
    c.close()
    return seen


def durability():
    acked, failed, seq = set(), [], 0

    def on_delivery(err, msg):
        (acked.add(int(msg.value())) if err is None else failed.append(str(err)))

    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "message.timeout.ms": 120000})

    def produce(n, pause=0.0):
        nonlocal seq
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, key=str(seq % 97).encode(), value=str(seq).encode(),
                              on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.1)
            seq += 1
            p.poll(0)
            if pause:
                time.sleep(pause)

    produce(2000)
    p.flush(60)
    produce(500, pause=0.001)  # in flight while the node dies
    print(f"  kill node {node}: {kafka('kill', cluster_dir, node):.1f}s")
    produce(2500, pause=0.0005)
    ok = True
    if brokers > 1:
        p.flush(120)
        missing = set(acked) - consume_all(set(acked))
        print(f"  node {node} down: produced {seq}, acked {len(acked)}, acked but not consumed {len(missing)}")
        ok &= not missing
    print(f"  restart node {node}: {kafka('restart', cluster_dir, node):.1f}s")
    produce(1000)
    p.flush(120)
    missing = set(acked) - consume_all(set(acked))
    print(f"  after restart: produced {seq}, acked {len(acked)}, failed {len(failed)}, "
          f"acked but not consumed {len(missing)}")
    return ok and not missing and not failed and len(acked) == seq


def share_group(records=2000):
    ShareConsumer = getattr(confluent_kafka, "ShareConsumer", None)
    if ShareConsumer is None:
        print(f"  confluent-kafka {confluent_kafka.version()[0]} has no ShareConsumer; skipped")
        return True
    group, got, stop = f"selftest-share-{uuid.uuid4()}", ([], []), threading.Event()

    def member(i):
        c = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
        c.subscribe([share_topic])
        while not stop.is_set():
            for m in c.poll(0.5) or []:
                if not m.error():
                    got[i].append(int(m.value()))
        c.close()

    threads = [threading.Thread(target=member, args=(i,)) for i in (0, 1)]
    for t in threads:
        t.start()
    time.sleep(8)  # both members join before anything is produced (latest offset)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(records):
        p.produce(share_topic, value=str(i).encode())
        p.poll(0)
    p.flush(30)
    deadline = time.time() + 60
    while len(set(got[0]) | set(got[1])) < records and time.time() < deadline:
        time.sleep(0.2)
    stop.set()
    for t in threads:
        t.join()
    a, b = set(got[0]), set(got[1])
    print(f"  share group: member 0 got {len(a)}, member 1 got {len(b)}, "
          f"distinct {len(a | b)} of {records}, overlap {len(a & b)}")
    return len(a | b) == records


ok = durability()
ok = share_group() and ok
sys.exit(0 if ok else 1)
