#!/usr/bin/env python3
"""What the reference share consumers put on the wire: API versions and the share requests.

    protocol_report.py BOOTSTRAP [--logs DIR]

Runs each client (Java KafkaShareConsumer, confluent-kafka ShareConsumer) three times on a fresh
one-partition topic of 9 records (values rej-*, rel-*, ok-*) with protocol debug logging:
implicit acks; explicit acks sent with the next poll (reject rej-*, release rel-* once, accept
the rest); explicit acks with commitSync after each batch. Then describes the group with Kafka's
Java Admin client (ShareAdmin: ShareGroupDescribe + DescribeShareGroupOffsets). Prints, per run,
every API the client used with its versions, and a timeline of the share-group requests
(heartbeat member epochs, share-session epochs, acknowledgements and where they travel).
Needs java/target/share-worker.jar.
"""
import argparse
import os
import re
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_scenarios import JAR, JAVA_OPTS, Broker, Worker  # noqa: E402

ACK = {"0": "GAP", "1": "ACCEPT", "2": "RELEASE", "3": "REJECT", "4": "RENEW"}


def java_requests(log):
    """[(api, version, body)] from NetworkClient DEBUG lines."""
    out = []
    for ln in open(log, errors="replace"):
        m = re.search(r"Sending (\w+) request with header RequestHeader\(apiKey=\w+, apiVersion=(\d+).*? to node "
                      r"[-\d]+: (.*)$", ln)
        if m:
            out.append((m.group(1), int(m.group(2)), m.group(3)))
    return out


def java_timeline(reqs):
    lines = []
    for api, v, body in reqs:
        if api == "SHARE_GROUP_HEARTBEAT":
            m = re.search(r"memberId='([^']*)', memberEpoch=(-?\d+).*subscribedTopicNames=(.*)\)$", body)
            lines.append(f"ShareGroupHeartbeat v{v} member {m.group(1)} epoch {m.group(2)} topics {m.group(3)}")
        elif api in ("SHARE_FETCH", "SHARE_ACKNOWLEDGE"):
            ep = re.search(r"shareSessionEpoch=(-?\d+)", body).group(1)
            batches = re.findall(r"AcknowledgementBatch\(firstOffset=(\d+), lastOffset=(\d+), acknowledgeTypes=\[([\d, ]*)\]\)",
                                 body)
            acks = " ".join(f"{a}-{b}:{'/'.join(ACK.get(t.strip(), t) for t in ts.split(','))}" for a, b, ts in batches)
            parts = len(re.findall(r"partitionIndex=", body))
            extra = ""
            if api == "SHARE_FETCH":
                mr = re.search(r"maxRecords=(\d+), batchSize=(\d+), shareAcquireMode=(\d+)", body)
                mw = re.search(r"maxWaitMs=(\d+)", body)
                extra = f" maxWait {mw.group(1)} maxRecords {mr.group(1)} batchSize {mr.group(2)} acquireMode {mr.group(3)}" \
                    if mr else ""
            name = "ShareFetch" if api == "SHARE_FETCH" else "ShareAcknowledge"
            lines.append(f"{name} v{v} session epoch {ep}, {parts} partition(s){extra}"
                         + (f", acks {acks}" if acks else ""))
        elif api in ("SHARE_GROUP_DESCRIBE", "DESCRIBE_SHARE_GROUP_OFFSETS"):
            lines.append(f"{api} v{v}: {body[:160]}")
    return lines


def rdkafka_requests(log):
    out = []
    for ln in open(log, errors="replace"):
        m = re.search(r"\|SEND\|.*Sent (\w+?)Request \(v(\d+)", ln)
        if m:
            out.append((m.group(1), int(m.group(2)), ln))
    return out


