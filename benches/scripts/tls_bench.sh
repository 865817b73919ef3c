#!/usr/bin/env bash
# TLS cost (issue 23): 1000 B records produced then consumed over PLAINTEXT and over SASL_SSL
# (TLS; SCRAM-SHA-512 once per connection) on lograil and on a one-broker Apache Kafka (KRaft,
# tests/kafka/kafka.sh, whose nodes have a SASL_SSL listener with the same kind of PEM
# certificate), alternately, REPS repetitions, with lograil-bench through each client of CLIENTS
# (default both: librdkafka, with OpenSSL, and lograil's own, with rustls); then a reconnect storm: new TLS connections per second (a full handshake each,
# one client thread per core) against each broker's TLS listener. Every run goes into $OUT;
#   python3 benches/scripts/tls_table.py $OUT
# prints the medians and the ratios (TLS / plaintext per broker, lograil / Kafka per protocol).
#
#   cargo build --release -p lograil -p lograil-benches
#   tests/kafka/kafka.sh fetch
#   bash benches/scripts/tls_bench.sh
#
# Environment: BROKER, BENCH (binaries), OUT, DATA (broker data, default target/bench-data),
# REPS (default 3), MESSAGES (default 600000: ~600 MB), HANDSHAKES (per storm, default 2000).
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
KAFKA_SH=tests/kafka/kafka.sh
OUT=${OUT:-target/bench-results/tls-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=$(realpath -m "${DATA:-target/bench-data}")
REPS=${REPS:-3}
MESSAGES=${MESSAGES:-600000}
HANDSHAKES=${HANDSHAKES:-2000}
CLIENTS=${CLIENTS:-rdkafka lograil}
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

LOGRAIL_DIR=$DATA/tls-lograil
KAFKA_DIR=$DATA/tls-kafka

# lograil: PLAINTEXT and SASL_SSL, the certificate from Kafka's test CA (made by kafka.sh start:
# the Kafka session runs first), alice's SCRAM-SHA-512 credential added over PLAINTEXT.
start_lograil() {
    rm -rf "$LOGRAIL_DIR"
    mkdir -p "$LOGRAIL_DIR"
    "$BROKER" serve --data-dir "$LOGRAIL_DIR/data" \
        --listeners 'PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0' \
        --ssl-keystore-location "$TLS_DIR/server.pem" \
        >"$LOGRAIL_DIR/stdout" 2>"$LOGRAIL_DIR/stderr" &
    PID=$!
    for _ in $(seq 600); do
        grep -q 'listening on' "$LOGRAIL_DIR/stdout" && break
        sleep 0.05
    done
    PLAIN=$(grep -oE '127\.0\.0\.1:[0-9]+ \(PLAINTEXT\)' "$LOGRAIL_DIR/stdout" | cut -d' ' -f1)
    SECURED=$(grep -oE '127\.0\.0\.1:[0-9]+ \(SASL_SSL\)' "$LOGRAIL_DIR/stdout" | cut -d' ' -f1)
    python3 - "$PLAIN" <<'EOF'
import sys
from confluent_kafka.admin import AdminClient, UserScramCredentialUpsertion, ScramCredentialInfo, ScramMechanism
a = AdminClient({'bootstrap.servers': sys.argv[1]})
up = UserScramCredentialUpsertion('alice', ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b'alice-secret')
for f in a.alter_user_scram_credentials([up]).values():
    f.result()
EOF
}
stop_lograil() { kill "$PID"; wait "$PID" || true; }
start_kafka() {
    rm -rf "$KAFKA_DIR"
    PLAIN=$("$KAFKA_SH" start "$KAFKA_DIR" --brokers 1)
    SECURED=$(cat "$KAFKA_DIR/bootstrap-sasl-ssl")
    PID=$(cat "$KAFKA_DIR/node-1.pid")
    TLS_DIR=$KAFKA_DIR/tls
}
stop_kafka() {
    # lograil's sessions use Kafka's certificate: keep a copy past the Kafka session.
    mkdir -p "$DATA/tls-certs"
    cp "$TLS_DIR"/ca.pem "$TLS_DIR"/server.pem "$DATA/tls-certs/"
    TLS_DIR=$DATA/tls-certs
    "$KAFKA_SH" stop "$KAFKA_DIR" >/dev/null
}

sasl_ssl() {
    # ssl.ca.location: librdkafka's name, which lograil's client also takes.
    echo -X security.protocol=SASL_SSL -X sasl.mechanism=SCRAM-SHA-512 -X sasl.username=alice \
        -X sasl.password=alice-secret -X "ssl.ca.location=$TLS_DIR/ca.pem"
}

bench() { # NAME REP CLIENT PROTOCOL ADDR EXTRA...: produce then consume, JSON into $OUT
    local name=$1 rep=$2 client=$3 protocol=$4 addr=$5 topic="t-$3-$4-$2"
    shift 5
    for step in produce consume; do
        local args=(--topic "$topic" --partitions 6)
        [[ $step == produce ]] && args+=(--message-size 1000 --acks 1 --messages "$MESSAGES")
        "$BENCH" "$step" --client "$client" "${args[@]}" "$@" --brokers "$addr" --broker-pid "$PID" \
            --label "$name-$client-$protocol" --json "$OUT/$name-$client-$protocol-$step-$rep.json" 2>&1 |
            { grep -E '^(produce|consume|broker|error)' || true; } | sed "s/^/$name $client $protocol #$rep: /"
    done
}

storm() { # NAME REP ADDR: new TLS connections per second, two client threads
    python3 - "$1" "$3" "$TLS_DIR/ca.pem" "$HANDSHAKES" >"$OUT/$1-storm-$2.txt" <<'EOF'
import socket, ssl, sys, threading, time
name, addr, ca, total = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
host, port = addr.rsplit(':', 1)
context = ssl.create_default_context(cafile=ca)
def worker(n, errors):
    for _ in range(n):
        try:
            with socket.create_connection((host, int(port))) as raw:
                with context.wrap_socket(raw, server_hostname=host) as tls:
                    tls.do_handshake()
        except OSError:
            errors.append(1)
errors = []
threads = [threading.Thread(target=worker, args=(total // 2, errors)) for _ in range(2)]
started = time.monotonic()
for t in threads: t.start()
for t in threads: t.join()
elapsed = time.monotonic() - started
print(f"{name} handshakes_per_s={(total - len(errors)) / elapsed:.0f} errors={len(errors)}")
EOF
    sed "s/^/$1 storm #$2: /" "$OUT/$1-storm-$2.txt"
}

for rep in $(seq "$REPS"); do
    for name in kafka lograil; do
        start_"$name"
        for client in $CLIENTS; do
            bench "$name" "$rep" "$client" plaintext "$PLAIN"
            # shellcheck disable=SC2046
            bench "$name" "$rep" "$client" sasl_ssl "$SECURED" $(sasl_ssl)
        done
        storm "$name" "$rep" "$SECURED"
        stop_"$name"
    done
done
python3 benches/scripts/tls_table.py "$OUT"
