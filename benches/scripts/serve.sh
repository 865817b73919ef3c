# shellcheck shell=bash
# Sourced by the benchmark scripts: starting a `lograil serve` and waiting for its address.
#
# serve_lograil DIR [serve flags...]: `$BROKER serve` on a free port with its data in DIR/data
# and its output in DIR/stdout and DIR/stderr (DIR is emptied first). Sets BROKER_PID and
# BROKER_ADDR (127.0.0.1:port), or prints the broker's stderr and exits if it has not said
# where it listens within 10 s.
# shellcheck disable=SC2034  # BROKER_PID, BROKER_ADDR, KAFKA_ADDR and KAFKA_PID are for the sourcing script.
serve_lograil() {
    local dir=$1
    shift
    rm -rf "$dir"
    mkdir -p "$dir"
    "$BROKER" serve --listen 127.0.0.1:0 --data-dir "$dir/data" "$@" >"$dir/stdout" 2>"$dir/stderr" &
    BROKER_PID=$!
    for _ in $(seq 100); do
        grep -q 'listening on' "$dir/stdout" 2>/dev/null && break
        sleep 0.1
    done
    BROKER_ADDR=$(head -1 "$dir/stdout" | grep -o '127\.0\.0\.1:[0-9]*') || {
        echo "lograil did not start in $dir:" >&2
        cat "$dir/stderr" >&2
        exit 1
    }
}

# serve_kafka DIR: a one-broker Apache Kafka 4.4 (tests/kafka/kafka.sh, KRaft, its defaults)
# in DIR (emptied first). Sets KAFKA_ADDR and KAFKA_PID (its JVM, for /proc figures); stop it
# with `tests/kafka/kafka.sh stop DIR`.
serve_kafka() {
    local dir=$1
    rm -rf "$dir"
    KAFKA_ADDR=$(tests/kafka/kafka.sh start "$dir" --brokers 1)
    KAFKA_PID=$(pgrep -f "kafka.*$dir" | head -1)
}
