#!/usr/bin/env bash
# lograil side by side with Apache Kafka (issue 13): the same workloads against a single-broker
# Kafka (KRaft, 1 GiB heap, Kafka's default durability: page cache, no fsync per write; started
# by tests/kafka/kafka.sh) and against `lograil serve` on its defaults (also page cache),
# alternately, REPS repetitions; every run is written as JSON or text into $OUT, and
#   python3 benches/scripts/peer_table.py $OUT
# prints the table of medians and ratios lograil / Kafka.
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/peer_kafka.sh                  # every step, 3 repetitions
#   STEPS="produce consume" REPS=1 bash benches/scripts/peer_kafka.sh
#
# Steps (each against both brokers, in one broker session per repetition except `restart`):
#   produce  1000 B records, acks=1, 6 partitions, 1 producer (lograil-bench, librdkafka)
#   consume  that topic (~1 GiB) from the start, 6 partitions, 1 consumer
#   idem     100 B records, acks=all, enable.idempotence=true, 6 partitions
#   e2e      end-to-end latency, open loop at half of Kafka's median peak of `produce`
#   e2eall   the same with acks=all, 12 s of which the first 2 are not measured (not in the
#            default STEPS; the start-up of librdkafka's producer would otherwise count as
#            latency in an open-loop run)
#   wide     1000 B records to 1,000 partitions (compared with `produce`'s 6)
#   tools    Kafka's own ProducerPerformance and ConsumerPerformance (kafka-tools jar)
#   restart  RESTART_BYTES in 100 partitions, clean stop, start: time until a client's first
#            fetch is served (benches/scripts/first_fetch.py)
# The broker's memory is recorded over each session: its peak RSS (VmHWM), and, sampled every
# 0.5 s, the peak and mean of VmRSS and the peak of its anonymous memory (RssAnon); CPU seconds
# come from lograil-bench's --broker-pid.
#
# Environment: BROKER, BENCH (binaries), OUT, DATA (broker data, on disk: default
# target/bench-data), REPS, STEPS, RESTART_BYTES (default 10GiB), MESSAGES (records of
# `produce`, default 1100000: ~1 GiB), E2E_RATE (records/s; default half of Kafka's peak),
# BASELINE (another lograil binary, e.g. of the commit before a change: run as a third broker,
# `baseline`, in the same rotation, so peer_table.py can put before and after side by side),
# BASELINE_ARGS (flags for the baseline broker, e.g. "--write-caching true"; without BASELINE,
# the baseline is this build with these flags), LOGRAIL_ARGS (flags for lograil),
# NAMES (the brokers to run, default "kafka lograil", plus baseline with BASELINE; without kafka,
# set E2E_RATE).
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
KAFKA_SH=tests/kafka/kafka.sh
OUT=${OUT:-target/bench-results/peer-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=$(realpath -m "${DATA:-target/bench-data}")
REPS=${REPS:-3}
STEPS=${STEPS:-produce consume idem e2e wide tools restart}
RESTART_BYTES=${RESTART_BYTES:-10GiB}
MESSAGES=${MESSAGES:-1100000}
E2E_RATE=${E2E_RATE:-}
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"
has_step() { [[ " $STEPS " == *" $1 "* ]]; }

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Broker sessions. start_NAME sets ADDR and PID; stop_NAME stops it (data kept for a restart);
# wipe_NAME deletes its data.
LOGRAIL_DIR=$DATA/peer-lograil
KAFKA_DIR=$DATA/peer-kafka
start_lograil() {
    mkdir -p "$LOGRAIL_DIR"
    LOGRAIL_PORT=${LOGRAIL_PORT:-$(free_port)}
    # shellcheck disable=SC2086 # LOGRAIL_ARGS is a list of flags
    "$BROKER" serve --listen "127.0.0.1:$LOGRAIL_PORT" --data-dir "$LOGRAIL_DIR/data" \
        ${LOGRAIL_ARGS:-} >>"$LOGRAIL_DIR/stdout" 2>>"$LOGRAIL_DIR/stderr" &
    PID=$!
    ADDR=127.0.0.1:$LOGRAIL_PORT
}
restart_lograil() { start_lograil; }
wait_lograil() {
    for _ in $(seq 600); do
        grep -q 'listening on' "$LOGRAIL_DIR/stdout" 2>/dev/null && return 0
        sleep 0.05
    done
    echo "lograil did not start" >&2
    cat "$LOGRAIL_DIR/stderr" >&2
    exit 1
}
stop_lograil() {
    kill "$PID"
    wait "$PID" || true
    : >"$LOGRAIL_DIR/stdout"
}
wipe_lograil() { rm -rf "$LOGRAIL_DIR"; LOGRAIL_PORT=; sync; }
start_kafka() {
    ADDR=$("$KAFKA_SH" start "$KAFKA_DIR" --brokers 1)
    PID=$(cat "$KAFKA_DIR/node-1.pid")
}
restart_kafka() {
    "$KAFKA_SH" restart "$KAFKA_DIR" 1 >/dev/null
    PID=$(cat "$KAFKA_DIR/node-1.pid")
}
BASELINE_ARGS=${BASELINE_ARGS:-}
BASELINE=${BASELINE:-${BASELINE_ARGS:+$BROKER}}
BASELINE_DIR=$DATA/peer-baseline
start_baseline() {
    # shellcheck disable=SC2086 # BASELINE_ARGS is a list of flags
    BROKER=$BASELINE LOGRAIL_DIR=$BASELINE_DIR LOGRAIL_ARGS="$BASELINE_ARGS" start_lograil
}
restart_baseline() { start_baseline; }
wait_baseline() { LOGRAIL_DIR=$BASELINE_DIR wait_lograil; }
stop_baseline() { LOGRAIL_DIR=$BASELINE_DIR stop_lograil; }
wipe_baseline() { LOGRAIL_DIR=$BASELINE_DIR wipe_lograil; }
wait_kafka() { :; }
stop_kafka() { "$KAFKA_SH" stop "$KAFKA_DIR" >/dev/null; }
wipe_kafka() { rm -rf "$KAFKA_DIR"; sync; }

# Peak VmHWM, peak and mean VmRSS, peak RssAnon (kB) of $1, every 0.5 s while it lives, into $2.
sample_rss() {
    local pid=$1 out=$2 hwm=0 anon=0 rss=0 sum=0 n=0 h a r
    while [[ -r /proc/$pid/status ]]; do
        read -r h a r < <(awk '/^VmHWM:/{h=$2} /^RssAnon:/{a=$2} /^VmRSS:/{r=$2} END{print h+0, a+0, r+0}' "/proc/$pid/status" 2>/dev/null || echo "0 0 0")
        ((h > hwm)) && hwm=$h
        ((a > anon)) && anon=$a
        ((r > rss)) && rss=$r
        ((r > 0)) && sum=$((sum + r)) && n=$((n + 1))
        echo "vm_hwm_kb=$hwm rss_anon_peak_kb=$anon vm_rss_peak_kb=$rss vm_rss_mean_kb=$((n ? sum / n : 0))" >"$out"
        sleep 0.5
    done
}

bench() { # NAME REP STEP ARGS...: lograil-bench run, JSON into $OUT, its summary lines shown
    local name=$1 rep=$2 step=$3
    shift 3
    "$BENCH" "$@" --brokers "$ADDR" --broker-pid "$PID" --label "$name" \
        --json "$OUT/$name-$step-$rep.json" 2>&1 |
        grep -E '^(produce|consume|end-to-end|broker):' | sed "s/^/$name $step #$rep: /"
}

kafka_peak() { # half the median records/s of Kafka's `produce` runs so far
    python3 - "$OUT" <<'EOF'
import json, pathlib, statistics, sys
rates = [json.loads(p.read_text())["produce"]["records_per_s"]
         for p in pathlib.Path(sys.argv[1]).glob("kafka-produce-*.json")]
print(int(statistics.median(rates) / 2) if rates else 100000)
EOF
}

tool() { "$KAFKA_SH" tool - "$@"; }

session() { # NAME REP: one broker session with every step but restart
    local name=$1 rep=$2
    wipe_"$name"
    start_"$name"
    wait_"$name"
    sample_rss "$PID" "$OUT/$name-rss-$rep.txt" &
    local sampler=$!
    if has_step produce; then
        bench "$name" "$rep" produce produce --topic p --partitions 6 --message-size 1000 \
            --acks 1 --messages "$MESSAGES"
    fi
    if has_step consume; then
        bench "$name" "$rep" consume consume --topic p --partitions 6
    fi
    if has_step idem; then
        bench "$name" "$rep" idem produce --topic i --partitions 6 --message-size 100 \
            --acks -1 -X enable.idempotence=true --messages $((MESSAGES * 3))
    fi
    if has_step e2e; then
        local rate=${E2E_RATE:-$(kafka_peak)}
        bench "$name" "$rep" e2e end-to-end --topic e --partitions 6 --message-size 1000 \
            --acks 1 --linger-ms 1 --rate "$rate" --messages $((rate * 10))
    fi
    if has_step e2eall; then
        local rate=${E2E_RATE:-$(kafka_peak)}
        bench "$name" "$rep" e2eall end-to-end --topic ea --partitions 6 --message-size 1000 \
            --acks -1 --linger-ms 1 --rate "$rate" --messages $((rate * 12)) --warmup-ms 2000
    fi
    if has_step wide; then
        bench "$name" "$rep" wide produce --topic w --partitions 1000 --message-size 1000 \
            --acks 1 --messages "$MESSAGES"
    fi
    if has_step tools; then
        tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$ADDR" --create \
            --topic t --partitions 6 --replication-factor 1 >/dev/null
        tool org.apache.kafka.tools.ProducerPerformance --topic t --num-records "$MESSAGES" \
            --record-size 1000 --throughput -1 \
            --producer-props bootstrap.servers="$ADDR" acks=1 2>&1 |
            tail -1 | tee "$OUT/$name-producer-perf-$rep.txt" | sed "s/^/$name ProducerPerformance #$rep: /"
        tool org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$ADDR" --topic t \
            --messages "$MESSAGES" --timeout 60000 2>&1 |
            tail -1 | tee "$OUT/$name-consumer-perf-$rep.txt" | sed "s/^/$name ConsumerPerformance #$rep: /"
    fi
    stop_"$name"
    wait "$sampler" || true
    sed "s/^/$name rss #$rep: /" "$OUT/$name-rss-$rep.txt"
    wipe_"$name"
}

restart() { # NAME REP: fill, stop cleanly, start; time until the first fetch is served
    local name=$1 rep=$2
    wipe_"$name"
    start_"$name"
    wait_"$name"
    "$BENCH" produce --brokers "$ADDR" --topic r --partitions 100 --message-size 1000 \
        --keys 1000 --acks 1 --total-bytes "$RESTART_BYTES" --timeout-secs 1200 2>&1 |
        grep -E '^produce:' | sed "s/^/$name restart fill #$rep: /"
    stop_"$name"
    sync
    python3 benches/scripts/first_fetch.py "$ADDR" r 100 300 >"$OUT/$name-restart-$rep.txt" &
    local poller=$!
    restart_"$name"
    wait "$poller" || echo "first_fetch_s=nan" >"$OUT/$name-restart-$rep.txt"
    sed "s/^/$name restart #$rep: /" "$OUT/$name-restart-$rep.txt"
    wait_"$name"
    stop_"$name"
    wipe_"$name"
}

"$BENCH" limits --dir "$DATA" --json "$OUT/limits.json" 2>&1 | tail -8
read -ra names <<<"${NAMES:-kafka lograil${BASELINE:+ baseline}}"
for rep in $(seq "$REPS"); do
    # Kafka first in the first repetition (the end-to-end rate is half its peak), then the
    # order rotates by one each repetition (alternating, with two brokers).
    order=""
    for i in "${!names[@]}"; do order+=" ${names[(i + rep - 1) % ${#names[@]}]}"; done
    for name in $order; do session "$name" "$rep"; done
    if has_step restart; then
        for name in $order; do restart "$name" "$rep"; done
    fi
done
python3 benches/scripts/peer_table.py "$OUT"
