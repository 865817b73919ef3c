#!/usr/bin/env bash
# Transactions, lograil beside a single-broker Apache Kafka 4.4 (tests/kafka/kafka.sh, KRaft,
# Kafka's defaults), alternately, REPS repetitions of one fresh broker session each, the same
# workloads to both (lograil-bench, librdkafka, `--transaction-ms`: a transactional.id per
# producer, init_transactions before the run, a commit every TXN_MS, acks=all as transactions
# need):
#
#   tp   throughput: MESSAGES records of 1000 B to 6 partitions as fast as one transactional
#        producer sends them (linger.ms 5), a transaction per TXN_MS; records/s from the first
#        send to the last commit;
#   e2e  end-to-end read_committed latency: an open-loop transactional producer at E2E_RATE
#        records/s (linger.ms 1) for E2E_SECONDS, a transaction per TXN_MS, and a read_committed
#        consumer; latency from each record's intended send time to its consumption, so the
#        wait for the commit (and the commit's own time, which blocks the producer) counts.
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/txn_peer.sh        # ~1 min a repetition; prints the table
#
# Environment: BROKER, BENCH (binaries), OUT (results: default
# target/bench-results/txn-<time>), DATA (broker data: default target/bench-data), REPS (3),
# MESSAGES (500000), TXN_MS (100), E2E_RATE (5000), E2E_SECONDS (20), BROKERS (default
# "kafka lograil"). Each run's lograil-bench JSON is kept in $OUT/<broker>-<step>-<rep>.json.
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
KAFKA_SH=tests/kafka/kafka.sh
OUT=$(realpath -m "${OUT:-target/bench-results/txn-$(date -u +%Y%m%dT%H%M%SZ)}")
DATA=$(realpath -m "${DATA:-target/bench-data}")
REPS=${REPS:-3}
MESSAGES=${MESSAGES:-500000}
TXN_MS=${TXN_MS:-100}
E2E_RATE=${E2E_RATE:-5000}
E2E_SECONDS=${E2E_SECONDS:-20}
BROKERS=${BROKERS:-kafka lograil}
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

LOGRAIL_DIR=$DATA/txn-lograil
KAFKA_DIR=$DATA/txn-kafka
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
    cat "$LOGRAIL_DIR/stderr" >&2
    exit 1
}
stop_lograil() {
    kill "$PID"
    wait "$PID" || true
    grep -E 'ERROR|WARN' "$LOGRAIL_DIR/stderr" >"$OUT/lograil-warnings-$REP.log" || true
    rm -rf "$LOGRAIL_DIR"
}
start_kafka() {
    rm -rf "$KAFKA_DIR"
    ADDR=$("$KAFKA_SH" start "$KAFKA_DIR" --brokers 1)
    PID=$(cat "$KAFKA_DIR/node-1.pid")
}
stop_kafka() {
    "$KAFKA_SH" stop "$KAFKA_DIR" >/dev/null
    rm -rf "$KAFKA_DIR"
}

bench() { # NAME STEP MODE ARGS...
    local name=$1 step=$2 mode=$3
    shift 3
    "$BENCH" "$mode" --brokers "$ADDR" --broker-pid "$PID" --label "$name" \
        --transaction-ms "$TXN_MS" --acks -1 --message-size 1000 --partitions 6 \
        --json "$OUT/$name-$step-$REP.json" "$@" 2>&1 |
        grep -E '^(produce|consume|end-to-end|broker):|^Error' | sed "s/^/$name $step #$REP: /"
}

for REP in $(seq "$REPS"); do
    for name in $BROKERS; do
        start_"$name"
        # A short warm-up (Kafka's JIT, both brokers' transaction state topics created).
        "$BENCH" produce --brokers "$ADDR" --topic warm --partitions 6 --message-size 1000 \
            --acks -1 --transaction-ms "$TXN_MS" --messages 50000 >/dev/null 2>&1 || true
        bench "$name" tp produce --topic tp --messages "$MESSAGES"
        bench "$name" e2e end-to-end --topic e2e --linger-ms 1 --rate "$E2E_RATE" \
            --messages $((E2E_RATE * E2E_SECONDS))
        stop_"$name"
    done
done

python3 - "$OUT" <<'PYEOF'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
def runs(name, step):
    return [json.loads(p.read_text()) for p in sorted(out.glob(f"{name}-{step}-*.json"))]
rows = {}
for name in ("kafka", "lograil"):
    tp = [r["produce"]["records_per_s"] for r in runs(name, "tp")]
    e2e = [r["consume"]["end_to_end_latency"]["p99_us"] / 1000 for r in runs(name, "e2e")
           if r.get("consume") and r["consume"].get("end_to_end_latency")]
    if tp or e2e:
        rows[name] = (tp, e2e)
med = lambda xs: statistics.median(xs) if xs else float("nan")
print(f"{'broker':8} {'txn produce records/s (median; runs)':44} {'e2e read_committed p99 ms (median; runs)'}")
for name, (tp, e2e) in rows.items():
    print(f"{name:8} {med(tp):>10.0f} ({', '.join(f'{x:.0f}' for x in tp)}){'':8} "
          f"{med(e2e):>8.1f} ({', '.join(f'{x:.1f}' for x in e2e)})")
if "kafka" in rows and "lograil" in rows:
    k, l = rows["kafka"], rows["lograil"]
    print(f"lograil / Kafka: throughput {med(l[0]) / med(k[0]):.2f}x, e2e p99 {med(l[1]) / med(k[1]):.2f}x")
PYEOF
