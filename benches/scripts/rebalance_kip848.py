#!/usr/bin/env python3
"""Rebalance time of a consumer group, KIP-848's (group.protocol=consumer, the default) or the
classic protocol's (--protocol classic), when one of N members leaves, against any broker: N librdkafka consumers (confluent-kafka), each polling in a thread of
its own, subscribe to a topic of P partitions; once every partition is assigned (each member
P/N of them), one member closes (a leave heartbeat, epoch -1); the rebalance time is from the
close until the other N-1 members' assignments cover every partition again (each seen after a
poll). The member is then replaced by a new one and the group allowed to settle, REPS times.
Also timed: the first assignment, from the moment all N members have subscribed until their
assignments first cover every partition, evenly.

    rebalance_kip848.py BOOTSTRAP TOPIC [--members 10] [--partitions 20] [--reps 5]
                        [--protocol consumer|classic]

Prints one JSON line: the times in ms and their median, and the first assignment's.
"""
import argparse
import json
import statistics
import threading
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic


class Member:
    def __init__(self, bootstrap, group, topic, protocol):
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "enable.auto.commit": False,
        })
        self.consumer.subscribe([topic])
        self.assigned = set()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop.is_set():
            self.consumer.poll(0.05)
            self.assigned = {tp.partition for tp in self.consumer.assignment()}
        self.consumer.close()

    def close(self):
        self.stop.set()
        self.thread.join()


def wait_covered(members, partitions, even, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sets = [m.assigned for m in members]
        union = set().union(*sets)
        disjoint = sum(len(s) for s in sets) == len(union)
        balanced = not even or max(len(s) for s in sets) - min(len(s) for s in sets) <= 1
        if len(union) == partitions and disjoint and balanced:
            return True
        time.sleep(0.005)
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bootstrap")
    ap.add_argument("topic")
    ap.add_argument("--members", type=int, default=10)
    ap.add_argument("--partitions", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--protocol", choices=["consumer", "classic"], default="consumer")
    args = ap.parse_args()
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for f in admin.create_topics([NewTopic(args.topic, args.partitions, 1)]).values():
        f.result()
    group = "rebalance-" + uuid.uuid4().hex[:8]
    join = lambda: Member(args.bootstrap, group, args.topic, args.protocol)
    members = [join() for _ in range(args.members)]
    started = time.monotonic()
    if not wait_covered(members, args.partitions, even=True, timeout=300):
        raise SystemExit("the group never settled")
    first = (time.monotonic() - started) * 1000
    times = []
    for _ in range(args.reps):
        if not wait_covered(members, args.partitions, even=True):
            raise SystemExit("the group never settled")
        time.sleep(1)
        leaving = members.pop()
        start = time.monotonic()
        # Closed on the side: the clock stops when the others hold everything, not when the
        # leaver's client is done closing.
        closing = threading.Thread(target=leaving.close)
        closing.start()
        if not wait_covered(members, args.partitions, even=False):
            raise SystemExit("the partitions of the member that left were never reassigned")
        times.append((time.monotonic() - start) * 1000)
        closing.join()
        members.append(join())
    for m in members:
        m.close()
    print(json.dumps({"protocol": args.protocol, "members": args.members,
                      "partitions": args.partitions, "first_assignment_ms": round(first),
                      "times_ms": [round(t) for t in times],
                      "median_ms": round(statistics.median(times))}))


if __name__ == "__main__":
    main()
