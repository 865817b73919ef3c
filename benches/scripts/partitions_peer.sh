#!/usr/bin/env bash
# Partitions on one broker (issue 39, item 1): for each COUNT, lograil (its partition caps
# raised to COUNT) and a one-broker Apache Kafka 4.4 (tests/kafka/kafka.sh, its defaults) in the
# same run, one after the other:
#   create   COUNT partitions as topics of CHUNK (5000) partitions, one CreateTopics each, one
#            after the other (lograil's CLI, a Kafka client, request.timeout.ms raised to 10
#            min), seconds
#   rss      the broker's resident memory once it holds them (VmRSS), MB
#   fds      its open descriptors and memory maps (/proc/PID/fd, /proc/PID/maps)
#   spread   1000 B records, acks=1, over min(COUNT, 10000) partitions of a second topic, then
#            the same over 6 partitions (lograil-bench, librdkafka), MB/s each and their ratio
#   restart  a clean stop (SIGTERM) then a start: seconds until it listens again; then kill -9
#            and a start: the same
# One line per broker and count, as `name count create_s rss_mb fds maps wide_mb_s six_mb_s
# ratio clean_restart_s kill9_restart_s` (a step that failed or timed out says so).
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/partitions_peer.sh                 # ~15 min
#   COUNTS="1000 10000" BROKERS=kafka bash benches/scripts/partitions_peer.sh
#
# Environment: BROKER, BENCH, DATA (default target/bench-data), COUNTS ("1000 10000 100000"),
# BROKERS ("lograil kafka"), MESSAGES (records per produce run, default 200000), TIMEOUT
# (seconds a step may take, default 600), CHUNK (partitions per CreateTopics, default 5000).
# Kafka's errors during a count's steps are kept in DATA/partitions-kafka-COUNT.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
DATA=$(realpath -m "${DATA:-target/bench-data}")
COUNTS=${COUNTS:-1000 10000 100000}
BROKERS=${BROKERS:-lograil kafka}
MESSAGES=${MESSAGES:-200000}
TIMEOUT=${TIMEOUT:-600}
CHUNK=${CHUNK:-5000}
KAFKA_SH=tests/kafka/kafka.sh
# shellcheck source=benches/scripts/serve.sh
source benches/scripts/serve.sh
ulimit -n "$(ulimit -Hn)"
CLIENT_CONFIG=$DATA/partitions-client.properties
mkdir -p "$DATA"
echo "request.timeout.ms=600000" >"$CLIENT_CONFIG"

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
rss_mb() { awk '/VmRSS/ { printf "%.0f", $2 / 1024 }' "/proc/$1/status"; }
# Seconds until `lograil serve` in DIR says it listens again (its stdout is appended to).
wait_listening() {
    local out=$1 before=$2 t0=$3
    for _ in $(seq $((TIMEOUT * 10))); do
        [ "$(grep -c 'listening on' "$out")" -gt "$before" ] && { since "$t0"; return; }
        sleep 0.1
    done
    echo "timeout"
}

# spread ADDR PID COUNT: "wide six ratio" in MB/s.
spread() {
    local addr=$1 pid=$2 count=$3 wide six
    wide_topic "$addr" "$count"
    wide=$(produce_mb "$addr" "$pid" wide "$((count < 10000 ? count : 10000))")
    six=$(produce_mb "$addr" "$pid" six 6)
    python3 -c "import sys; w, s = sys.argv[1:]; print(w, s, f'{float(w) / float(s):.2f}' if w != 'failed' and s != 'failed' else '-')" "$wide" "$six"
}
produce_mb() {
    local addr=$1 pid=$2 topic=$3 partitions=$4 json
    json=$DATA/partitions-$topic.json
    if timeout "$TIMEOUT" "$BENCH" produce --brokers "$addr" --topic "$topic" \
        --partitions "$partitions" --message-size 1000 --acks 1 --messages "$MESSAGES" \
        --broker-pid "$pid" --json "$json" >/dev/null 2>"$DATA/partitions-bench.err"; then
        python3 -c "import json, sys; print(f\"{json.load(open(sys.argv[1]))['produce']['mb_per_s']:.0f}\")" "$json"
    else
        echo failed
    fi
}

