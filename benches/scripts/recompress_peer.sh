#!/usr/bin/env bash
# Produce to a topic whose compression.type differs from the producer's codec (the broker
# decompresses and recompresses every batch), lograil beside a single-broker Apache Kafka
# (tests/kafka/kafka.sh, KRaft, Kafka's default durability), alternately, REPS repetitions of
# one broker session each. Every run is a lograil-bench JSON file in $OUT; the summary at the
# end prints, per workload, the median over repetitions of lograil's MB/s, Kafka's, and of the
# ratio lograil / Kafka measured in the same repetition.
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/recompress_peer.sh
#
# Workloads (1000 B records, acks=1, 6 partitions, 1 librdkafka producer; each on its own
# topic, created with Kafka's TopicCommand against both brokers):
#   lz4-zstd   producer lz4, topic compression.type=zstd (recompressed)
#   none-lz4   producer none, topic compression.type=lz4 (compressed by the broker)
#   lz4-keep   producer lz4, topic compression.type=producer (the baseline: no recompression)
#   none-keep  producer none, topic compression.type=producer (the baseline)
#
# Environment: BROKER, BENCH (binaries), OUT, DATA (broker data: default target/bench-data),
# REPS (default 3), MESSAGES (per workload, default 500000).
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
KAFKA_SH=tests/kafka/kafka.sh
OUT=${OUT:-target/bench-results/recompress-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=$(realpath -m "${DATA:-target/bench-data}")
REPS=${REPS:-3}
MESSAGES=${MESSAGES:-500000}
WORKLOADS="lz4-zstd none-lz4 lz4-keep none-keep"
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

LOGRAIL_DIR=$DATA/recompress-lograil
KAFKA_DIR=$DATA/recompress-kafka
start_lograil() {
    rm -rf "$LOGRAIL_DIR"
    mkdir -p "$LOGRAIL_DIR"
    local port
    port=$(free_port)
    "$BROKER" serve --listen "127.0.0.1:$port" --data-dir "$LOGRAIL_DIR/data" \
        >"$LOGRAIL_DIR/stdout" 2>"$LOGRAIL_DIR/stderr" &
    PID=$!
    ADDR=127.0.0.1:$port
    for _ in $(seq 600); do
        grep -q 'listening on' "$LOGRAIL_DIR/stdout" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "lograil did not start" >&2
    exit 1
}
stop_lograil() { kill "$PID"; wait "$PID" || true; rm -rf "$LOGRAIL_DIR"; }
start_kafka() {
    rm -rf "$KAFKA_DIR"
    ADDR=$("$KAFKA_SH" start "$KAFKA_DIR" --brokers 1)
    PID=$(cat "$KAFKA_DIR/node-1.pid")
}
stop_kafka() { "$KAFKA_SH" stop "$KAFKA_DIR" >/dev/null; rm -rf "$KAFKA_DIR"; }

# workload -> producer codec, topic compression.type
codec() { case $1 in lz4-*) echo lz4 ;; none-*) echo none ;; esac; }
topic_compression() { case $1 in *-zstd) echo zstd ;; *-lz4) echo lz4 ;; *-keep) echo producer ;; esac; }

session() { # NAME REP
    local name=$1 rep=$2 w
    start_"$name"
    for w in $WORKLOADS; do
        "$KAFKA_SH" tool - org.apache.kafka.tools.TopicCommand --bootstrap-server "$ADDR" \
            --create --topic "$w" --partitions 6 --replication-factor 1 \
            --config "compression.type=$(topic_compression "$w")" >/dev/null
    done
    for w in $WORKLOADS; do
        "$BENCH" produce --brokers "$ADDR" --topic "$w" --partitions 6 --message-size 1000 \
            --acks 1 --messages "$MESSAGES" -X "compression.type=$(codec "$w")" \
            --broker-pid "$PID" --label "$name" --json "$OUT/$name-$w-$rep.json" 2>&1 |
            grep -E '^(produce|broker):' | sed "s/^/$name $w #$rep: /"
    done
    stop_"$name"
}

for rep in $(seq "$REPS"); do
    if ((rep % 2)); then order="kafka lograil"; else order="lograil kafka"; fi
    for name in $order; do session "$name" "$rep"; done
done

python3 - "$OUT" "$REPS" $WORKLOADS <<'PYEOF'
import json, pathlib, statistics, sys
out, reps, workloads = pathlib.Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
def run(broker, w, rep):
    return json.loads((out / f"{broker}-{w}-{rep}.json").read_text())
def med(xs):
    return statistics.median(xs)
print("| workload | lograil MB/s | Kafka MB/s | lograil / Kafka | lograil broker CPU s/GiB | Kafka broker CPU s/GiB |")
print("|---|---|---|---|---|---|")
for w in workloads:
    l = [run("lograil", w, r)["produce"]["mb_per_s"] for r in range(1, reps + 1)]
    k = [run("kafka", w, r)["produce"]["mb_per_s"] for r in range(1, reps + 1)]
    ratios = [a / b for a, b in zip(l, k)]
    def cpu(broker):
        return med([run(broker, w, r)["broker_cost"]["cpu_s_per_gib"] for r in range(1, reps + 1)])
    rng = lambda xs: f"{med(xs):.1f} [{min(xs):.1f}-{max(xs):.1f}]"
    print(f"| {w} | {rng(l)} | {rng(k)} | **{med(ratios):.2f}** [{min(ratios):.2f}-{max(ratios):.2f}] | {cpu('lograil'):.2f} | {cpu('kafka'):.2f} |")
PYEOF
