#!/usr/bin/env bash
# run_against_kafka.sh [--runs N] [run_scenarios.py options...]
# The reference run: a fresh single-broker Apache Kafka 4.4 (tests/kafka/kafka.sh) with two
# broker settings the scenarios want (a 1 s floor for record lock durations, so groups can use
# 5 s locks, and a delivery count limit of 3), then run_scenarios.py N times (default 1), then
# stop the broker. Its directory is $SHARE_KAFKA_DIR (default /tmp/lograil-share-kafka).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K="$HERE/../kafka/kafka.sh"
DIR="${SHARE_KAFKA_DIR:-/tmp/lograil-share-kafka}"
runs=1
if [[ "${1:-}" == --runs ]]; then runs="$2"; shift 2; fi

"$HERE/build.sh"
t0=$EPOCHREALTIME
"$K" start "$DIR" --brokers 1 >/dev/null
trap '"$K" stop "$DIR" || true' EXIT
# group.share.delivery.count.limit and group.share.min.record.lock.duration.ms are read-only
# broker configs in Kafka 4.2 and 4.4 (not dynamic): append them and restart.
cat >>"$DIR/node-1/server.properties" <<CONF
# tests/share/run_against_kafka.sh: short record locks allowed, delivery limit 3
group.share.min.record.lock.duration.ms=1000
group.share.delivery.count.limit=3
CONF
"$K" restart "$DIR" 1
echo "run_against_kafka.sh: Kafka ready in $(python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f}')")s at $(cat "$DIR/bootstrap")" >&2
rc=0
for ((i = 1; i <= runs; i++)); do
    echo "== run $i of $runs" >&2
    python3 "$HERE/run_scenarios.py" "$(cat "$DIR/bootstrap")" "$@" || rc=1
done
exit $rc
