#!/usr/bin/env bash
# Consumers until the machine is the limit (issue 39, item 3): 1, 2, 4 and 8 consumer processes,
# each reading the same whole topic (MESSAGES records of 1000 B in 6 partitions, written first
# by one producer) from the start, at once, against lograil and a one-broker Apache Kafka 4.4
# (tests/kafka/kafka.sh, KRaft, its defaults) in the same run. Each process is
# `lograil-bench consume` (librdkafka, assign(), no group); the aggregate rate is every
# process's bytes over the time until the last one is done, and the broker's CPU is read from
# /proc over the same time. Both brokers serve from the page cache (the topic fits in memory).
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/consumers_peer.sh      # ~5 min; one line per broker and count
#
# Environment: BROKER, BENCH (binaries), DATA (default target/bench-data), MESSAGES (1000000:
# ~1 GB), COUNTS ("1 2 4 8"), BROKERS ("lograil kafka").
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
DATA=$(realpath -m "${DATA:-target/bench-data}")
MESSAGES=${MESSAGES:-1000000}
COUNTS=${COUNTS:-1 2 4 8}
BROKERS=${BROKERS:-lograil kafka}
KAFKA_SH=tests/kafka/kafka.sh
# shellcheck source=benches/scripts/serve.sh
source benches/scripts/serve.sh

cpu_ticks() {
    awk '{print $14 + $15}' "/proc/$1/stat"
}

# measure NAME ADDR PID: fill the topic, then each count of consumer processes.
measure() {
    local name=$1 addr=$2 pid=$3 dir=$DATA/consumers-$1
    "$BENCH" produce --brokers "$addr" --topic fan --partitions 6 --message-size 1000 \
        --acks 1 --messages "$MESSAGES" >/dev/null
    local hz
    hz=$(getconf CLK_TCK)
    for n in $COUNTS; do
        local before start procs=()
        before=$(cpu_ticks "$pid")
        start=$(date +%s.%N)
        for i in $(seq "$n"); do
            "$BENCH" consume --brokers "$addr" --topic fan --message-size 1000 \
                --messages "$MESSAGES" --json "$dir/consume-$n-$i.json" >/dev/null &
            procs+=($!)
        done
        for p in "${procs[@]}"; do wait "$p"; done
        python3 -c '
import sys
name, n, start, end, messages, ticks, hz = sys.argv[1:]
seconds = float(end) - float(start)
mb = int(n) * int(messages) * 1000 / 1e6
print(f"{name} consumers={n} seconds={seconds:.2f} aggregate_MBps={mb / seconds:.0f} "
      f"broker_cores={int(ticks) / int(hz) / seconds:.2f}")' \
            "$name" "$n" "$start" "$(date +%s.%N)" "$MESSAGES" \
            "$(($(cpu_ticks "$pid") - before))" "$hz"
    done
}

for name in $BROKERS; do
    dir=$DATA/consumers-$name
    case $name in
    lograil)
        serve_lograil "$dir"
        measure lograil "$BROKER_ADDR" "$BROKER_PID" || { kill "$BROKER_PID"; exit 1; }
        kill "$BROKER_PID"
        wait "$BROKER_PID" || true
        ;;
    kafka)
        serve_kafka "$dir"
        mkdir -p "$dir"
        measure kafka "$KAFKA_ADDR" "$KAFKA_PID" || { "$KAFKA_SH" stop "$dir" >/dev/null; exit 1; }
        "$KAFKA_SH" stop "$dir" >/dev/null
        ;;
    esac
    rm -rf "$dir"
done
