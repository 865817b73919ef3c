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

# serve_kafka DIR [kafka.sh start flags...]: a one-broker Apache Kafka 4.4 (tests/kafka/kafka.sh,
# KRaft, its defaults) in DIR (emptied first). Sets KAFKA_ADDR and KAFKA_PID (its JVM, for /proc
# figures); stop it with `tests/kafka/kafka.sh stop DIR`.
serve_kafka() {
    local dir=$1
    shift
    rm -rf "$dir"
    KAFKA_ADDR=$(tests/kafka/kafka.sh start "$dir" --brokers 1 "$@")
    KAFKA_PID=$(pgrep -f "kafka.*$dir" | head -1)
}

# on_each_broker PREFIX FN [kafka.sh start flags...]: for each name in $BROKERS (lograil,
# kafka), a fresh broker on its defaults (lograil's with $LOGRAIL_FLAGS, if set) in
# $DATA/PREFIX-NAME, then `FN NAME ADDR PID`, then the broker stopped and its directory removed.
on_each_broker() {
    local prefix=$1 fn=$2 name dir
    shift 2
    for name in $BROKERS; do
        dir=$DATA/$prefix-$name
        case $name in
        lograil)
            # shellcheck disable=SC2086  # several flags, split on purpose
            serve_lograil "$dir" ${LOGRAIL_FLAGS:-}
            "$fn" lograil "$BROKER_ADDR" "$BROKER_PID"
            kill "$BROKER_PID"
            wait "$BROKER_PID" 2>/dev/null || true
            ;;
        kafka)
            serve_kafka "$dir" "$@"
            "$fn" kafka "$KAFKA_ADDR" "$KAFKA_PID"
            tests/kafka/kafka.sh stop "$dir" >/dev/null
            ;;
        esac
        rm -rf "$dir"
    done
}
