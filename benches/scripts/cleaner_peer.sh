#!/usr/bin/env bash
# The log cleaner (compaction), lograil beside a single-broker Apache Kafka (tests/kafka/kafka.sh,
# KRaft, Kafka's defaults but for log.cleaner.backoff.ms), alternately, REPS repetitions of one
# fresh broker session each, the same data to both:
#
#   1. three compacted topics, cleanW, cleanA and cleanB (1 partition, cleanup.policy=compact,
#      segment.bytes=SEGMENT_BYTES, min.compaction.lag.ms one day so that nothing is cleanable
#      while loading), created and later altered with librdkafka's admin API (confluent-kafka
#      for Python: light, where a JVM tool would take a core for seconds);
#   2. cleanA loaded with MESSAGES records of 1000 B, cleanB with B_MESSAGES (twice as many, so
#      that its pass lasts longer), keys drawn at random from KEYS (`lograil-bench produce --keys
#      --random-keys`: the same sequence to both brokers; in cleanA each key is updated
#      MESSAGES/KEYS times, its latest record anywhere in the log); cleanW with a fifth of
#      MESSAGES, cleaned first so that Kafka's cleaner code is compiled by the JIT (as in a
#      broker that has been running) before cleanA is;
#   3. cleanA: `sync` (the load's dirty pages written back, as they long are when a real log is
#      compacted), then min.compaction.lag.ms=0; the broker's cleaner, which looks every
#      BACKOFF_MS, makes one pass over the closed segments. Cleaner throughput = bytes of the
#      closed segments (the dirty section: nothing is clean yet) / the pass's time, from the
#      broker's own log: lograil's "cleaned" line (its end and took_ms), Kafka's "Beginning
#      cleaning of log" and "Log cleaner thread 0 cleaned log" lines. CPU of the broker and of
#      its cleaner thread over the same stretch, from /proc;
#   4. cleanB: an open-loop producer (PROBE_RATE records/s of 1000 B, same keys, linger.ms 1,
#      acks=1, --latency-file) for PROBE_SECONDS with nothing cleanable (the baseline), then
#      again while cleanB's lag is set to 0 two seconds in, long enough to outlast the pass.
#      Produce p99 with the cleaner = over the records sent during the pass on cleanB; without =
#      over the baseline run (both from their 2nd second on); also over the records of every
#      repetition's pass together.
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/cleaner_peer.sh      # ~3 min a repetition; prints the table
#
# Environment: BROKER, BENCH (binaries), OUT (results: default
# target/bench-results/cleaner-<time>), DATA (broker data: default target/bench-data), REPS (3),
# MESSAGES (1000000), B_MESSAGES (2 * MESSAGES), KEYS (100000), SEGMENT_BYTES (33554432),
# BACKOFF_MS (500), PROBE_RATE (5000), PROBE_SECONDS (20), BROKERS (which to run: default
# "kafka lograil"; BROKERS=lograil with BROKER=<another build> compares two lograil builds
# run one after the other). Each session keeps, in
# $OUT/<broker>-<rep>/, the lograil-bench JSON files, the probes' latency files, pass.json (the
# figures) and the broker's cleaner log lines. Needs ~3.5 GB free under DATA (one broker at a time; removed after each),
# and python3 with confluent-kafka.
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
KAFKA_SH=tests/kafka/kafka.sh
OUT=$(realpath -m "${OUT:-target/bench-results/cleaner-$(date -u +%Y%m%dT%H%M%SZ)}")
DATA=$(realpath -m "${DATA:-target/bench-data}")
REPS=${REPS:-3}
MESSAGES=${MESSAGES:-1000000}
B_MESSAGES=${B_MESSAGES:-$((2 * MESSAGES))}
KEYS=${KEYS:-100000}
SEGMENT_BYTES=${SEGMENT_BYTES:-33554432}
BACKOFF_MS=${BACKOFF_MS:-500}
PROBE_RATE=${PROBE_RATE:-5000}
PROBE_SECONDS=${PROBE_SECONDS:-20}
BROKERS=${BROKERS:-kafka lograil}
HOLD_MS=86400000
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }
# utime + stime of a process, or of its thread whose name starts with $2, in seconds.
cpu_s() { # PID [THREAD-NAME-PREFIX]
    python3 - "$@" <<'PYEOF'
import os, pathlib, sys
pid, prefix = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None
def ticks(stat):
    f = stat.read_text().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])