# create ADDR COUNT: seconds to create COUNT partitions as topics of at most CHUNK partitions,
# one CreateTopics each, one after the other (Kafka's controller refuses one operation of more
# than 10,000 records: "excessively large batch operation").
create() {
    local addr=$1 count=$2 t0 i=0 left=$2 n
    t0=$(now)
    while [ "$left" -gt 0 ]; do
        n=$((left < CHUNK ? left : CHUNK))
        if ! timeout "$TIMEOUT" "$BROKER" topic create "big$i" --partitions "$n" --bootstrap-server "$addr" \
            --command-config "$CLIENT_CONFIG" >/dev/null 2>"$DATA/partitions-create.err"; then
            echo "failed-after-$((count - left))($(tail -c 160 "$DATA/partitions-create.err" | tr '\n ' '__'))"
            return
        fi
        left=$((left - n))
        i=$((i + 1))
    done
    since "$t0"
}

# wide_topic ADDR COUNT: the topic `wide` of min(COUNT, 10000) partitions, made as the same
# CHUNK-sized steps (CreateTopics, then Kafka's TopicCommand --alter, CreatePartitions).
wide_topic() {
    local addr=$1 want=$(($2 < 10000 ? $2 : 10000)) have
    have=$((want < CHUNK ? want : CHUNK))
    "$BROKER" topic create wide --partitions "$have" --bootstrap-server "$addr" \
        --command-config "$CLIENT_CONFIG" >/dev/null
    while [ "$have" -lt "$want" ]; do
        have=$((have + CHUNK < want ? have + CHUNK : want))
        "$KAFKA_SH" tool - org.apache.kafka.tools.TopicCommand --bootstrap-server "$addr" \
            --alter --topic wide --partitions "$have" >/dev/null 2>&1
    done
}

for count in $COUNTS; do
    for name in $BROKERS; do
        dir=$DATA/partitions-$name
        case $name in
        lograil)
            flags=(--max-broker-partitions "$((count + 10100))")
            serve_lograil "$dir" "${flags[@]}"
            created=$(create "$BROKER_ADDR" "$count")
            rss=$(rss_mb "$BROKER_PID")
            fds=$(find "/proc/$BROKER_PID/fd" -mindepth 1 | wc -l)
            maps=$(wc -l <"/proc/$BROKER_PID/maps")
            produced=$(spread "$BROKER_ADDR" "$BROKER_PID" "$count")
            kill "$BROKER_PID"
            wait "$BROKER_PID" 2>/dev/null || true
            t0=$(now)
            "$BROKER" serve --listen 127.0.0.1:0 --data-dir "$dir/data" "${flags[@]}" >"$dir/stdout" 2>>"$dir/stderr" &
            BROKER_PID=$!
            clean=$(wait_listening "$dir/stdout" 0 "$t0")
            kill -9 "$BROKER_PID"
            wait "$BROKER_PID" 2>/dev/null || true
            t0=$(now)
            "$BROKER" serve --listen 127.0.0.1:0 --data-dir "$dir/data" "${flags[@]}" >"$dir/stdout" 2>>"$dir/stderr" &
            BROKER_PID=$!
            killed=$(wait_listening "$dir/stdout" 0 "$t0")
            kill "$BROKER_PID"
            wait "$BROKER_PID" 2>/dev/null || true
            ;;
        kafka)
            serve_kafka "$dir"
            created=$(create "$KAFKA_ADDR" "$count")
            if kill -0 "$KAFKA_PID" 2>/dev/null; then
                rss=$(rss_mb "$KAFKA_PID")
                fds=$(find "/proc/$KAFKA_PID/fd" -mindepth 1 | wc -l)
                maps=$(wc -l <"/proc/$KAFKA_PID/maps")
                produced=$(spread "$KAFKA_ADDR" "$KAFKA_PID" "$count")
                t0=$(now)
                if timeout "$TIMEOUT" "$KAFKA_SH" restart "$dir" 1 >/dev/null 2>&1; then clean=$(since "$t0"); else clean=failed; fi
                "$KAFKA_SH" kill "$dir" 1 >/dev/null 2>&1 || true
                t0=$(now)
                if timeout "$TIMEOUT" "$KAFKA_SH" restart "$dir" 1 >/dev/null 2>&1; then killed=$(since "$t0"); else killed=failed; fi
            else
                rss=- fds=- maps=- produced="- - -" clean=- killed=-
                created="$created(the broker died)"
            fi
            "$KAFKA_SH" stop "$dir" >/dev/null 2>&1 || true
            # Why a step failed, if one did: the broker's errors.
            grep -h -E "ERROR|FATAL|Exception" "$dir"/node-1/logs/server.log "$dir"/node-1/stdout.log \
                2>/dev/null | tail -n 20 >"$DATA/partitions-kafka-$count.log" || true
            ;;
        esac
        echo "$name $count $created $rss $fds $maps $produced $clean $killed"
        rm -rf "$dir"
    done
done
