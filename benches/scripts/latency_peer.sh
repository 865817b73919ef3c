#!/usr/bin/env bash
# Latency under load (issue 39, item 4): each broker's own maximum produce rate first (1000 B
# records, acks=1, 6 partitions, one librdkafka producer, as fast as it goes), then end-to-end
# latency open loop at 25, 50, 75 and 90 % of that rate: records are sent on a fixed schedule
# and each one's latency counts from its intended send time, so a stall is not hidden by the
# sends it delayed (coordinated omission); the histogram is HdrHistogram's (lograil-bench).
# lograil and a one-broker Apache Kafka 4.4 (tests/kafka/kafka.sh, its defaults) in one run, a
# fresh broker for each.
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/latency_peer.sh          # ~5 min
#
# Prints one line per broker and load: `name load% rate_records_s p50_ms p99_ms p99.9_ms
# consumed_of_sent`. Environment: BROKER, BENCH, DATA (default target/bench-data), BROKERS
# ("lograil kafka"), SECONDS_PER_LOAD (measured seconds per load, default 8, after 2 s of
# warm-up), LOADS ("25 50 75 90"), PEAK (records/s to take the loads of, in place of each
# broker's measured maximum: e.g. the other broker's, to compare at the same rates).
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
DATA=$(realpath -m "${DATA:-target/bench-data}")
BROKERS=${BROKERS:-lograil kafka}
SECONDS_PER_LOAD=${SECONDS_PER_LOAD:-8}
LOADS=${LOADS:-25 50 75 90}
# shellcheck source=benches/scripts/serve.sh
source benches/scripts/serve.sh
mkdir -p "$DATA"
json=$DATA/latency.json

field() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$json" "$1"; }

measure() {
    local name=$1 addr=$2 peak rate load
    if [ -n "${PEAK:-}" ]; then
        peak=$PEAK
    else
        "$BENCH" produce --brokers "$addr" --topic peak --partitions 6 --message-size 1000 \
            --acks 1 --messages 1000000 --json "$json" >/dev/null 2>&1
        peak=$(field "int(r['produce']['records_per_s'])")
    fi
    echo "$name max $peak"
    for load in $LOADS; do
        rate=$((peak * load / 100))
        "$BENCH" end-to-end --brokers "$addr" --topic "e$load" --partitions 6 --message-size 1000 \
            --acks 1 --linger-ms 1 --rate "$rate" --messages $((rate * (SECONDS_PER_LOAD + 2))) \
            --warmup-ms 2000 --timeout-secs 120 --json "$json" >/dev/null 2>&1 ||
            { echo "$name $load% $rate failed"; continue; }
        echo "$name $load% $rate $(field "' '.join('%.2f' % (r['consume']['end_to_end_latency'][k] / 1000) for k in ('p50_us', 'p99_us', 'p99_9_us'))") $(field "'%d/%d' % (r['consume']['records'], r['produce']['records_acked'])")"
    done
}

on_each_broker latency measure
