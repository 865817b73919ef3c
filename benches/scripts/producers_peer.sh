#!/usr/bin/env bash
# 1,000 active producers (issue 39, item 2): a thousand producer connections to one broker,
# each lograil's client (`lograil-bench produce --client lograil --shared-runtime`: all of them
# tasks of one tokio runtime of TOKIO_WORKERS threads, so the harness costs a thousand
# connections, not a thousand threads). 100 B records, acks=1, 6 partitions, the client's
# defaults (linger.ms 5). First closed loop (as fast as the producers go: the throughput; it
# also warms the broker up, Kafka's JIT included), then open loop at each total rate of RATES,
# split evenly among the producers (at these rates nearly every record is a produce request of
# its own), each record's delivery latency from its intended send time (no coordinated
# omission). lograil (its per-address cap raised past the thousand connections) and a
# one-broker Apache Kafka 4.4 (tests/kafka/kafka.sh, its defaults) in one run, a fresh broker
# for each.
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/producers_peer.sh          # ~4 min
#
# Prints one line per broker and run: `name max|rate records_s p50_ms p99_ms p99.9_ms
# broker_cores harness_cores`. Environment: BROKER, BENCH, DATA (default target/bench-data),
# BROKERS ("lograil kafka"), PRODUCERS (1000), RATES ("10000 25000 50000"), MEASURE_S (measured
# seconds per rate, default 8, after 2 s of warm-up), TOKIO_WORKERS (1), MAX_RECORDS (records
# of the closed-loop run, default 1000000).
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
DATA=$(realpath -m "${DATA:-target/bench-data}")
BROKERS=${BROKERS:-lograil kafka}
PRODUCERS=${PRODUCERS:-1000}
RATES=${RATES:-10000 25000 50000}
MEASURE_S=${MEASURE_S:-8}
TOKIO_WORKERS=${TOKIO_WORKERS:-1}
MAX_RECORDS=${MAX_RECORDS:-1000000}
# shellcheck source=benches/scripts/serve.sh
source benches/scripts/serve.sh
mkdir -p "$DATA"
json=$DATA/producers.json

field() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$json" "$1"; }
figures() {
    field "'%d %s %.2f %.2f' % (r['produce']['records_per_s'], ' '.join('%.2f' % (r['produce']['delivery_latency'][k] / 1000) for k in ('p50_us', 'p99_us', 'p99_9_us')), r['broker_cost']['cores_busy'], r['client_cost']['cores_busy'])"
}

measure() {
    local name=$1 addr=$2 pid=$3 rate
    local run=("$BENCH" produce --client lograil --shared-runtime --tokio-workers "$TOKIO_WORKERS"
        --producers "$PRODUCERS" --brokers "$addr" --broker-pid "$pid" --partitions 6
        --message-size 100 --acks 1 --timeout-secs 120 --json "$json")
    "${run[@]}" --topic max --messages "$MAX_RECORDS" >/dev/null 2>&1 || { echo "$name max failed"; return; }
    echo "$name max $(figures)"
    for rate in $RATES; do
        "${run[@]}" --topic "r$rate" --rate "$rate" --messages $((rate * (MEASURE_S + 2))) \
            --warmup-ms 2000 >/dev/null 2>&1 || { echo "$name $rate failed"; continue; }
        echo "$name $rate $(figures)"
    done
}

# lograil allows 1,000 connections per client address by default; the producers need more.
LOGRAIL_FLAGS="--max-connections-per-ip $((PRODUCERS * 3 + 100))"
on_each_broker producers measure
