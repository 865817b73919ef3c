#!/usr/bin/env python3
"""Share-group (KIP-932) scenarios with unmodified reference clients, against any broker.

    run_scenarios.py BOOTSTRAP [--clients java,python] [--only NAME ...] [--lock-ms 5000] ...

Runs each scenario against BOOTSTRAP (Apache Kafka 4.2 or lograil) with the Java
KafkaShareConsumer (java/, built to java/target/share-worker.jar) and confluent-kafka's
ShareConsumer (python/share_worker.py), prints PASS/FAIL per scenario with a reason and the
time it took, and exits 1 if any failed. Topics are created and group configs set with
Kafka's own tools (tests/kafka/kafka.sh tool - CLASS ...); records are produced with
confluent-kafka's Producer. Every worker's JSON output and log is kept under --logs.

Scenarios (see README.md for what each one checks):
  implicit-<client>   explicit-<client>   eight-consumers
  kill-<client>       lock-expiry-<client>
  poison-<client>     reject-release-<client>
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
KAFKA_SH = os.path.join(HERE, "..", "kafka", "kafka.sh")
JAR = os.path.join(HERE, "java", "target", "share-worker.jar")
PY_WORKER = os.path.join(HERE, "python", "share_worker.py")
# Worker JVMs are short-lived: C1 only and the serial GC start faster on a busy 2-core machine.
JAVA_OPTS = os.environ.get("SHARE_WORKER_JAVA_OPTS",
                           "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xmx256m -Xshare:auto").split()


def now_ms():
    return int(time.time() * 1000)


class Fail(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise Fail(msg)


# ------------------------------------------------------------------------------ Kafka tools

class Broker:
    def __init__(self, bootstrap, logdir):
        self.bootstrap = bootstrap
        self.logdir = logdir

    def tool(self, cls, *args, ok=True):
        """Run a Kafka main class with kafka.sh tool (DIR '-': no cluster directory needed)."""
        cmd = [KAFKA_SH, "tool", "-", cls, "--bootstrap-server", self.bootstrap, *args]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with open(os.path.join(self.logdir, "tools.log"), "a") as f:
            f.write(f"$ {' '.join(cmd)}\n{r.stdout}\n(exit {r.returncode})\n")
        if ok and r.returncode != 0:
            last = [ln for ln in r.stdout.splitlines() if ln.strip()][-3:]
            raise Fail(f"{cls.rsplit('.', 1)[-1]} {' '.join(args[:4])}... failed: {' | '.join(last)}")
        return r.stdout

    def create_topic(self, topic, partitions):
        self.tool("org.apache.kafka.tools.TopicCommand", "--create", "--topic", topic,
                  "--partitions", str(partitions), "--replication-factor", "1")

    def set_group_configs(self, group, configs):
        self.tool("org.apache.kafka.tools.ConfigCommand", "--entity-type", "groups", "--entity-name", group,
                  "--alter", "--add-config", ",".join(f"{k}={v}" for k, v in configs.items()))

    def setup(self, topic, partitions, group, configs):
        """Topic and group configs, the two tool JVMs in parallel."""
        errs = []

        def run(f, *a):
            try:
                f(*a)
            except Fail as e:
                errs.append(str(e))
        ts = [threading.Thread(target=run, args=(self.create_topic, topic, partitions)),
              threading.Thread(target=run, args=(self.set_group_configs, group, configs))]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if errs:
            raise Fail("; ".join(errs))

    def share_group_lag(self, group):
        """{(topic, partition): lag} from ShareGroupCommand --describe --offsets."""
        out = self.tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--describe",
                        "--group", group, "--offsets")
        lags = {}
        for ln in out.splitlines():
            f = ln.split()
            if len(f) >= 5 and f[0] == group and f[2].isdigit():
                lags[(f[1], int(f[2]))] = None if f[4] == "-" else int(f[4])
        return lags

    def share_group_members(self, group):
        out = self.tool("org.apache.kafka.tools.consumer.group.ShareGroupCommand", "--describe",
                        "--group", group, "--members", ok=False)
        return [ln.split()[1] for ln in out.splitlines() if ln.split()[:1] == [group] and len(ln.split()) > 2]

    def expect_no_lag(self, group, topic, partitions, wait_s=10):
        """Every partition's share-group lag is 0: all records acknowledged or archived."""
        deadline = time.time() + wait_s
        while True:
            lags = self.share_group_lag(group)
            mine = {p: lags.get((topic, p)) for p in range(partitions)}
            if all(v == 0 for v in mine.values()):
                return
            if time.time() > deadline:
                raise Fail(f"ShareGroupCommand lag per partition {mine}, expected all 0")
            time.sleep(1)

    def produce(self, topic, values, partitions=1, keys=None, batch=None):
        """Produce values (round-robin over partitions); returns {(topic, p, offset): (key, value)}."""
        from confluent_kafka import Producer
        conf = {"bootstrap.servers": self.bootstrap, "acks": "all", "linger.ms": 5}
        if batch:
            conf["batch.num.messages"] = batch  # small batches: share fetches acquire whole batches
        p = Producer(conf)
        out, errs = {}, []

        def dr(err, msg):
            if err is not None:
                errs.append(str(err))
            else:
                out[(msg.topic(), msg.partition(), msg.offset())] = (
                    None if msg.key() is None else msg.key().decode(), msg.value().decode())
        for i, v in enumerate(values):
            k = keys[i] if keys else f"k{i % 10}"
            p.produce(topic, key=k, value=v, partition=i % partitions, on_delivery=dr)
            p.poll(0)
        p.flush(30)
        check(not errs and len(out) == len(values), f"produce: {len(out)}/{len(values)} delivered, {errs[:3]}")
        return out

    def broker_configs(self, names):
        """The broker's values of some configs (DescribeConfigs), or {} if it cannot say."""
        try:
            from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType
            a = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})
            bid = next(iter(a.list_topics(timeout=10).brokers))
            res = ConfigResource(ResourceType.BROKER, str(bid))
            entries = a.describe_configs([res])[res].result(timeout=10)
            return {n: entries[n].value for n in names if n in entries}
        except Exception:
            return {}


