#!/usr/bin/env bash
# selftest.sh [--brokers N]: exercise kafka.sh end to end against a fresh cluster in a temporary
# directory, with Kafka's own tools and (selftest.py) the Python client confluent-kafka:
#   start; a topic with 6 partitions and replication factor min(N,3), described (ISR complete);
#   3000 records through ConsoleProducer (acks=all) and ConsoleConsumer; a share group reading
#   them with ConsoleShareConsumer; produce/consume around `kill` and `restart` of a node with
#   nothing acknowledged lost; two Python share consumers; `stop`, with no JVM left behind.
# Exit 0 when everything held. Keeps the cluster directory (logs) on failure.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K="$here/kafka.sh"
n=3
[[ "${1:-}" == --brokers ]] && n="${2:?--brokers needs a number}"
rf=$((n < 3 ? n : 3))
python3 -c 'import confluent_kafka' 2>/dev/null ||
    { echo "selftest: needs the Python client: pip install confluent-kafka" >&2; exit 1; }

dir="$(mktemp -d "${TMPDIR:-/tmp}/lograil-kafka-selftest.XXXXXX")"
ok=0
cleanup() {
    "$K" stop "$dir" >/dev/null 2>&1 || true
    if pgrep -f "$dir/" >/dev/null; then echo "selftest: FAILED: java processes left behind:" >&2; pgrep -af "$dir/" >&2; ok=0; fi
    if ((ok)); then rm -rf "$dir"; echo "selftest: passed ($n brokers)"; else echo "selftest: FAILED; logs in $dir" >&2; exit 1; fi
}
trap cleanup EXIT
step() { echo "== $*"; }
tool() { "$K" tool "$dir" "$@"; }

step "start --brokers $n"
time "$K" start "$dir" --brokers "$n"

step "topic selftest: 6 partitions, replication factor $rf"
tool org.apache.kafka.tools.TopicCommand --bootstrap-server @bootstrap --create --topic selftest \
    --partitions 6 --replication-factor "$rf"
tool org.apache.kafka.tools.TopicCommand --bootstrap-server @bootstrap --create --topic selftest-share \
    --partitions 6 --replication-factor "$rf"
desc="$(tool org.apache.kafka.tools.TopicCommand --bootstrap-server @bootstrap --describe --topic selftest)"
echo "$desc"
full_isr="$(echo "$desc" | awk -v rf="$rf" '/Partition:/ { for (i = 1; i < NF; i++) if ($i == "Isr:") if (split($(i + 1), a, ",") == rf) c++ } END { print c + 0 }')"
leaders="$(echo "$desc" | awk '/Partition:/ { for (i = 1; i < NF; i++) if ($i == "Leader:") print $(i + 1) }' | sort -u | wc -l)"
[[ "$full_isr" == 6 ]] || { echo "selftest: only $full_isr of 6 partitions have a full ISR" >&2; exit 1; }
[[ "$leaders" == "$rf" ]] || { echo "selftest: leaders on $leaders brokers, expected $rf" >&2; exit 1; }

step "ConsoleProducer (acks=all) and ConsoleConsumer, 3000 records"
seq 1 3000 | tool org.apache.kafka.tools.ConsoleProducer --bootstrap-server @bootstrap --topic console \
    --command-property acks=all
got="$(tool org.apache.kafka.tools.consumer.ConsoleConsumer --bootstrap-server @bootstrap --topic console \
    --from-beginning --max-messages 3000 --timeout-ms 60000 2>/dev/null | sort -un | wc -l)"
echo "consumed $got distinct records"
[[ "$got" == 3000 ]] || exit 1

step "ConsoleShareConsumer (share group, share.auto.offset.reset=earliest)"
tool org.apache.kafka.tools.ConfigCommand --bootstrap-server @bootstrap --entity-type groups --entity-name selftest-share \
    --alter --add-config share.auto.offset.reset=earliest
got="$(tool org.apache.kafka.tools.consumer.ConsoleShareConsumer --bootstrap-server @bootstrap --topic console \
    --group selftest-share --max-messages 3000 --timeout-ms 60000 2>/dev/null | sort -un | wc -l)"
echo "share consumer got $got distinct records"
[[ "$got" == 3000 ]] || exit 1

node=$((n > 1 ? 2 : 1))
step "Python (confluent-kafka): acks=all around kill + restart of node $node; share consumers"
tool org.apache.kafka.tools.TopicCommand --bootstrap-server @bootstrap --create --topic selftest-py \
    --partitions 6 --replication-factor "$rf"
python3 "$here/selftest.py" "$K" "$dir" "$node" selftest-py selftest-share
"$K" status "$dir"

step "stop"
time "$K" stop "$dir"
ok=1