if prefix is None:
    t = ticks(pathlib.Path(f"/proc/{pid}/stat"))
else:
    t = sum(ticks(d / "stat") for d in pathlib.Path(f"/proc/{pid}/task").iterdir()
            if (d / "comm").read_text().startswith(prefix))
print(t / os.sysconf("SC_CLK_TCK"))
PYEOF
}

LOGRAIL_DIR=$DATA/cleaner-lograil
KAFKA_DIR=$DATA/cleaner-kafka
start_lograil() {
    rm -rf "$LOGRAIL_DIR"
    mkdir -p "$LOGRAIL_DIR"
    local port
    port=$(free_port)
    "$BROKER" serve --listen "127.0.0.1:$port" --data-dir "$LOGRAIL_DIR/data" \
        --log-cleaner-backoff-ms "$BACKOFF_MS" \
        >"$LOGRAIL_DIR/stdout" 2>"$LOGRAIL_DIR/stderr" &
    PID=$!
    ADDR=127.0.0.1:$port
    PARTITIONS_DIR=$LOGRAIL_DIR/data
    BROKER_LOG=$LOGRAIL_DIR/stderr
    CLEANER_THREAD=lograil-cleaner
    for _ in $(seq 600); do
        grep -q 'listening on' "$LOGRAIL_DIR/stdout" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "lograil did not start" >&2
    exit 1
}
stop_lograil() {
    kill "$PID"
    wait "$PID" || true
    grep -E 'clean|ERROR|WARN' "$BROKER_LOG" >"$SESSION/broker-cleaner.log" || true
    rm -rf "$LOGRAIL_DIR"
}
start_kafka() {
    rm -rf "$KAFKA_DIR"
    # UTC, so that its log's timestamps compare with the harness's clock.
    ADDR=$(LOGRAIL_KAFKA_JVM_OPTS="-Duser.timezone=UTC" \
        LOGRAIL_KAFKA_PROPERTIES="log.cleaner.backoff.ms=$BACKOFF_MS" \
        "$KAFKA_SH" start "$KAFKA_DIR" --brokers 1)
    PID=$(cat "$KAFKA_DIR/node-1.pid")
    PARTITIONS_DIR=$KAFKA_DIR/node-1/data
    BROKER_LOG=$KAFKA_DIR/node-1/logs/server.log
    CLEANER_THREAD=kafka-log-clean # kafka-log-cleaner-thread-0, cut to 15 bytes
}
stop_kafka() {
    grep -A12 -E 'LogCleaner|log-cleaner' "$BROKER_LOG" >"$SESSION/broker-cleaner.log" || true
    "$KAFKA_SH" stop "$KAFKA_DIR" >/dev/null
    rm -rf "$KAFKA_DIR"
}

create_topics() { # TOPIC...
    python3 - "$ADDR" "$SEGMENT_BYTES" "$HOLD_MS" "$@" <<'PYEOF'
import sys
from confluent_kafka.admin import AdminClient, NewTopic
addr, segment, hold, topics = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
config = {"cleanup.policy": "compact", "segment.bytes": segment, "min.compaction.lag.ms": hold}
admin = AdminClient({"bootstrap.servers": addr})
for f in admin.create_topics([NewTopic(t, 1, 1, config=config) for t in topics]).values():
    f.result()
PYEOF
}
release_topic() { # TOPIC: its closed segments become cleanable
    python3 - "$ADDR" "$1" <<'PYEOF'
import sys
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                   ResourceType)
addr, topic = sys.argv[1:]
lag = ConfigEntry("min.compaction.lag.ms", "0", incremental_operation=AlterConfigOpType.SET)
resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[lag])
admin = AdminClient({"bootstrap.servers": addr})
for f in admin.incremental_alter_configs([resource]).values():
    f.result()
PYEOF
}
# Bytes of a partition's closed segments: every .log file but the newest (the active one).
closed_bytes() { # TOPIC
    find "$PARTITIONS_DIR/$1-0" -maxdepth 1 -name '*.log' -printf '%f %s\n' | sort |
        head -n -1 | awk '{ s += $2 } END { print s + 0 }'
}
produce() { # TOPIC JSON [lograil-bench flags...]
    local topic=$1 json=$2
    shift 2
    "$BENCH" produce --brokers "$ADDR" --topic "$topic" --partitions 1 --message-size 1000 \
        --keys "$KEYS" --random-keys --acks 1 --json "$json" "$@" 2>&1 |
        grep -E '^(produce|p99|broker):' | sed "s/^/$NAME #$REP $topic: /" || true
}

