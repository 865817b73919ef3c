#!/usr/bin/env bash
# Idle connections (issue 39, item 2 in part): COUNT clients connect one after another, each
# answered once (ApiVersions), and stay open, against lograil (its connection caps raised to
# COUNT) and a one-broker Apache Kafka 4.4 (tests/kafka/kafka.sh, its defaults: no cap) in the
# same run; benches/scripts/connections_idle.py reports the accept rate and the broker's resident
# memory per connection.
#
#   cargo build --release -p lograil
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/connections_peer.sh     # ~1 min
#
# Environment: BROKER, DATA (default target/bench-data), COUNT (10000; the client process needs
# as many descriptors), BROKERS ("lograil kafka").
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
DATA=$(realpath -m "${DATA:-target/bench-data}")
COUNT=${COUNT:-10000}
BROKERS=${BROKERS:-lograil kafka}
KAFKA_SH=tests/kafka/kafka.sh
# shellcheck source=benches/scripts/serve.sh
source benches/scripts/serve.sh
ulimit -n "$(ulimit -Hn)"

for name in $BROKERS; do
    dir=$DATA/connections-$name
    case $name in
    lograil)
        serve_lograil "$dir" --max-connections "$((COUNT + 100))" \
            --max-connections-per-ip "$((COUNT + 100))"
        printf 'lograil '
        python3 benches/scripts/connections_idle.py "$BROKER_ADDR" "$BROKER_PID" "$COUNT" ||
            { kill "$BROKER_PID"; exit 1; }
        kill "$BROKER_PID"
        wait "$BROKER_PID" || true
        ;;
    kafka)
        serve_kafka "$dir"
        printf 'kafka '
        python3 benches/scripts/connections_idle.py "$KAFKA_ADDR" "$KAFKA_PID" "$COUNT" ||
            { "$KAFKA_SH" stop "$dir" >/dev/null; exit 1; }
        "$KAFKA_SH" stop "$dir" >/dev/null
        ;;
    esac
    rm -rf "$dir"
done
