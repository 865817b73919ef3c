#!/usr/bin/env python3
"""A share consumer (KIP-932) driven by command-line options, for lograil's compatibility tests.

Uses confluent-kafka's ShareConsumer (librdkafka's share consumer, a preview API in
confluent-kafka 2.16) unmodified. Same options and the same output as the Java ShareWorker
(tests/share/java): one JSON object per line on stdout, each with "ev", "w" (label) and "ts"
(epoch ms). librdkafka's own logging (--debug-protocol) goes to stderr.

  start {client, client_version, librdkafka, client_id, group, topics, mode}
  record {topic, partition, offset, delivery_count, key, value}
  ack {topic, partition, offset, type}          explicit mode: the acknowledgement made
  commit {topic, partition, offsets, error}     acknowledgement commit callback result
  commit_sync {topic, partition, error}         per-partition result of commit_sync
  error {where, error}
  crash {reason, held} (crash-after) / crash {reason, topic, partition, offset,
    delivery_count} (crash-on) / hang {reason, held}
  end {reason, received}                        before close
  closed {ms} / close_error {error}

Exit status: 0 after a clean close, 1 if close failed, 2 on bad options or a consumer that
cannot be created, 3 for a simulated crash (--crash-on, --crash-after).
"""
import argparse
import json
import os
import sys
import threading
import time

import confluent_kafka
from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

_out_lock = threading.Lock()


def now_ms():
    return int(time.time() * 1000)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--topics", required=True, help="comma-separated")
    ap.add_argument("--client-id", default=f"share-worker-py-{os.getpid()}")
    ap.add_argument("--label", help='written into every line as "w" (default: the client id)')
    ap.add_argument("--mode", choices=["implicit", "explicit"], default="implicit",
                    help="share.acknowledgement.mode")
    ap.add_argument("--max-records", type=int, default=0,
                    help="stop after receiving N records, at the end of a batch (0 = no limit)")
    ap.add_argument("--idle-ms", type=int, default=5000,
                    help="stop when nothing arrived for T ms since the last record (0 = never)")
    ap.add_argument("--start-idle-ms", type=int, default=15000,
                    help="stop when nothing at all arrived T ms after the start (0 = never); joining a "
                         "share group takes up to a heartbeat interval (5 s by default) before the "
                         "first assignment")
    ap.add_argument("--timeout-ms", type=int, default=60000)
    ap.add_argument("--poll-ms", type=int, default=500)
    ap.add_argument("--max-poll-records", help="max.poll.records")
    ap.add_argument("--process-ms", type=int, default=0, help="sleep T ms per record")
    ap.add_argument("--commit", choices=["poll", "sync", "async"], default="poll",
                    help="explicit mode: send acks with the next poll, or commit_sync/commit_async per batch")
    ap.add_argument("--reject-prefix", help="explicit: REJECT records whose value starts with P")
    ap.add_argument("--release-prefix",
                    help="explicit: RELEASE records whose value starts with P while delivery count <= --release-times")
    ap.add_argument("--release-times", type=int, default=1)
    ap.add_argument("--crash-on", help="a value starting with P: ack/commit the rest of the batch, then os._exit(3)")
    ap.add_argument("--crash-after", type=int, default=0,
                    help="os._exit(3) once the batch holding the N-th record is printed, acknowledging none of it")
    ap.add_argument("--hang-after", type=int, default=0,
                    help="once the batch holding the N-th record is printed, stop polling and sleep until killed")
    ap.add_argument("--prop", action="append", default=[], help="K=V consumer property (repeatable)")
    ap.add_argument("--debug-protocol", action="store_true", help="librdkafka debug=protocol,... to stderr")
    a = ap.parse_args(argv)
    if a.mode == "implicit" and (a.reject_prefix or a.release_prefix):
        ap.error("--reject-prefix/--release-prefix need --mode explicit")
    return a