# Waits until the broker logs the end of a cleaner pass over TOPIC-0 that began after AFTER_MS
# and prints it as JSON: start_ms, end_ms, seconds, and what the broker says of it.
wait_pass() { # NAME LOG TOPIC AFTER_MS
    python3 - "$@" <<'PYEOF'
import datetime, json, re, sys, time
name, log, topic, after = sys.argv[1], sys.argv[2], sys.argv[3] + "-0", int(sys.argv[4])
def ms(text, fmt):
    t = datetime.datetime.strptime(text, fmt).replace(tzinfo=datetime.timezone.utc)
    return int(t.timestamp() * 1000)
def lograil(text):
    for line in text.splitlines():
        if " cleaned " not in line or f"partition={topic} " not in line:
            continue
        stamp = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        end = ms(stamp.group(1)[:26], "%Y-%m-%dT%H:%M:%S.%f")
        start = end - int(fields["took_ms"])
        if start >= after - 1000:
            return {"start_ms": start, "end_ms": end, "read": int(fields["read"]),
                    "written": int(fields["written"]), "removed": int(fields["removed"])}
    return None
def kafka(text):
    begun = None
    entries = re.split(r"\n(?=\[\d{4}-)", text)
    for entry in entries:
        stamp = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", entry)
        if not stamp:
            continue
        at = ms(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f")
        if at < after:
            continue
        if f"Beginning cleaning of log {topic}" in entry:
            begun = at
        elif begun is not None and f"cleaned log {topic} " in entry:
            num = lambda s: float(s.replace(",", ""))
            p = re.search(r"([\d,.]+) MB of log processed in ([\d,.]+) seconds \(([\d,.]+) MB/sec\)", entry)
            start = re.search(r"Start size: ([\d,.]+) MB \(([\d,]+) messages\)", entry)
            end = re.search(r"End size: ([\d,.]+) MB \(([\d,]+) messages\)", entry)
            return {"start_ms": begun, "end_ms": at,
                    "kafka_processed_mib": num(p.group(1)), "kafka_seconds": num(p.group(2)),
                    "kafka_mib_per_s": num(p.group(3)),
                    "start_mib": num(start.group(1)), "start_messages": int(num(start.group(2))),
                    "end_mib": num(end.group(1)), "end_messages": int(num(end.group(2)))}
    return None
deadline = time.time() + 900
while time.time() < deadline:
    with open(log, errors="replace") as f:
        found = (lograil if name == "lograil" else kafka)(f.read())
    if found:
        found["seconds"] = (found["end_ms"] - found["start_ms"]) / 1000
        print(json.dumps(found))
        sys.exit(0)
    time.sleep(0.2)
sys.exit(f"no cleaner pass over {topic} in {log} within 900 s")
PYEOF
}

# A broker left running by a failed step is stopped on the way out.
RUNNING=
cleanup() {
    case $RUNNING in
    lograil) kill "$PID" 2>/dev/null || true ;;
    kafka) "$KAFKA_SH" stop "$KAFKA_DIR" >/dev/null 2>&1 || true ;;
    esac
}
trap cleanup EXIT