# ------------------------------------------------------------------------------ workers

class Worker:
    """One ShareWorker process (Java or Python); its JSON lines are collected as they come."""
    seq = 0

    def __init__(self, client, logdir, bootstrap, group, topics, **opts):
        Worker.seq += 1
        self.client = client
        self.label = opts.pop("label", f"{client}-{Worker.seq}")
        args = ["--bootstrap", bootstrap, "--group", group, "--topics", topics,
                "--label", self.label, "--client-id", f"{self.label}-{os.getpid()}"]
        for k, v in opts.items():
            if v is True:
                args.append("--" + k.replace("_", "-"))
            elif v is not None and v is not False:
                for x in (v if isinstance(v, list) else [v]):
                    args += ["--" + k.replace("_", "-"), str(x)]
        if client == "java":
            cmd = ["java", *JAVA_OPTS, "-jar", JAR, *args]
        elif client == "python":
            cmd = [sys.executable, PY_WORKER, *args]
        else:
            raise ValueError(client)
        self.events = []
        self.cond = threading.Condition()
        self.out = open(os.path.join(logdir, self.label + ".jsonl"), "w")
        self.err = open(os.path.join(logdir, self.label + ".log"), "w")
        self.err.write("$ " + " ".join(cmd) + "\n")
        self.err.flush()
        self.started = now_ms()
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.p.stdout:
            self.out.write(line)
            self.out.flush()
            try:
                ev = json.loads(line)
            except ValueError:
                ev = {"ev": "garbage", "line": line}
            with self.cond:
                self.events.append(ev)
                self.cond.notify_all()

    def wait_event(self, name, timeout):
        with self.cond:
            ok = self.cond.wait_for(lambda: any(e["ev"] == name for e in self.events) or
                                    self.p.poll() is not None, timeout)
            return ok and any(e["ev"] == name for e in self.events)

    def wait(self, timeout):
        try:
            rc = self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Fail(f"{self.label} still running after {timeout:.0f}s; killed")
        self.reader.join(5)
        return rc

    def kill(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()
        self.reader.join(5)

    @property
    def rc(self):
        return self.p.poll()

    def of(self, ev):
        with self.cond:
            return [e for e in self.events if e["ev"] == ev]

    def records(self):
        return self.of("record")

    def errors(self):
        return self.of("error") + self.of("close_error") + [e for e in self.of("commit") if e.get("error")] + \
            [e for e in self.of("commit_sync") if e.get("error")]


def rid(e):
    return (e["topic"], e["partition"], e["offset"])


def deliveries(workers):
    """{(topic, partition, offset): [record events with their worker label, in time order]}."""
    d = {}
    for w in workers:
        for e in w.records():
            d.setdefault(rid(e), []).append(e)
    for v in d.values():
        v.sort(key=lambda e: e["ts"])
    return d


def committed(workers):
    """{(topic, partition, offset): number of successful acknowledgement commits} (callbacks)."""
    c = {}
    for w in workers:
        for e in w.of("commit"):
            if not e.get("error"):
                for o in e["offsets"]:
                    k = (e["topic"], e["partition"], o)
                    c[k] = c.get(k, 0) + 1
    return c


def acks(workers):
    """{(topic, partition, offset): [ack types in time order]}."""
    a = {}
    for w in workers:
        for e in w.of("ack"):
            a.setdefault(rid(e), []).append((e["ts"], e["type"]))
    return {k: [t for _, t in sorted(v)] for k, v in a.items()}


def no_errors(workers):
    for w in workers:
        errs = w.errors()
        check(not errs, f"{w.label}: {len(errs)} error event(s), first: {errs[0]}" if errs else "")


def show_ids(ids, n=6):
    ids = sorted(ids)
    s = ", ".join(f"{p}:{o}" for _, p, o in ids[:n])
    return s + (f" ... ({len(ids)} in all)" if len(ids) > n else "")


# ------------------------------------------------------------------------------ scenarios

class Run:
    def __init__(self, a):
        self.a = a
        self.run_id = uuid.uuid4().hex[:6]
        self.logdir = a.logs or f"/tmp/lograil-share-{time.strftime('%Y%m%d-%H%M%S')}-{self.run_id}"
        os.makedirs(self.logdir, exist_ok=True)
        self.b = Broker(a.bootstrap, self.logdir)
        self.clients = a.clients.split(",")
        self.lock_ms = a.lock_ms
        self.limit = a.delivery_limit
        self.workers = []

    def names(self, scen):
        base = f"share-{scen}-{self.run_id}"
        return base, base  # topic, group

    def group_configs(self, lock_ms=None):
        c = {"share.auto.offset.reset": "earliest"}
        if lock_ms:
            c[self.a.lock_config] = lock_ms
        if self.a.limit_config:
            c[self.a.limit_config] = self.limit
        for kv in self.a.group_config:
            k, _, v = kv.partition("=")
            c[k] = v
        return c

    def worker(self, client, topic, group, **opts):
        w = Worker(client, self.logdir, self.a.bootstrap, group, topic, **opts)
        self.workers.append(w)
        return w

    def other(self, client):
        o = [c for c in self.clients if c != client]
        return o[0] if o else client

    # -- implicit / explicit: one consumer reads the whole topic, every record completed once --
    def simple(self, client, mode):
        topic, group = self.names(f"{mode}-{client}")
        self.b.setup(topic, 2, group, self.group_configs())
        produced = self.b.produce(topic, [f"{mode}-{i}" for i in range(200)], partitions=2)
        opts = {"mode": mode, "idle_ms": 4000, "start_idle_ms": 30000, "timeout_ms": 90000}
        if mode == "explicit":
            opts["commit"] = "sync"  # acks in ShareAcknowledge requests (piggybacked elsewhere)
        w = self.worker(client, topic, group, **opts)
        rc = w.wait(120)
        check(rc == 0, f"{w.label} exit {rc}")
        no_errors([w])
        d = deliveries([w])
        check(set(d) == set(produced), f"received {len(d)} of {len(produced)} records; missing "
              f"{show_ids(set(produced) - set(d))}")
        dup = [k for k, v in d.items() if len(v) != 1 or v[0]["delivery_count"] != 1]
        check(not dup, f"delivered more than once or delivery_count != 1: {show_ids(dup)}")
        bad = [k for k in produced if (d[k][0]["key"], d[k][0]["value"]) != produced[k]]
        check(not bad, f"key/value differ from what was produced: {show_ids(bad)}")
        if mode == "explicit":
            a = acks([w])
            check(all(a.get(k) == ["ACCEPT"] for k in produced), "not every record ACCEPTed once")
        c = committed([w])
        notc = [k for k in produced if c.get(k) != 1]
        check(not notc, f"acknowledgement commit callback did not report exactly one success for "
              f"{show_ids(notc)}")
        self.b.expect_no_lag(group, topic, 2)
        return f"{len(produced)} records, each delivered and acknowledged once; lag 0"

    # -- eight consumers on a two-partition topic --
    def eight(self):
        topic, group = self.names("eight")
        self.b.setup(topic, 2, group, self.group_configs())
        n = 2000
        ws = []
        for i in range(8):
            client = self.clients[i % len(self.clients)]
            mode = "explicit" if (i // len(self.clients)) % 2 else "implicit"
            ws.append(self.worker(client, topic, group, mode=mode, max_poll_records=10, process_ms=5,
                                  idle_ms=8000, start_idle_ms=120000, timeout_ms=180000))
        # Produce only once all 8 are members, or the first to join takes everything.
        t0 = time.time()
        while True:
            members = self.b.share_group_members(group)
            if len(members) >= 8:
                break
            check(time.time() - t0 < 90, f"only {len(members)} of 8 members joined after 90s")
            check(all(w.rc is None for w in ws), "a worker exited before all joined: " +
                  ", ".join(f"{w.label} rc={w.rc}" for w in ws if w.rc is not None))
            time.sleep(1)
        joined = time.time() - t0
        produced = self.b.produce(topic, [f"e-{i}" for i in range(n)], partitions=2, batch=10)
        for w in ws:
            rc = w.wait(200)
            check(rc == 0, f"{w.label} exit {rc}")
        no_errors(ws)
        d = deliveries(ws)
        check(set(d) == set(produced), f"received {len(d)} of {n}; missing {show_ids(set(produced) - set(d))}")
        dup = [k for k, v in d.items() if len(v) != 1]
        check(not dup, f"delivered more than once: {show_ids(dup)}")
        c = committed(ws)
        notc = [k for k in produced if c.get(k) != 1]
        check(not notc, f"commit callbacks did not report exactly one success for {show_ids(notc)}")
        per = {w.label: len(w.records()) for w in ws}
        idle = [k for k, v in per.items() if v == 0]
        check(not idle, f"consumers without work: {idle}; per consumer {per}")
        self.b.expect_no_lag(group, topic, 2)
        return f"all 8 joined in {joined:.0f}s; {n} records each completed once; per consumer {per}"

    # -- a consumer dies (SIGKILL) or hangs while holding acquired records --
    def held(self, client, kill):
        scen = ("kill-" if kill else "lock-expiry-") + client
        topic, group = self.names(scen)
        lock = self.lock_ms
        self.b.setup(topic, 1, group, self.group_configs(lock_ms=lock))
        produced = self.b.produce(topic, [f"h-{i}" for i in range(30)], batch=5)
        a = self.worker(client, topic, group, mode="explicit", max_poll_records=5, hang_after=3,
                        start_idle_ms=60000, timeout_ms=120000)
        check(a.wait_event("hang", 60), f"{a.label} did not receive 3 records (rc={a.rc})")
        held = {rid(e): e for e in a.records()}
        t_kill = now_ms()
        if kill:
            a.kill()
        b = self.worker(self.other(client), topic, group, mode="explicit", idle_ms=lock + 6000,
                        start_idle_ms=lock + 30000, timeout_ms=lock + 90000)
        rc = b.wait(lock / 1000 + 120)
        if not kill:
            a.kill()
        check(rc == 0, f"{b.label} exit {rc}")
        no_errors([b])
        d = deliveries([b])
        check(set(d) == set(produced), f"{b.label} received {len(d)} of {len(produced)}; missing "
              f"{show_ids(set(produced) - set(d))}")
        bad = [k for k in held if d[k][0]["delivery_count"] != held[k]["delivery_count"] + 1]
        check(not bad, "held records not redelivered with delivery count + 1: " +
              ", ".join(f"{k[2]}: {held[k]['delivery_count']} -> {d[k][0]['delivery_count']}" for k in bad))
        # A's client may have fetched the next batch in the background before it hung or was
        # killed (the Java client does, now and then): those records were acquired by A without
        # being printed, so they come back with count 2 (Kafka 4.2 counts session-release
        # deliveries, KAFKA-19972). Only the batch right after A's may be like that.
        last = max(k[2] for k in held)
        prefetched = [k for k in produced if k not in held and d[k][0]["delivery_count"] == 2
                      and last < k[2] <= last + 5]
        fresh = [k for k in produced if k not in held and k not in prefetched
                 and d[k][0]["delivery_count"] != 1]
        check(not fresh, f"records never held by {a.label} have delivery count != 1: {show_ids(fresh)}")
        dup = [k for k, v in d.items() if len(v) != 1]
        check(not dup, f"delivered more than once to {b.label}: {show_ids(dup)}")
        c = committed([b])
        check(all(c.get(k) == 1 for k in produced), "commit callbacks: not every record completed once")
        # When did the held records come back? Lock start <= A's receive time.
        back = [d[k][0]["ts"] - held[k]["ts"] for k in held]
        first_b = min(e["ts"] for v in d.values() for e in v)
        since_kill = min(d[k][0]["ts"] for k in held) - t_kill
        note = (f"{len(held)} held by {a.label} came back to {b.label} with delivery count +1, "
                f"{min(back)}-{max(back)} ms after {a.label} got them, {since_kill} ms after the "
                f"{'kill' if kill else 'hang'} ({b.label}'s first record {first_b - t_kill} ms after it)")
        if prefetched:
            note += f"; {len(prefetched)} more were prefetched by {a.label}'s client (count 2)"
        if kill:
            check(max(back) <= lock + 10000, f"held records came back too late: {note}")
        else:
            check(min(back) >= lock - 1000, f"came back before the lock duration ({lock} ms): {note}")
            check(max(back) <= lock + 10000, f"came back too late: {note}")
        self.b.expect_no_lag(group, topic, 1)
        return note

    # -- a poison record crashes every consumer that gets it, until the delivery limit --
    def poison(self, client):
        topic, group = self.names(f"poison-{client}")
        lock = self.lock_ms
        self.b.setup(topic, 1, group, self.group_configs(lock_ms=lock))
        values = [f"p-{i}" for i in range(30)]
        values[10] = "POISON-10"
        produced = self.b.produce(topic, values, batch=5)
        poison = next(k for k, v in produced.items() if v[1].startswith("POISON"))
        ws, crashes, restarts = [], 0, []
        for attempt in range(self.limit + 2):
            w = self.worker(client, topic, group, mode="explicit", crash_on="POISON", max_poll_records=5,
                            idle_ms=lock + 4000, start_idle_ms=lock + 20000, timeout_ms=lock + 90000)
            ws.append(w)
            rc = w.wait(lock / 1000 + 120)
            if rc == 3:
                crashes += 1
                if self.a.restart_cmd and crashes < self.limit:
                    t0 = time.time()
                    r = subprocess.run(self.a.restart_cmd, shell=True, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, text=True)
                    restarts.append(f"{time.time() - t0:.0f}s")
                    check(r.returncode == 0, f"--restart-cmd failed ({r.returncode}): {r.stdout[-300:]}")
                continue
            check(rc == 0, f"{w.label} exit {rc}")
            break
        no_errors(ws)
        d = deliveries(ws)
        pd = [e["delivery_count"] for e in d.get(poison, [])]
        check(pd == list(range(1, self.limit + 1)),
              f"poison delivery counts {pd}, expected 1..{self.limit} (group.share.delivery.count.limit)")
        check(crashes == self.limit, f"{crashes} crashes, expected {self.limit}")
        check(ws[-1].rc == 0 and not any(rid(e) == poison for e in ws[-1].records()),
              "the last consumer got the poison again")
        rest = [k for k in produced if k != poison]
        missing = [k for k in rest if k not in d]
        check(not missing, f"records never delivered: {show_ids(missing)}")
        c = committed(ws)
        notc = [k for k in rest if c.get(k) != 1]
        check(not notc, f"not acknowledged exactly once: {show_ids(notc)}")
        redeliv = [k for k in rest if len(d[k]) != 1]
        check(not redeliv, f"non-poison records delivered more than once: {show_ids(redeliv)}")
        self.b.expect_no_lag(group, topic, 1)
        return (f"poison delivered {len(pd)} times (counts {pd}) to {crashes} crashing consumers, then "
                f"archived; {len(rest)} others completed once; lag 0"
                + (f"; broker restarted between crashes ({', '.join(restarts)})" if restarts else ""))

    # -- REJECT is final, RELEASE comes back with delivery count + 1 --
    def reject_release(self, client):
        topic, group = self.names(f"reject-release-{client}")
        self.b.setup(topic, 2, group, self.group_configs())
        kinds = ["rej", "rel", "ok"]
        values = [f"{kinds[i % 3]}-{i}" for i in range(60)]
        produced = self.b.produce(topic, values, partitions=2)
        w = self.worker(client, topic, group, mode="explicit", reject_prefix="rej", release_prefix="rel",
                        release_times=1, idle_ms=6000, start_idle_ms=30000, timeout_ms=90000)
        rc = w.wait(120)
        check(rc == 0, f"{w.label} exit {rc}")
        no_errors([w])
        d, a, c = deliveries([w]), acks([w]), committed([w])
        check(set(d) == set(produced), f"received {len(d)} of {len(produced)}")
        errs = []
        for k, (_, v) in produced.items():
            dc = [e["delivery_count"] for e in d[k]]
            want = {"rej": ([1], ["REJECT"]), "rel": ([1, 2], ["RELEASE", "ACCEPT"]),
                    "ok": ([1], ["ACCEPT"])}[v.split("-")[0]]
            if (dc, a.get(k)) != want:
                errs.append(f"{v}@{k[1]}:{k[2]} counts {dc} acks {a.get(k)}, expected {want}")
            if c.get(k, 0) != len(want[0]):
                errs.append(f"{v}@{k[1]}:{k[2]}: {c.get(k, 0)} successful ack commits, expected {len(want[0])}")
        check(not errs, f"{len(errs)} wrong: " + "; ".join(errs[:4]))
        self.b.expect_no_lag(group, topic, 2)
        return "20 rejected: delivered once, never again; 20 released: back with count 2, then accepted; 20 accepted"

    def scenarios(self):
        s = []
        for c in self.clients:
            s.append((f"implicit-{c}", lambda c=c: self.simple(c, "implicit")))
            s.append((f"explicit-{c}", lambda c=c: self.simple(c, "explicit")))
        s.append(("eight-consumers", self.eight))
        for c in self.clients:
            s.append((f"kill-{c}", lambda c=c: self.held(c, kill=True)))
            s.append((f"lock-expiry-{c}", lambda c=c: self.held(c, kill=False)))
        for c in self.clients:
            s.append((f"poison-{c}", lambda c=c: self.poison(c)))
            s.append((f"reject-release-{c}", lambda c=c: self.reject_release(c)))
        return s

    def main(self):
        a = self.a
        cfg = self.b.broker_configs(["group.share.delivery.count.limit", "group.share.min.record.lock.duration.ms",
                                     "group.share.heartbeat.interval.ms"])
        if cfg.get("group.share.delivery.count.limit") and not a.limit_config:
            self.limit = int(cfg["group.share.delivery.count.limit"])
        lo = cfg.get("group.share.min.record.lock.duration.ms")
        if lo and int(lo) > self.lock_ms:
            print(f"note: broker's group.share.min.record.lock.duration.ms={lo} > --lock-ms; using {lo}")
            self.lock_ms = int(lo)
        print(f"bootstrap {a.bootstrap}; clients {','.join(self.clients)}; lock {self.lock_ms} ms; "
              f"delivery limit {self.limit}; broker says {cfg or 'nothing (DescribeConfigs failed)'}; "
              f"logs {self.logdir}", flush=True)
        failed, t_all = [], time.time()
        for name, f in self.scenarios():
            if a.only and not any(re.fullmatch(p, name) for p in a.only):
                continue
            t0 = time.time()
            try:
                note = f()
                print(f"PASS {name} ({time.time() - t0:.1f}s): {note}", flush=True)
            except Fail as e:
                failed.append(name)
                print(f"FAIL {name} ({time.time() - t0:.1f}s): {e}", flush=True)
            except Exception as e:  # a bug here, or an unexpected client failure
                failed.append(name)
                print(f"FAIL {name} ({time.time() - t0:.1f}s): {type(e).__name__}: {e}", flush=True)
            finally:
                for w in self.workers:
                    w.kill()
                self.workers = []
        print(f"{'FAILED ' + ' '.join(failed) if failed else 'all passed'} in {time.time() - t_all:.0f}s; "
              f"logs in {self.logdir}")
        return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bootstrap")
    ap.add_argument("--clients", default="java,python", help="java, python or both (default)")
    ap.add_argument("--only", nargs="*", help="run only scenarios whose name matches one of these regexes")
    ap.add_argument("--lock-ms", type=int, default=5000,
                    help="record lock duration to set on the lock/poison scenarios' groups (default 5000)")
    ap.add_argument("--lock-config", default="share.record.lock.duration.ms",
                    help="group config name for the lock duration (Kafka 4.2: share.record.lock.duration.ms)")
    ap.add_argument("--delivery-limit", type=int, default=5,
                    help="expected delivery count limit when the broker does not report "
                         "group.share.delivery.count.limit (Kafka's default 5)")
    ap.add_argument("--limit-config",
                    help="also set --delivery-limit on each group under this group config name (Kafka 4.2 "
                         "has only the broker config group.share.delivery.count.limit)")
    ap.add_argument("--restart-cmd",
                    help="shell command run after each crash but the last in poison-*, e.g. one that restarts "
                         "or kill -9s and restarts the broker: the delivery counts must survive it")
    ap.add_argument("--group-config", action="append", default=[], help="K=V for every group (repeatable)")
    ap.add_argument("--logs", help="directory for worker output and logs (default /tmp/lograil-share-...)")
    a = ap.parse_args()
    if "java" in a.clients.split(",") and not os.path.exists(JAR):
        sys.exit(f"{JAR} missing: build it with (cd {os.path.join(HERE, 'java')} && mvn -q -B package)")
    sys.exit(Run(a).main())


if __name__ == "__main__":
    main()
