#!/usr/bin/env bash
# lograil's own client (`--client lograil`) beside librdkafka (`--client rdkafka`) on the same
# broker with the same harness: produce 1000 B acks=1 to 6 partitions, consume it back, and an
# open-loop end-to-end run at a fixed rate. Each client with its own defaults, then both at the
# same batch.size. A fresh `lograil serve` per (client, repetition); clients alternate so drift
# on a shared machine hits both. Every run is written as JSON into $OUT;
# `python3 benches/scripts/client_table.py $OUT` prints the medians.
#
#   cargo build --release -p lograil -p lograil-benches
#   bash benches/scripts/client_bench.sh
#
# Environment: BROKER, BENCH, OUT, DATA, REPS (3), MESSAGES (1000000), E2E_RATE (100000).
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
OUT=${OUT:-target/bench-results/clients-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=${DATA:-target/bench-data}
REPS=${REPS:-3}
MESSAGES=${MESSAGES:-1000000}
E2E_RATE=${E2E_RATE:-100000}
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

source benches/scripts/serve.sh
start_broker() { # NAME
    serve_lograil "$DATA/broker-$1" "${@:2}"
}
stop_broker() { # NAME
    kill "$BROKER_PID"
    wait "$BROKER_PID" || true
    rm -rf "$DATA/broker-$1"
    sync
    sleep 1
}
bench() { # NAME MODE [flags...]
    local name=$1
    shift
    echo "== $name: lograil-bench $*"
    "$BENCH" "$@" --brokers "$BROKER_ADDR" --broker-pid "$BROKER_PID" --json "$OUT/$name.json" \
        --label "$name" | tee "$OUT/$name.txt"
}

for rep in $(seq "$REPS"); do
    for variant in defaults batch256k; do
        extra=()
        [[ $variant == batch256k ]] && extra=(--batch-size 262144)
        for client in rdkafka lograil; do
            name="$client-$variant-$rep"
            start_broker "$name"
            bench "produce-$name" produce --client "$client" --topic p --partitions 6 \
                --message-size 1000 --acks 1 --messages "$MESSAGES" "${extra[@]}"
            if [[ $variant == defaults ]]; then
                bench "consume-$name" consume --client "$client" --topic p
                bench "e2e-$name" end-to-end --client "$client" --topic e --partitions 6 \
                    --message-size 1000 --acks 1 --rate "$E2E_RATE" --messages $((E2E_RATE * 6))
            fi
            stop_broker "$name"
        done
    done
done
