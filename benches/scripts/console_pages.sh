#!/usr/bin/env bash
# The console at scale (issue 40): a release broker with 10,000 partitions (100 topics x 100)
# and 1,000 groups (benches/scripts/console_fill.py); each page's answer time (curl, median of
# 5); then the produce latency (lograil-bench produce, open loop) alone and while a reader
# browses records, alternated ROUNDS times.
#   cargo build --release -p lograil -p lograil-benches
#   bash benches/scripts/console_pages.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-20000}
# Seconds between two pages of the browsing reader.
PAUSE=${PAUSE:-0.1}
# What the reader browses: `partition` (one partition of each topic) or `all` (every
# partition merged: 6 of the produced topic, 100 of t7).
BROWSE=${BROWSE:-partition}
# shellcheck source=benches/scripts/serve.sh
source benches/scripts/serve.sh
dir=target/bench-data/console
serve_lograil "$dir" --console-listen 127.0.0.1:0 --max-broker-partitions 20000
trap 'kill $BROKER_PID 2>/dev/null; wait $BROKER_PID 2>/dev/null; rm -rf "$dir"' EXIT
# The start-up line names the console's address too: the broker's is the first.
BROKER_ADDR=$(echo "$BROKER_ADDR" | head -1)
console=$(grep -o 'console at http://[0-9.:]*' "$dir/stdout" | sed 's|console at http://||')
python3 benches/scripts/console_fill.py "$BROKER_ADDR" 100 100 1000

echo "| page | bytes | median | min | max |"
echo "|---|---|---|---|---|"
for page in / /topics "/topics?page=49" /topics/t7 "/topics/t7/messages?partition=3" \
    "/topics/t7/messages?partition=all" /groups /groups/g7 /shares /dead-letters /limits \
    /security; do
    times=()
    for _ in 1 2 3 4 5; do
        times+=("$(curl -s -o "$dir/page" -w '%{time_total}' "http://$console$page")")
    done
    sorted=$(printf '%s\n' "${times[@]}" | sort -n)
    printf '| `%s` | %s | %.0f ms | %.0f ms | %.0f ms |\n' "$page" "$(wc -c <"$dir/page")" \
        "$(echo "$sorted" | sed -n 3p | awk '{print $1*1000}')" \
        "$(echo "$sorted" | head -1 | awk '{print $1*1000}')" \
        "$(echo "$sorted" | tail -1 | awk '{print $1*1000}')"
done

# Produce p99 alone and with a reader browsing records (one process, console_reader.py: the
# last 50 records of the topic being produced and of t7's partition 3, then PAUSE s).
produce() {
    "$BENCH" produce --brokers "$BROKER_ADDR" --topic "p$1" --partitions 6 --message-size 1000 \
        --acks 1 --rate "$RATE" --messages $((RATE * 15)) --json "$dir/$1.json" >/dev/null
    python3 -c "import json,sys; l=json.load(open(sys.argv[1]))['produce']['delivery_latency']; \
print(sys.argv[2], 'p50', l['p50_us'], 'p99', l['p99_us'], 'p99.9', l['p99_9_us'], 'us')" \
        "$dir/$1.json" "$1"
}
for round in $(seq "$ROUNDS"); do
    produce "alone-$round"
    if [[ $BROWSE == all ]]; then which=(all all); else which=(0 3); fi
    python3 benches/scripts/console_reader.py "$console" "$PAUSE" \
        "/topics/pbrowsed-$round/messages?partition=${which[0]}&from=end" \
        "/topics/t7/messages?partition=${which[1]}&from=end" &
    browser=$!
    produce "browsed-$round"
    kill $browser
    wait $browser || true
done
