#!/usr/bin/env bash
# The issue-5 broker figures of BENCHMARKS.md, end to end: machine limits, produce, consume and
# end-to-end runs against a fresh `lograil serve` per run, every run written as JSON into $OUT.
# Then `python3 benches/scripts/broker_table.py $OUT` prints the tables (medians, ratios).
#
#   cargo build --release -p lograil -p lograil-benches
#   bash benches/scripts/broker_bench.sh            # all steps, 3 repetitions
#   STEPS="limits produce" REPS=1 bash benches/scripts/broker_bench.sh
#
# Environment: BROKER (lograil binary), BENCH (lograil-bench binary), OUT (results folder),
# DATA (broker data folders, default target/bench-data), REPS, STEPS (any of: limits produce
# consume e2e curve), E2E_LINGERS (producer linger.ms values of the end-to-end runs), E2E_RATE
# (records/s of `e2e`; default half the median peak of the 1000 B acks=1 produce runs in
# $OUT), CURVE_RATES (records/s of `curve`, end-to-end latency against load).
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
OUT=${OUT:-target/bench-results/$(date -u +%Y%m%dT%H%M%SZ)}
DATA=${DATA:-target/bench-data}
REPS=${REPS:-3}
STEPS=${STEPS:-limits produce consume e2e curve}
E2E_LINGERS=${E2E_LINGERS:-1 5}
CURVE_RATES=${CURVE_RATES:-25000 50000 100000 175000}
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

source benches/scripts/serve.sh
start_broker() { # NAME [serve flags...]
    serve_lograil "$DATA/broker-$1" "${@:2}"
}
stop_broker() { # NAME
    kill "$BROKER_PID"
    wait "$BROKER_PID" || true
    # Keep the broker's log next to the results; drop its data.
    cp "$DATA/broker-$1/stderr" "$OUT/broker-$1.log"
    rm -rf "$DATA/broker-$1"
    settle
}
settle() {
    # Deleting GBs of files on ext4 mounted with `discard` stalls the next writer for up to
    # ~100 ms at a journal commit; sync takes that hit here, between runs.
    sync
    sleep 1
}
bench() { # NAME MODE [flags...]
    local name=$1
    shift
    echo "== $name: lograil-bench $*"
    "$BENCH" "$@" --brokers "$BROKER_ADDR" --broker-pid "$BROKER_PID" --json "$OUT/$name.json" \
        --label "$name; broker: $BROKER serve $BROKER_FLAGS" | tee "$OUT/$name.txt"
}

for rep in $(seq "$REPS"); do
    if [[ " $STEPS " == *" limits "* ]]; then
        echo "== limits-$rep"
        "$BENCH" limits --dir "$DATA" --json "$OUT/limits-$rep.json" | tee "$OUT/limits-$rep.txt"
        settle
    fi
    if [[ " $STEPS " == *" produce "* ]]; then
        # 1 producer, 6 partitions, unkeyed; acks=1 on the defaults (durability never: the OS
        # writes back), acks=-1 with fsync before every acknowledgement.
        BROKER_FLAGS=""
        start_broker "produce-1000-acks1-$rep"
        bench "produce-1000-acks1-$rep" produce --topic p --partitions 6 --message-size 1000 \
            --acks 1 --messages 2000000
        stop_broker "produce-1000-acks1-$rep"
        start_broker "produce-100-acks1-$rep"
        bench "produce-100-acks1-$rep" produce --topic p --partitions 6 --message-size 100 \
            --acks 1 --messages 10000000
        stop_broker "produce-100-acks1-$rep"
        BROKER_FLAGS="--flush-messages 1"
        start_broker "produce-1000-acksall-$rep" --flush-messages 1
        bench "produce-1000-acksall-$rep" produce --topic p --partitions 6 --message-size 1000 \
            --acks -1 --messages 1000000
        stop_broker "produce-1000-acksall-$rep"
        start_broker "produce-100-acksall-$rep" --flush-messages 1
        bench "produce-100-acksall-$rep" produce --topic p --partitions 6 --message-size 100 \
            --acks -1 --messages 5000000
        stop_broker "produce-100-acksall-$rep"
    fi
    if [[ " $STEPS " == *" consume "* ]]; then
        # Fill a topic with 1 GiB of 1000 B values, then read it all with one consumer.
        BROKER_FLAGS=""
        start_broker "consume-$rep"
        bench "fill-$rep" produce --topic c --partitions 6 --message-size 1000 --acks 1 \
            --total-bytes 1GiB
        bench "consume-1000-$rep" consume --topic c --consumers 1
        bench "consume-1000-2consumers-$rep" consume --topic c --consumers 2
        stop_broker "consume-$rep"
    fi
done

if [[ " $STEPS " == *" e2e "* ]]; then
    RATE=${E2E_RATE:-$(python3 benches/scripts/broker_table.py "$OUT" --half-peak)}
    # 6 s of records at the rate.
    MESSAGES=$(python3 -c "print(max(100000, int(float('$RATE') * 6)))")
    for rep in $(seq "$REPS"); do
        for linger in $E2E_LINGERS; do
            BROKER_FLAGS=""
            start_broker "e2e-half-peak-linger$linger-$rep"
            bench "e2e-half-peak-linger$linger-$rep" end-to-end --topic e --partitions 6 \
                --message-size 1000 --acks 1 --linger-ms "$linger" --rate "$RATE" \
                --messages "$MESSAGES"
            stop_broker "e2e-half-peak-linger$linger-$rep"
        done
    done
fi
if [[ " $STEPS " == *" curve "* ]]; then
    # End-to-end latency against load: fixed rates, 6 s each.
    for rep in $(seq "$REPS"); do
        for linger in $E2E_LINGERS; do
            for rate in $CURVE_RATES; do
                BROKER_FLAGS=""
                start_broker "e2e-rate$rate-linger$linger-$rep"
                bench "e2e-rate$rate-linger$linger-$rep" end-to-end --topic e --partitions 6 \
                    --message-size 1000 --acks 1 --linger-ms "$linger" --rate "$rate" \
                    --messages $((rate * 6))
                stop_broker "e2e-rate$rate-linger$linger-$rep"
            done
        done
    done
fi
echo "results in $OUT"