class Worker:
    def __init__(self, a):
        self.a = a
        self.label = a.label or a.client_id
        self.received = 0

    def emit(self, ev, **kv):
        line = json.dumps({"ev": ev, "w": self.label, "ts": now_ms(), **kv}, separators=(",", ":"))
        with _out_lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def on_commit(self, offsets, exc):
        for tp, offs in offsets.items():
            self.emit("commit", topic=tp.topic, partition=tp.partition, offsets=sorted(offs),
                      error=None if exc is None else str(exc))

    def crash(self, **kv):
        self.emit("crash", **kv)
        sys.stdout.flush()
        os._exit(3)

    def decide(self, m, v):
        a = self.a
        if a.reject_prefix is not None and v.startswith(a.reject_prefix):
            return AcknowledgeType.REJECT
        if a.release_prefix is not None and v.startswith(a.release_prefix) \
                and (m.delivery_count() or 1) <= a.release_times:
            return AcknowledgeType.RELEASE
        return AcknowledgeType.ACCEPT

    def commit_sync(self, c):
        try:
            res = c.commit_sync(30)
            for tp, err in (res or {}).items():
                self.emit("commit_sync", topic=tp.topic, partition=tp.partition,
                          error=None if err is None else str(err))
        except Exception as e:  # KafkaException, IllegalStateException
            self.emit("error", where="commit_sync", error=f"{type(e).__name__}: {e}")

    def run(self):
        a = self.a
        conf = {"bootstrap.servers": a.bootstrap, "group.id": a.group, "client.id": a.client_id,
                "share.acknowledgement.mode": a.mode}
        if a.max_poll_records:
            conf["max.poll.records"] = a.max_poll_records
        if a.debug_protocol:
            conf["debug"] = "protocol,cgrp,fetch"
        for kv in a.prop:
            k, _, v = kv.partition("=")
            conf[k] = v
        topics = a.topics.split(",")
        self.emit("start", client="python", client_version=confluent_kafka.version(),
                  librdkafka=confluent_kafka.libversion()[0], client_id=a.client_id, group=a.group,
                  topics=topics, mode=a.mode)
        try:
            c = ShareConsumer(conf)
            c.set_acknowledgement_commit_callback(self.on_commit)
            c.subscribe(topics)
        except Exception as e:
            self.emit("error", where="create", error=f"{type(e).__name__}: {e}")
            return 2

        explicit = a.mode == "explicit"
        start = last = now_ms()
        errors = 0
        while True:
            t = now_ms()
            if t - start >= a.timeout_ms:
                reason = "timeout"
                break
            if self.received == 0 and a.start_idle_ms > 0 and t - start >= a.start_idle_ms:
                reason = "idle"
                break
            if self.received > 0 and a.idle_ms > 0 and t - last >= a.idle_ms:
                reason = "idle"
                break
            try:
                batch = c.poll(a.poll_ms / 1000.0)
                errors = 0
            except Exception as e:
                self.emit("error", where="poll", error=f"{type(e).__name__}: {e}")
                errors += 1
                if errors >= 20:
                    reason = "errors"
                    break
                time.sleep(0.2)
                continue
            msgs = []
            for m in batch or []:
                if m.error() is not None:
                    self.emit("error", where="message", error=str(m.error()))
                else:
                    msgs.append(m)
            got = bool(msgs)
            before = self.received
            for m in msgs:
                self.received += 1
                self.emit("record", topic=m.topic(), partition=m.partition(), offset=m.offset(),
                          delivery_count=m.delivery_count(),
                          key=None if m.key() is None else m.key().decode("utf-8", "replace"),
                          value=None if m.value() is None else m.value().decode("utf-8", "replace"))
            # Crash or hang at the end of the batch holding the N-th record: every record of the
            # batch has been reported, none acknowledged.
            if a.crash_after and before < a.crash_after <= self.received:
                self.crash(reason="crash-after", held=self.received - before)
            if a.hang_after and before < a.hang_after <= self.received:
                self.emit("hang", reason="hang-after", held=self.received - before)
                while True:
                    time.sleep(60)
            poison = None
            for m in msgs:
                v = "" if m.value() is None else m.value().decode("utf-8", "replace")
                if a.process_ms:
                    time.sleep(a.process_ms / 1000.0)
                if a.crash_on is not None and v.startswith(a.crash_on):
                    poison = poison or m
                    continue  # never acknowledged
                if explicit:
                    t_ack = self.decide(m, v)
                    c.acknowledge(m, t_ack)
                    self.emit("ack", topic=m.topic(), partition=m.partition(), offset=m.offset(),
                              type=t_ack.name)
            if poison is not None:
                if explicit:
                    self.commit_sync(c)
                self.crash(reason="crash-on", topic=poison.topic(), partition=poison.partition(),
                           offset=poison.offset(), delivery_count=poison.delivery_count())
            if got:
                last = now_ms()
                if explicit and a.commit == "sync":
                    self.commit_sync(c)
                elif explicit and a.commit == "async":
                    try:
                        c.commit_async()
                    except Exception as e:
                        self.emit("error", where="commit_async", error=f"{type(e).__name__}: {e}")
                if a.max_records and self.received >= a.max_records:
                    reason = "max-records"
                    break
        self.emit("end", reason=reason, received=self.received)
        t0 = now_ms()
        try:
            # Explicit: sends the acks made since the last poll. Implicit: accepts the last batch.
            c.close()
            self.emit("closed", ms=now_ms() - t0)
        except Exception as e:
            self.emit("close_error", error=f"{type(e).__name__}: {e}")
            return 1
        return 0


def main():
    try:
        a = parse_args(sys.argv[1:])
    except SystemExit as e:
        sys.exit(0 if e.code == 0 else 2)
    sys.exit(Worker(a).run())


if __name__ == "__main__":
    main()
