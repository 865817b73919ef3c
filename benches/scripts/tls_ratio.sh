#!/usr/bin/env bash
# TLS against plaintext with lograil's own client (issue 39, item 5): one lograil broker with a
# PLAINTEXT and an SSL listener (TLS 1.3; a CA and certificate made here with openssl), REPS
# repetitions of MESSAGES records of 1000 B (acks=1, 6 partitions) produced and then consumed
# by `lograil-bench --client lograil` over each listener in turn. With BASE_BROKER and
# BASE_BENCH set, each repetition runs those binaries too, first (builds paired in turn).
#
#   cargo build --release -p lograil -p lograil-benches
#   bash benches/scripts/tls_ratio.sh                  # ~2 min
#
# Prints `build protocol step MB/s` lines, then the medians and the TLS / plaintext ratios.
# Environment: BROKER, BENCH, BASE_BROKER, BASE_BENCH, DATA (default target/bench-data), REPS
# (default 5), MESSAGES (default 1500000).
set -euo pipefail
cd "$(dirname "$0")/../.."
BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
DATA=$(realpath -m "${DATA:-target/bench-data}")/tls-ratio
REPS=${REPS:-5}
MESSAGES=${MESSAGES:-1500000}
mkdir -p "$DATA"
certs=$DATA/certs
if [ ! -f "$certs/server.pem" ]; then
    mkdir -p "$certs"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$certs/ca.key" -out "$certs/ca.pem" \
        -days 30 -subj /CN=lograil-bench-ca 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout "$certs/server.key" -out "$certs/server.csr" \
        -subj /CN=127.0.0.1 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$certs/ext"
    openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca.key" \
        -CAcreateserial -out "$certs/server.crt" -days 30 -extfile "$certs/ext" 2>/dev/null
    cat "$certs/server.crt" "$certs/server.key" >"$certs/server.pem"
fi

run() { # BUILD BROKER BENCH REP
    local build=$1 broker=$2 bench=$3 rep=$4 dir=$DATA/broker pid plain ssl
    rm -rf "$dir"
    mkdir -p "$dir"
    "$broker" serve --data-dir "$dir/data" --listeners 'PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0' \
        --ssl-keystore-location "$certs/server.pem" >"$dir/stdout" 2>"$dir/stderr" &
    pid=$!
    for _ in $(seq 100); do
        grep -q 'listening on' "$dir/stdout" && break
        sleep 0.1
    done
    plain=$(grep -oE '127\.0\.0\.1:[0-9]+ \(PLAINTEXT\)' "$dir/stdout" | cut -d' ' -f1)
    ssl=$(grep -oE '127\.0\.0\.1:[0-9]+ \(SSL\)' "$dir/stdout" | cut -d' ' -f1)
    for protocol in plaintext tls; do
        local addr=$plain extra=()
        if [ $protocol = tls ]; then
            addr=$ssl
            extra=(-X security.protocol=SSL -X "ssl.ca.location=$certs/ca.pem")
        fi
        for step in produce consume; do
            local args=(--client lograil --topic "t-$protocol-$rep" --partitions 6 --brokers "$addr")
            [ $step = produce ] && args+=(--message-size 1000 --acks 1 --messages "$MESSAGES")
            "$bench" "$step" "${args[@]}" "${extra[@]}" 2>&1 |
                grep -oE '[0-9.]+ MB/s' | head -1 | sed "s|^|$build $protocol $step |"
        done
    done
    kill "$pid"
    wait "$pid" || true
}

out=$DATA/figures.txt
: >"$out"
for rep in $(seq "$REPS"); do
    if [ -n "${BASE_BROKER:-}" ]; then
        run base "$BASE_BROKER" "${BASE_BENCH:-$BENCH}" "$rep" | tee -a "$out"
    fi
    run new "$BROKER" "$BENCH" "$rep" | tee -a "$out"
done
python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    build, protocol, step, mb, _ = line.split()
    runs.setdefault((build, step, protocol), []).append(float(mb))
for build in sorted({k[0] for k in runs}):
    for step in ('produce', 'consume'):
        plain = statistics.median(runs[(build, step, 'plaintext')])
        tls = statistics.median(runs[(build, step, 'tls')])
        each = [round(t / p, 2) for p, t in zip(runs[(build, step, 'plaintext')], runs[(build, step, 'tls')])]
        print(f"{build} {step}: plaintext {plain:.0f} MB/s, TLS {tls:.0f} MB/s, TLS / plaintext {tls / plain:.3f} (each run {each})")
PY