session() { # NAME REP
    NAME=$1 REP=$2
    SESSION=$OUT/$NAME-$REP
    mkdir -p "$SESSION"
    start_"$NAME"
    RUNNING=$NAME
    create_topics cleanW cleanA cleanB
    produce cleanW "$SESSION/load-cleanW.json" --messages $((MESSAGES / 5))
    produce cleanA "$SESSION/load-cleanA.json" --messages "$MESSAGES" --broker-pid "$PID"
    produce cleanB "$SESSION/load-cleanB.json" --messages "$B_MESSAGES" --broker-pid "$PID"

    # The first pass of this broker's cleaner (for Kafka: before the JIT compiled it).
    local released warm warm_dirty
    warm_dirty=$(closed_bytes cleanW)
    sync
    released=$(now_ms)
    release_topic cleanW
    warm=$(wait_pass "$NAME" "$BROKER_LOG" cleanW "$released")
    warm=$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["dirty_bytes"]=int(sys.argv[2]); print(json.dumps(d))' "$warm" "$warm_dirty")
    sleep 2

    # The cleaner alone: one pass over cleanA.
    local dirty cpu0 cpu1 thread0 thread1 pass
    dirty=$(closed_bytes cleanA)
    sync
    cpu0=$(cpu_s "$PID")
    thread0=$(cpu_s "$PID" "$CLEANER_THREAD")
    released=$(now_ms)
    release_topic cleanA
    pass=$(wait_pass "$NAME" "$BROKER_LOG" cleanA "$released")
    cpu1=$(cpu_s "$PID")
    thread1=$(cpu_s "$PID" "$CLEANER_THREAD")
    local after
    after=$(closed_bytes cleanA)

    # Produce latency without, then with, the cleaner at work on the same partition.
    local probe=$((PROBE_RATE * PROBE_SECONDS)) seconds
    sync
    produce cleanB "$SESSION/probe-idle.json" --rate "$PROBE_RATE" --messages "$probe" \
        --linger-ms 1 --latency-file "$SESSION/probe-idle.lat"
    # Long enough to outlast the pass over cleanB (B_MESSAGES records and the baseline's).
    seconds=$(python3 -c 'import json,sys; print(max(int(sys.argv[2]), int(float(sys.argv[3]) * json.loads(sys.argv[1])["seconds"]) + 12))' \
        "$pass" "$PROBE_SECONDS" "$(((B_MESSAGES + probe) / MESSAGES + 1))")
    sync
    produce cleanB "$SESSION/probe-cleaning.json" --rate "$PROBE_RATE" \
        --messages $((PROBE_RATE * seconds)) --linger-ms 1 \
        --latency-file "$SESSION/probe-cleaning.lat" &
    local probe_pid=$! dirty_b
    sleep 2
    dirty_b=$(closed_bytes cleanB)
    released=$(now_ms)
    release_topic cleanB
    local pass_b
    pass_b=$(wait_pass "$NAME" "$BROKER_LOG" cleanB "$released")
    wait "$probe_pid"
    python3 - "$SESSION/pass.json" "$NAME" "$dirty" "$after" "$cpu0" "$cpu1" "$thread0" \
        "$thread1" "$pass" "$pass_b" "$warm" "$dirty_b" <<'PYEOF'
import json, sys
path, name, dirty, after, cpu0, cpu1, thread0, thread1, a, b, w, dirty_b = sys.argv[1:]
a, b, w = json.loads(a), json.loads(b), json.loads(w)
b["dirty_bytes"] = int(dirty_b)
out = {"broker": name, "dirty_bytes": int(dirty), "closed_bytes_after": int(after),
       "cpu_s": float(cpu1) - float(cpu0), "cleaner_thread_cpu_s": float(thread1) - float(thread0),
       "pass_a": a, "pass_b": b, "warm_up": w, "mb_per_s": int(dirty) / 1e6 / a["seconds"]}
json.dump(out, open(path, "w"), indent=1)
print(f"{name}: cleaned {int(dirty)/1e6:.0f} MB in {a['seconds']:.2f} s = {out['mb_per_s']:.1f} MB/s, "
      f"broker CPU {out['cpu_s']:.1f} s (cleaner thread {out['cleaner_thread_cpu_s']:.1f} s); "
      f"closed segments after: {int(after)/1e6:.0f} MB; pass over cleanB (under the probe) "
      f"{b['seconds']:.2f} s; first pass (cleanW) {w['dirty_bytes']/1e6/w['seconds']:.1f} MB/s")
PYEOF
    stop_"$NAME"
    RUNNING=
}

for rep in $(seq "$REPS"); do
    if ((rep % 2)); then order="kafka lograil"; else order="lograil kafka"; fi
    for name in $order; do
        case " $BROKERS " in *" $name "*) session "$name" "$rep" ;; esac
    done
done

python3 - "$OUT" "$REPS" $BROKERS <<'PYEOF'
import json, pathlib, statistics, sys
out, reps = pathlib.Path(sys.argv[1]), int(sys.argv[2])
brokers = [b for b in ("lograil", "kafka") if b in sys.argv[3:]]
med = statistics.median
def load(broker, rep):
    return json.loads((out / f"{broker}-{rep}" / "pass.json").read_text())
def samples(path):
    with open(path) as f:
        return [tuple(map(int, line.split())) for line in f]
def p99(lat):
    lat = sorted(lat)
    return lat[min(len(lat) - 1, int(0.99 * len(lat)))] / 1000 if lat else float("nan")