def rdkafka_timeline(log):
    lines = []
    pending_acks = []
    for ln in open(log, errors="replace"):
        m = re.search(r"ShareGroupHeartbeat of group id \"[^\"]*\", member id \"([^\"]*)\", member epoch (-?\d+).*"
                      r"subscribed topics \"([^\"]*)\"", ln)
        if m:
            lines.append(f"ShareGroupHeartbeat member {m.group(1)} epoch {m.group(2)} topics {m.group(3)}")
            continue
        m = re.search(r"Adding ack detail for offsets \[(\d+) - (\d+)\] with type (\d+)", ln)
        if m:
            pending_acks.append(f"{m.group(1)}-{m.group(2)}:{ACK.get(m.group(3), m.group(3))}")
            continue
        m = re.search(r"Sending ShareFetch Request \(epoch (-?\d+)\) with(.*)$", ln)
        if m:
            lines.append(f"ShareFetch session epoch {m.group(1)} with{m.group(2).strip()}"
                         + (f" [acks built by the app: {' '.join(pending_acks)}]" if pending_acks and "ack" in m.group(2)
                            else ""))
            if "ack" in m.group(2):
                pending_acks = []
            continue
        m = re.search(r"(Issuing ShareAcknowledge request.*|ShareAcknowledge Request with .*)$", ln)
        if m:
            lines.append(m.group(1).strip() + (f" [acks: {' '.join(pending_acks)}]" if pending_acks else ""))
            pending_acks = []
            continue
        m = re.search(r"Sent ShareAcknowledgeRequest \(v(\d+)", ln)
        if m:
            lines.append(f"ShareAcknowledge v{m.group(1)} sent")
    return lines


def versions(reqs):
    v = {}
    for api, ver, _ in reqs:
        v.setdefault(api, set()).add(ver)
    return ", ".join(f"{a} v{'/'.join(map(str, sorted(s)))}" for a, s in sorted(v.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bootstrap")
    ap.add_argument("--logs")
    ap.add_argument("--clients", default="java,python")
    a = ap.parse_args()
    run_id = uuid.uuid4().hex[:6]
    logdir = a.logs or f"/tmp/lograil-share-protocol-{run_id}"
    os.makedirs(logdir, exist_ok=True)
    b = Broker(a.bootstrap, logdir)
    topic = f"share-protocol-{run_id}"
    b.create_topic(topic, 1)
    b.produce(topic, [f"{['rej', 'rel', 'ok'][i % 3]}-{i}" for i in range(9)], batch=100)
    runs = [("implicit", {"mode": "implicit"}),
            ("explicit, acks with the next poll", {"mode": "explicit", "reject_prefix": "rej",
                                                  "release_prefix": "rel", "commit": "poll"}),
            ("explicit, commitSync per batch", {"mode": "explicit", "reject_prefix": "rej",
                                               "release_prefix": "rel", "commit": "sync"})]
    last_group = None
    for client in a.clients.split(","):
        for i, (title, opts) in enumerate(runs):
            group = f"{topic}-{client}-{i}"
            b.set_group_configs(group, {"share.auto.offset.reset": "earliest"})
            w = Worker(client, logdir, a.bootstrap, group, topic, debug_protocol=True, idle_ms=3000,
                       start_idle_ms=20000, **opts)
            rc = w.wait(90)
            log = os.path.join(logdir, w.label + ".log")
            recs = w.records()
            print(f"== {client}: {title} (exit {rc}, {len(recs)} deliveries: "
                  f"{' '.join(str(e['offset']) + '#' + str(e['delivery_count']) for e in recs)})")
            if client == "java":
                reqs = java_requests(log)
                print("   APIs: " + versions(reqs))
                tl = java_timeline(reqs)
            else:
                reqs = rdkafka_requests(log)
                print("   APIs: " + versions(reqs))
                tl = rdkafka_timeline(log)
            for ln in tl:
                print("   " + ln)
            last_group = group
    if os.path.exists(JAR) and last_group:
        log = os.path.join(logdir, "share-admin.log")
        with open(log, "w") as err:
            r = subprocess.run(["java", *JAVA_OPTS, "-cp", JAR, "lograil.share.ShareAdmin", "--bootstrap", a.bootstrap,
                                "--group", last_group, "--debug-protocol"], stdout=subprocess.PIPE, stderr=err,
                               text=True)
        reqs = java_requests(log)
        print(f"== Java Admin (ShareAdmin, as kafka-share-groups.sh --describe): exit {r.returncode}")
        print("   APIs: " + versions(reqs))
        print("   result: " + r.stdout.strip())
    print(f"logs in {logdir}")


if __name__ == "__main__":
    t0 = time.time()
    main()
