#!/usr/bin/env bash
# Issue 27's load spike for share groups: `lograil-bench share-spike` (share-group workers of
# fixed capacity, open-loop load at 80 % of it, a 2x spike for 5 s, then 80 % again; each record
# carries its deadline in the `deadline` header and a client resubmits a task once when it was
# not completed by its deadline; useful = completed within the deadline) against a fresh
# `lograil serve`:
#   1. fifo-nohdr: no bound, the deadline not in a header (the broker cannot drop expired
#      records: the seed's "FIFO, retries"),
#   2. fifo:       no bound, deadline header (lograil archives expired records instead of
#      delivering them: the seed's "drop expired"),
#   3. quota:      a producer quota on the load's client id: producer_byte_rate = QUOTA_SHARE %
#      of the capacity measured by run 2, in the bytes a record took in run 2's log (2 s quota
#      window, as spike.sh),
#   4. overload:   the share group's overload mode (lograil.share.overload.target.ms =
#      OVERLOAD_TARGET_MS, interval OVERLOAD_INTERVAL_MS): newest first, expired archived,
#   5. throttle:   a backlog bound on the topic for the share group (its position the
#      share-partition start offset): max age BACKLOG_AGE_MS, throttle mode,
#   6. reject:     the same bound in reject mode.
# Writes one JSON and text per run, share_spike.svg (goodput over time) and table.md
# (share_spike_table.py) into $OUT.
#
#   cargo build --release -p lograil -p lograil-benches
#   bash benches/scripts/share_spike.sh
#
# Environment: BROKER, BENCH, OUT, DATA, CAPACITY (records/s the workers complete; default
# 5000), WORKERS (default 4), SIZE (record bytes, default 200), DEADLINE_MS (default 2000),
# BACKLOG_AGE_MS (default 500), QUOTA_SHARE (percent, default 90), OVERLOAD_TARGET_MS (default
# 500), OVERLOAD_INTERVAL_MS (default 1000), RUNS (default "fifo-nohdr fifo quota
# overload throttle reject"), PHASES (default "--before-secs 10 --spike-secs 5 --after-secs 20").
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
OUT=${OUT:-target/bench-results/share-spike-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=$(realpath -m "${DATA:-target/bench-data}")
CAPACITY=${CAPACITY:-5000}
WORKERS=${WORKERS:-4}
SIZE=${SIZE:-200}
DEADLINE_MS=${DEADLINE_MS:-2000}
BACKLOG_AGE_MS=${BACKLOG_AGE_MS:-500}
QUOTA_SHARE=${QUOTA_SHARE:-90}
OVERLOAD_TARGET_MS=${OVERLOAD_TARGET_MS:-500}
OVERLOAD_INTERVAL_MS=${OVERLOAD_INTERVAL_MS:-1000}
RUNS=${RUNS:-fifo-nohdr fifo quota overload throttle reject}
PHASES=${PHASES:---before-secs 10 --spike-secs 5 --after-secs 20}
GROUP=lograil-share-spike
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

source benches/scripts/serve.sh
start() { # serve flags...
    DIR=$(mktemp -d "$DATA/share-spike-XXXX")
    serve_lograil "$DIR" "$@"
}
stop() {
    kill "$BROKER_PID"
    wait "$BROKER_PID" || true
    rm -rf "$DIR"
}
spike() { # LABEL NAME [share-spike flags...]
    local label=$1 name=$2
    shift 2
    # shellcheck disable=SC2086
    if "$BENCH" share-spike --brokers "$BROKER_ADDR" --group "$GROUP" --workers "$WORKERS" \
        --capacity "$CAPACITY" --message-size "$SIZE" --deadline-ms "$DEADLINE_MS" $PHASES \
        --label "$label" --json "$OUT/$name.json" "$@" >"$OUT/$name.txt" 2>"$OUT/$name.err"; then
        tail -1 "$OUT/$name.txt"
        PLOTTED+=("$OUT/$name.json")
    else
        echo "$name failed:" >&2
        tail -3 "$OUT/$name.err" >&2
    fi
}
# Bytes per record in the spike topic's log (record batches as the producer sent them, headers
# included), over the records the run's JSON counts as acknowledged.
log_bytes_per_record() { # JSON
    local bytes acked
    bytes=$(find "$DIR/data" -path '*lograil-spike-[0-9]*' -name '*.log' -printf '%s\n' |
        awk '{s += $1} END {print s + 0}')
    acked=$(python3 -c 'import json,sys; print(sum(s["acked"] for s in json.load(open(sys.argv[1]))["seconds"]))' "$1")
    echo $((bytes / (acked > 0 ? acked : 1)))
}
bound() { # MODE: the topic with a backlog bound for the share group
    "$BROKER" topic create --bootstrap-server "$BROKER_ADDR" lograil-spike --partitions 6 \
        --config lograil.backlog.group="$GROUP" \
        --config lograil.backlog.max.age.ms="$BACKLOG_AGE_MS" \
        --config lograil.backlog.mode="$1" >/dev/null
}

PLOTTED=()
for run in $RUNS; do
    case $run in
    fifo-nohdr)
        start
        spike "no bound, no deadline header" fifo-nohdr --no-deadline-header
        stop
        ;;
    fifo)
        start
        spike "no bound (expired archived)" fifo
        [ -f "$OUT/fifo.json" ] && log_bytes_per_record "$OUT/fifo.json" >"$OUT/fifo.bytes"
        stop
        ;;
    quota)
        # The quota is QUOTA_SHARE % of what run fifo measured: its calibrated capacity times
        # the bytes a record took in its log (batch overhead and the deadline header included,
        # which is what a quota counts); without that run, --capacity and SIZE.
        measured=$CAPACITY record_bytes=$SIZE
        if [ -f "$OUT/fifo.json" ] && [ -f "$OUT/fifo.bytes" ]; then
            measured=$(python3 -c 'import json,sys; print(int(json.load(open(sys.argv[1]))["measured_capacity"]))' "$OUT/fifo.json")
            record_bytes=$(cat "$OUT/fifo.bytes")
        fi
        echo "quota from: capacity $measured records/s, $record_bytes B per record"
        rate=$((measured * record_bytes * QUOTA_SHARE / 100))
        start --quota-window-num 2 --quota-window-size-seconds 1
        "$BROKER" quota set --bootstrap-server "$BROKER_ADDR" --client-id lograil-spike \
            --producer-byte-rate "$rate" >/dev/null
        spike "producer quota $rate B/s" quota
        stop
        ;;
    throttle | reject)
        start
        bound "$run"
        spike "backlog bound ${BACKLOG_AGE_MS} ms, $run" "backlog-$run"
        stop
        ;;
    overload)
        start
        spike "overload mode ${OVERLOAD_TARGET_MS} ms / ${OVERLOAD_INTERVAL_MS} ms" overload \
            --group-config lograil.share.overload.target.ms="$OVERLOAD_TARGET_MS" \
            --group-config lograil.share.overload.interval.ms="$OVERLOAD_INTERVAL_MS"
        stop
        ;;
    *)
        echo "unknown run $run" >&2
        exit 2
        ;;
    esac
done
if [ ${#PLOTTED[@]} -gt 0 ]; then
    "$BENCH" spike-plot "$OUT/share_spike.svg" "${PLOTTED[@]}"
    echo "plot: $OUT/share_spike.svg"
fi
python3 benches/scripts/share_spike_table.py "$OUT" | tee "$OUT/table.md"