def probe(broker, rep):
    """Latencies (µs) of the baseline run and of the records sent during the pass over cleanB,
    both from their 2nd second on, and of the whole second run."""
    d = out / f"{broker}-{rep}"
    warm = lambda s: [x for x in s if x[0] >= s[0][0] + 1_000_000] if s else s
    idle = warm(samples(d / "probe-idle.lat"))
    busy = warm(samples(d / "probe-cleaning.lat"))
    b = load(broker, rep)["pass_b"]
    window = [lat for sent, lat in busy if b["start_ms"] * 1000 <= sent <= b["end_ms"] * 1000]
    return [l for _, l in idle], window, [l for _, l in busy]
rows = {}
for broker in brokers:
    r = [load(broker, i) for i in range(1, reps + 1)]
    p = [probe(broker, i) for i in range(1, reps + 1)]
    gb = lambda x: x["dirty_bytes"] / 1e9
    rows[broker] = {
        "mb_s": [x["mb_per_s"] for x in r],
        "seconds": [x["pass_a"]["seconds"] for x in r],
        "dirty_mb": [x["dirty_bytes"] / 1e6 for x in r],
        "after_mb": [x["closed_bytes_after"] / 1e6 for x in r],
        "cpu_per_gb": [x["cpu_s"] / gb(x) for x in r],
        "thread_cpu_per_gb": [x["cleaner_thread_cpu_s"] / gb(x) for x in r],
        "first_mb_s": [x["warm_up"]["dirty_bytes"] / 1e6 / x["warm_up"]["seconds"] for x in r],
        "pass_b_mb_s": [x["pass_b"]["dirty_bytes"] / 1e6 / x["pass_b"]["seconds"] for x in r],
        "p99_idle": [p99(x[0]) for x in p],
        "p99_cleaning": [p99(x[1]) for x in p],
        "p99_ratio": [p99(x[1]) / p99(x[0]) for x in p],
        "window_records": [len(x[1]) for x in p],
        "p99_whole": [p99(x[2]) for x in p],
    }
    pooled_idle, pooled_busy = p99([l for x in p for l in x[0]]), p99([l for x in p for l in x[1]])
    rows[broker]["pooled"] = f"{pooled_busy:.2f} / {pooled_idle:.2f} = **{pooled_busy / pooled_idle:.2f}**"
rng = lambda xs, f: f"{med(xs):{f}} [{min(xs):{f}}-{max(xs):{f}}]"
figures = [
    ("dirty log cleaned, MB/s", "mb_s", ".1f", True),
    ("pass over cleanA, s", "seconds", ".2f", True),
    ("dirty section (closed segments before), MB", "dirty_mb", ".0f", False),
    ("closed segments after, MB", "after_mb", ".0f", False),
    ("broker CPU s per GB cleaned", "cpu_per_gb", ".2f", True),
    ("cleaner thread CPU s per GB cleaned", "thread_cpu_per_gb", ".2f", True),
    ("first pass of the broker (cleanW, 1/5 the size), MB/s", "first_mb_s", ".1f", True),
    ("pass over cleanB under the probe, MB/s", "pass_b_mb_s", ".1f", True),
    ("produce p99 without the cleaner, ms", "p99_idle", ".2f", True),
    ("produce p99 during the pass, ms", "p99_cleaning", ".2f", True),
    ("**p99 during the pass / without**", "p99_ratio", ".2f", False),
    ("records sent during the pass", "window_records", ".0f", False),
    ("p99 during the passes / without, every repetition's records together (ms)", "pooled", None, False),
    ("produce p99 over the whole probe run, ms", "p99_whole", ".2f", False),
]
both = len(brokers) == 2
print(f"\n{reps} repetitions; medians [min-max]"
      + ("; lograil / Kafka is the median of the per-repetition ratios" if both else "") + "\n")
names = {"lograil": "lograil", "kafka": "Kafka"}
print("| figure | " + " | ".join(names[b] for b in brokers) + (" | lograil / Kafka |" if both else " |"))
print("|---|" + "---|" * (len(brokers) + both))
for label, key, f, ratio in figures:
    cells = [rows[b][key] if f is None else rng(rows[b][key], f) for b in brokers]
    if key == "mb_s":
        cells = [f"**{c}**" for c in cells]
    if both:
        r = [x / y for x, y in zip(rows["lograil"][key], rows["kafka"][key])] if ratio else None
        cells.append((f"**{rng(r, '.2f')}**" if key == "mb_s" else rng(r, ".2f")) if r else "")
    print(f"| {label} | " + " | ".join(cells) + " |")
PYEOF
