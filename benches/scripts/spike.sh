#!/usr/bin/env bash
# Issue 14's load spike, three ways: `lograil-bench spike` (a consumer group of fixed capacity,
# open-loop load at 80 % of it, a 2x spike for 5 s, then 80 % again; useful = completed within
# the deadline) against a fresh `lograil serve` with
#   1. no bound,
#   2. a producer quota on the load's client id, from figures the first run measured rather than
#      assumed: producer_byte_rate = QUOTA_SHARE of the consumers' capacity as run 1 measured it
#      (its calibration), in the bytes a record took in run 1's log (batch overhead included,
#      what the quota counts); the broker started with a 2 s quota window, so the quota bites
#      within the spike rather than after Kafka's 11 s window of burst,
#   3. a backlog bound on the topic for the consumer group: max age BACKLOG_AGE_MS, throttle mode
#      (the throttle sized from the group's measured drain rate),
#   4. the same bound in reject mode.
# Writes one JSON per run and spike.svg (goodput over time, the four runs) into $OUT.
#
#   cargo build --release -p lograil -p lograil-benches
#   bash benches/scripts/spike.sh
#
# Environment: BROKER, BENCH, OUT, DATA, CAPACITY (records/s the consumers complete; default
# 10000), SIZE (record bytes, default 200), DEADLINE_MS (default 2000), BACKLOG_AGE_MS (default
# 500), QUOTA_SHARE (percent of the measured capacity, default 90), PHASES (default "--before-secs 15 --spike-secs 5 --after-secs 30").
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
OUT=${OUT:-target/bench-results/spike-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=$(realpath -m "${DATA:-target/bench-data}")
CAPACITY=${CAPACITY:-10000}
SIZE=${SIZE:-200}
DEADLINE_MS=${DEADLINE_MS:-2000}
BACKLOG_AGE_MS=${BACKLOG_AGE_MS:-500}
QUOTA_SHARE=${QUOTA_SHARE:-90}
PHASES=${PHASES:---before-secs 15 --spike-secs 5 --after-secs 30}
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

source benches/scripts/serve.sh
start() { # serve flags...
    DIR=$(mktemp -d "$DATA/spike-XXXX")
    serve_lograil "$DIR" "$@"
}
stop() {
    kill "$BROKER_PID"
    wait "$BROKER_PID" || true
    rm -rf "$DIR"
}
# Bytes per record in the spike topic's log (record batches as the producer sent them), over the
# records the run's JSON counts as acknowledged.
log_bytes_per_record() { # JSON
    local bytes acked
    bytes=$(find "$DIR/data" -path '*lograil-spike-[0-9]*' -name '*.log' -printf '%s\n' |
        awk '{s += $1} END {print s + 0}')
    acked=$(jq '[.seconds[].acked] | add' "$1")
    echo $((bytes / (acked > 0 ? acked : 1)))
}
spike() { # LABEL NAME [spike flags...]
    local label=$1 name=$2
    shift 2
    # shellcheck disable=SC2086
    "$BENCH" spike --brokers "$BROKER_ADDR" --capacity "$CAPACITY" --message-size "$SIZE" \
        --deadline-ms "$DEADLINE_MS" $PHASES --label "$label" --json "$OUT/$name.json" "$@" |
        tee "$OUT/$name.txt" | tail -1
}

start
spike "no bound" none
record_bytes=$(log_bytes_per_record "$OUT/none.json")
stop
measured=$(jq '.measured_capacity | floor' "$OUT/none.json")
echo "run 1 measured: capacity $measured records/s, $record_bytes B per record in the log"

start --quota-window-num 2 --quota-window-size-seconds 1
rate=$((measured * record_bytes * QUOTA_SHARE / 100))
"$BROKER" quota set --bootstrap-server "$BROKER_ADDR" --client-id lograil-spike \
    --producer-byte-rate "$rate" >/dev/null
spike "producer quota $rate B/s" quota
stop

for mode in throttle reject; do
    start
    "$BROKER" topic create --bootstrap-server "$BROKER_ADDR" lograil-spike --partitions 6 \
        --config lograil.backlog.group=lograil-spike \
        --config lograil.backlog.max.age.ms="$BACKLOG_AGE_MS" \
        --config lograil.backlog.mode="$mode" >/dev/null
    spike "backlog bound ${BACKLOG_AGE_MS} ms, $mode" "backlog-$mode"
    stop
done
"$BENCH" spike-plot "$OUT/spike.svg" "$OUT"/none.json "$OUT"/quota.json \
    "$OUT"/backlog-throttle.json "$OUT"/backlog-reject.json
echo "plot: $OUT/spike.svg"
