#!/usr/bin/env bash
# Share-group workers by count (issue 39, item 3 in part): a topic of 6 partitions filled with
# RECORDS records of 1000 B (lograil-bench produce), then `lograil-bench queue` with 1, 8 and 64
# workers (lograil's queue consumer, explicit acks, each accepting every record), each count on
# a share group of its own over the whole topic, against lograil and a one-broker Apache Kafka
# 4.4 with share groups on (tests/kafka/kafka.sh --feature share.version=2) in one run.
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/share_peer.sh          # ~5 min
#
# Prints `name workers completed_records_s plain_fetch_records_s redelivered`. Environment: BROKER, BENCH,
# DATA (default target/bench-data), BROKERS ("lograil kafka"), WORKERS ("1 8 64"), RECORDS
# (default 400000).
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
DATA=$(realpath -m "${DATA:-target/bench-data}")
BROKERS=${BROKERS:-lograil kafka}
WORKERS=${WORKERS:-1 8 64}
RECORDS=${RECORDS:-400000}
# shellcheck source=benches/scripts/serve.sh
source benches/scripts/serve.sh
mkdir -p "$DATA"
json=$DATA/share.json

measure() {
    local name=$1 addr=$2 workers
    "$BENCH" produce --brokers "$addr" --topic q --partitions 6 --message-size 1000 --acks 1 \
        --messages "$RECORDS" >/dev/null 2>&1
    for workers in $WORKERS; do
        # Each run's share group is new (the harness names it by its start), so every count
        # completes the whole topic.
        if "$BENCH" queue --brokers "$addr" --topic q --workers "$workers" --messages "$RECORDS" \
            --timeout-secs 300 --json "$json" >"$DATA/share.out" 2>&1; then
            echo "$name $workers $(python3 -c "import json, sys; r = json.load(open(sys.argv[1])); q = r['results']; print(int(q['completed_records_per_s']), int(q['fetch_records_per_s']), q['redelivered'])" "$json")"
        else
            echo "$name $workers failed: $(tail -n 2 "$DATA/share.out" | tr '\n' ' ')"
        fi
    done
}

on_each_broker share measure --feature share.version=2
