#!/usr/bin/env bash
# Rebalance time of a consumer group (PROTOCOL: consumer, KIP-848's, the default; or classic)
# when one of MEMBERS leaves, lograil beside a single-broker Apache Kafka 4.4 (tests/kafka/kafka.sh, KRaft, Kafka's
# defaults: group.consumer.heartbeat.interval.ms 5000, session timeout 45000, the uniform
# assignor; lograil's are the same), the same run: rebalance_kip848.py (MEMBERS librdkafka
# consumers from confluent-kafka, a topic of PARTITIONS partitions) against each broker in
# turn, REPS leaves each. The time is from the leaver's close until the others hold every
# partition again; the members learn of the new epoch at their next heartbeat, so the
# heartbeat interval bounds it on both brokers.
#
#   cargo build --release -p lograil
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/rebalance_peer.sh     # ~2 min; prints one JSON line per broker
#
# Environment: BROKER (default target/release/lograil), DATA (broker data: default
# target/bench-data), MEMBERS (10), PARTITIONS (20), REPS (5), BROKERS ("lograil kafka"),
# PROTOCOL (consumer).
# Needs python3 with confluent-kafka (librdkafka 2.12 or later for KIP-848).
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
KAFKA_SH=tests/kafka/kafka.sh
DATA=$(realpath -m "${DATA:-target/bench-data}")
MEMBERS=${MEMBERS:-10}
PARTITIONS=${PARTITIONS:-20}
REPS=${REPS:-5}
PROTOCOL=${PROTOCOL:-consumer}
BROKERS=${BROKERS:-lograil kafka}
DRIVER=benches/scripts/rebalance_kip848.py

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

run() {
    local name=$1 addr=$2
    printf '%s ' "$name"
    env -u LD_LIBRARY_PATH python3 "$DRIVER" "$addr" "rebalance-$name" \
        --members "$MEMBERS" --partitions "$PARTITIONS" --reps "$REPS" --protocol "$PROTOCOL"
}

for name in $BROKERS; do
    case $name in
    lograil)
        dir=$DATA/rebalance-lograil
        rm -rf "$dir" && mkdir -p "$dir"
        port=$(free_port)
        "$BROKER" serve --listen "127.0.0.1:$port" --data-dir "$dir/data" \
            >"$dir/stdout" 2>"$dir/stderr" &
        pid=$!
        for _ in $(seq 600); do
            grep -q 'listening on' "$dir/stdout" 2>/dev/null && break
            sleep 0.05
        done
        run lograil "127.0.0.1:$port" || { kill "$pid"; exit 1; }
        kill "$pid"
        wait "$pid" || true
        rm -rf "$dir"
        ;;
    kafka)
        dir=$DATA/rebalance-kafka
        rm -rf "$dir"
        addr=$("$KAFKA_SH" start "$dir" --brokers 1)
        run kafka "$addr" || { "$KAFKA_SH" stop "$dir" >/dev/null; exit 1; }
        "$KAFKA_SH" stop "$dir" >/dev/null
        rm -rf "$dir"
        ;;
    esac
done
