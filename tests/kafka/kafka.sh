#!/usr/bin/env bash
# kafka.sh: a real Apache Kafka cluster (KRaft, no ZooKeeper) on 127.0.0.1, for lograil's
# compatibility tests and benchmarks. The Kafka jars come from Maven Central (see pom.xml beside
# this script) into a cache directory; nothing downloaded lives in the repository.
#
# Usage:
#   kafka.sh fetch                       get the broker, Kafka's tools and a logging backend into
#                                        the cache (a no-op when already there)
#   kafka.sh start DIR [--brokers N] [--feature NAME=LEVEL]...
#                                        format and start N combined broker+controller nodes
#                                        (default 3) with configs, data and logs under DIR; wait
#                                        until every broker is registered and answers metadata;
#                                        write DIR/bootstrap and print it (the only stdout line):
#                                        127.0.0.1:p1,127.0.0.1:p2,...
#                                        --feature (repeatable) formats the cluster at that
#                                        feature level, e.g. --feature share.version=2 (see
#                                        LOGRAIL_KAFKA_FEATURES)
#                                        Each node has a second, SASL_SSL listener (see
#                                        "Security" below): DIR/bootstrap-sasl-ssl lists it
#   kafka.sh stop DIR                    stop every node: SIGTERM, then SIGKILL after a timeout
#   kafka.sh kill DIR NODE               SIGKILL node NODE (1..N), e.g. "a broker dies mid-stream"
#   kafka.sh restart DIR NODE            start node NODE again with the same config and data
#                                        (stopping it first if it runs); wait until it is back
#   kafka.sh status DIR                  one line per node; exit 0 iff every node runs
#   kafka.sh tool DIR CLASS [ARGS...]    run a Java main class from the cached jars; an argument
#                                        "@bootstrap" is replaced by DIR's bootstrap list (DIR may
#                                        be "-" when no cluster is involved). E.g.
#     kafka.sh tool /tmp/kc org.apache.kafka.tools.TopicCommand --bootstrap-server @bootstrap --list
#
# Environment:
#   LOGRAIL_KAFKA_VERSION        Kafka version (default: KAFKA_VERSION below)
#   LOGRAIL_KAFKA_HOME           cache directory (default ~/.cache/lograil/kafka-<version>)
#   LOGRAIL_KAFKA_HEAP           broker heap (default 512m per node; 1g with --brokers 1)
#   LOGRAIL_KAFKA_JIT            full: the JVM's normal tiered JIT (default with --brokers 1, the
#                                benchmark peer); c1: C1 only, about half the CPU to boot
#                                (default with several brokers, which are for correctness tests)
#   LOGRAIL_KAFKA_JVM_OPTS       extra JVM options for the brokers (word-split)
#   LOGRAIL_KAFKA_PROPERTIES     extra server.properties lines for every node (`start` only)
#   LOGRAIL_KAFKA_FEATURES       feature levels to format with, NAME=LEVEL separated by spaces or
#                                commas (`start` only; --feature adds to them), e.g.
#                                "share.version=2". Unset: the version's defaults (Kafka 4.4
#                                formats with share.version=2, share groups with dead-letter
#                                queues; share.version=1 has share groups without them)
#   LOGRAIL_KAFKA_TOOL_HEAP      heap for `tool` (default 512m)
#   LOGRAIL_KAFKA_START_TIMEOUT  seconds `start`/`restart` wait for readiness (default 120)
#   LOGRAIL_KAFKA_STOP_TIMEOUT   seconds `stop` waits after SIGTERM before SIGKILL (default 30;
#                                nodes left without a controller quorum get 8 s)
#   LOGRAIL_KAFKA_CDS            0: no class-data-sharing archive (see cds_enabled below)
#   JAVA_HOME                    used for bin/java when set; otherwise `java` on PATH
# Needs: bash, java (17+), mvn (for fetch), python3 (free ports, readiness probe), flock, setsid,
# openssl (the test certificates).
#
# Layout of DIR: bootstrap, bootstrap-sasl-ssl, client-sasl-ssl.properties, tls/ (the test CA and
# the brokers' certificate), cluster.env (cluster id, node count, heap, ports), node-<i>.pid and
# node-<i>/{server.properties, data/, logs/server.log, stdout.log, format.log}.
#
# Security: besides PLAINTEXT (clients and inter-broker traffic) every node listens SASL_SSL on a
# port of its own: TLS with a certificate for IP 127.0.0.1 and DNS localhost signed by a CA made
# at start (DIR/tls/ca.pem; PEM keystore and truststore), and SASL with SCRAM-SHA-512,
# SCRAM-SHA-256 and PLAIN. User alice (password alice-secret) has SCRAM-SHA-512 and SCRAM-SHA-256
# credentials (added at format time) and, like bob (bob-secret), a PLAIN password (the
# listener's JAAS config). DIR/client-sasl-ssl.properties holds the client properties for alice
# with SCRAM-SHA-512 (Java client names: security.protocol, sasl.mechanism, sasl.jaas.config,
# ssl.truststore.*).
# Nodes run detached (setsid, stdin from /dev/null, output to files), so a caller that captures
# this script's output is not held open by the brokers; always pair `start` with `stop`.
set -euo pipefail

KAFKA_VERSION="${LOGRAIL_KAFKA_VERSION:-4.4.0}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KAFKA_HOME="${LOGRAIL_KAFKA_HOME:-$HOME/.cache/lograil/kafka-$KAFKA_VERSION}"
LIBS="$KAFKA_HOME/libs"
CDS_ARCHIVE="$KAFKA_HOME/kafka.jsa"
START_TIMEOUT="${LOGRAIL_KAFKA_START_TIMEOUT:-120}"
STOP_TIMEOUT="${LOGRAIL_KAFKA_STOP_TIMEOUT:-30}"
if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi

log() { echo "kafka.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2; exit 2; }

# ---------------------------------------------------------------------------------------- fetch

fetch_stamp() { echo "$KAFKA_VERSION $(sha256sum <"$HERE/pom.xml" | cut -d' ' -f1)"; }
fetched() { [[ -f "$KAFKA_HOME/fetched" && "$(<"$KAFKA_HOME/fetched")" == "$(fetch_stamp)" ]]; }

cmd_fetch() {
    fetched && return 0
    command -v mvn >/dev/null || die "mvn is not on PATH (apt-get install maven)"
    mkdir -p "$KAFKA_HOME"
    # One fetch at a time per cache (parallel test binaries may all call start). fd 9 holds the
    # lock; brokers are launched with it closed.
    (
        flock 9
        fetched && exit 0
        log "fetching Apache Kafka $KAFKA_VERSION jars with Maven into $KAFKA_HOME"
        rm -rf "$KAFKA_HOME/.maven" "$LIBS.tmp" "$CDS_ARCHIVE"
        mkdir "$KAFKA_HOME/.maven"
        cp "$HERE/pom.xml" "$KAFKA_HOME/.maven/pom.xml"
        if ! (cd "$KAFKA_HOME/.maven" &&
            mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
                -Dkafka.version="$KAFKA_VERSION" -DoutputDirectory="$LIBS.tmp") >"$KAFKA_HOME/fetch.log" 2>&1; then
            sed 's/\x1b\[[0-9;]*m//g' "$KAFKA_HOME/fetch.log" >&2
            die "mvn could not fetch Kafka $KAFKA_VERSION (log above, and in $KAFKA_HOME/fetch.log)"
        fi
        [[ -f "$LIBS.tmp/kafka_2.13-$KAFKA_VERSION.jar" && -f "$LIBS.tmp/kafka-tools-$KAFKA_VERSION.jar" ]] ||
            die "mvn finished but the Kafka $KAFKA_VERSION jars are missing from $LIBS.tmp"
        rm -rf "$LIBS" "$KAFKA_HOME/.maven"
        mv "$LIBS.tmp" "$LIBS"
        fetch_stamp >"$KAFKA_HOME/fetched"
        log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars"
    ) 9>"$KAFKA_HOME/.lock"
}

# JVM start-up is most of a broker's boot time on 2 cores. Class-data sharing cuts about a third
# of the CPU a boot takes: while the cache has no archive, nodes run with
# -XX:ArchiveClassesAtExit and write one into their node directory when they exit; `stop` moves
# one from a node that exited cleanly to $CDS_ARCHIVE, and every later JVM (brokers, format,
# tools) maps the classes from there instead of parsing them from the jars. The JVM checks the
# archive against itself and the class path and ignores it when they differ.
# LOGRAIL_KAFKA_CDS=0 turns all this off.
cds_enabled() { [[ "${LOGRAIL_KAFKA_CDS:-1}" != 0 ]]; }

# The archive option, if there is an archive to use.
cds_opt() {
    if cds_enabled && [[ -f "$CDS_ARCHIVE" ]]; then
        echo "-XX:SharedArchiveFile=$CDS_ARCHIVE"
    else
        echo "-Xshare:auto"
    fi
}

# ------------------------------------------------------------------------------------- helpers

# A short-lived JVM for kafka.sh's own steps (storage format): C1 only and a small serial heap,
# which start noticeably faster than the defaults on 2 cores.
java_quick() {
    "$JAVA" -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "$(cds_opt)" \
        -Dlog4j2.configurationFile="$HERE/log4j2-tools.xml" -cp "$LIBS/*" "$@"
}

secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

abs_dir() { realpath -m -- "$1"; }

# COUNT distinct ports that 127.0.0.1 can bind now, picked at random outside the kernel's
# ephemeral range (so clients' outgoing connections cannot be handed one of them later).
pick_ports() {
    python3 - "$1" <<'EOF'
import random, socket, sys
n = int(sys.argv[1])
lo, hi = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
pool = [p for p in range(10000, 65536) if not lo <= p <= hi]
pool = [p for p in pool if p >= 20000] or pool
got = []
for p in random.sample(pool, min(len(pool), 2000)):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p))
    except OSError:
        continue
    finally:
        s.close()
    got.append(p)
    if len(got) == n:
        print(*got)
        sys.exit(0)
sys.exit("kafka.sh: no free ports")
EOF
}

load_cluster() { # DIR -> sets dir, NODES, HEAP, CLUSTER_ID, BROKER_PORTS[], CONTROLLER_PORTS[], SASL_PORTS[]
    dir="$(abs_dir "$1")"
    [[ -f "$dir/cluster.env" ]] || die "$dir holds no cluster started by kafka.sh (no cluster.env)"
    SASL_PORT_LIST=""
    # shellcheck source=/dev/null
    source "$dir/cluster.env"
    LIBS="$KAFKA_HOME/libs" CDS_ARCHIVE="$KAFKA_HOME/kafka.jsa"
    read -r -a BROKER_PORTS <<<"$BROKER_PORT_LIST"
    read -r -a CONTROLLER_PORTS <<<"$CONTROLLER_PORT_LIST"
    read -r -a SASL_PORTS <<<"$SASL_PORT_LIST"
}

check_node_arg() {
    if ! [[ "$1" =~ ^[0-9]+$ ]] || (($1 < 1 || $1 > NODES)); then die "NODE must be 1..$NODES, not '$1'"; fi
}

node_pid() { cat "$dir/node-$1.pid" 2>/dev/null || true; }

# True if node $1's JVM runs: its pid is alive and really is that node (guards against pid reuse
# and zombies, whose cmdline is empty).
node_alive() {
    local pid; pid="$(node_pid "$1")"
    [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null &&
        tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$dir/node-$1/server.properties"
}

bootstrap_list() { # [PORTS_ARRAY_NAME] (default BROKER_PORTS)
    local -n ports_="${1:-BROKER_PORTS}"
    local i out=""
    for ((i = 1; i <= NODES; i++)); do out+="${out:+,}127.0.0.1:${ports_[i - 1]}"; done
    echo "$out"
}

# A throwaway CA and one server certificate (EC P-256, SAN IP:127.0.0.1 and DNS:localhost) that
# every node uses, in DIR/tls: ca.pem (the truststore), server.pem (the PKCS#8 key, unencrypted,
# then the chain: Kafka's PEM keystore file).
make_certs() { # TLS_DIR
    local t="$1"
    mkdir -p "$t"
    (
        cd "$t"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
            -subj "/CN=lograil test CA" -keyout ca.key -out ca.pem \
            -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj "/CN=localhost" -keyout server.key -out server.csr
        printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost" "basicConstraints=CA:FALSE" \
            "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth,clientAuth" >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 30 \
            -extfile server.ext -out server.crt
        cat server.key server.crt ca.pem >server.pem
    ) >"$t/openssl.log" 2>&1 || { cat "$t/openssl.log" >&2; die "openssl could not make the test certificates"; }
}

# The Java properties for alice over SASL_SSL with SCRAM-SHA-512, and the SASL_SSL bootstrap.
write_client_files() {
    bootstrap_list SASL_PORTS >"$dir/bootstrap-sasl-ssl"
    cat >"$dir/client-sasl-ssl.properties" <<EOF
# Client properties for this cluster's SASL_SSL listeners ($(<"$dir/bootstrap-sasl-ssl")),
# written by tests/kafka/kafka.sh.
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="alice-secret";
ssl.truststore.type=PEM
ssl.truststore.location=$dir/tls/ca.pem
EOF
}

launch_node() {
    local i="$1" nd="$dir/node-$1"
    mkdir -p "$nd/logs"
    rm -f "$dir/node-$i.pid"
    # JVM flags as Kafka's kafka-run-class.sh / kafka-server-start.sh use them, with our heap;
    # JIT=c1 (default for multi-node test clusters) stops at the quick C1 compiler, which halves
    # the CPU a boot takes, at the cost of peak throughput.
    local jit=() cds
    [[ "${JIT:-full}" == c1 ]] && jit=(-XX:TieredStopAtLevel=1)
    cds="$(cds_opt)"
    rm -f "$nd/kafka.jsa"
    if cds_enabled && [[ ! -f "$CDS_ARCHIVE" ]]; then cds="-XX:ArchiveClassesAtExit=$nd/kafka.jsa"; fi
    # shellcheck disable=SC2016,SC2086 # $$ is the inner shell's; JVM_OPTS is meant to split
    setsid bash -c 'echo $$ >"$0"; exec "$@"' "$dir/node-$i.pid" \
        "$JAVA" "-Xms$HEAP" "-Xmx$HEAP" ${jit[@]+"${jit[@]}"} -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
        -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent \
        -XX:MaxInlineLevel=15 -Djava.awt.headless=true "$cds" ${LOGRAIL_KAFKA_JVM_OPTS:-} \
        -Dlog4j2.configurationFile="$HERE/log4j2-broker.xml" -Dkafka.logs.dir="$nd/logs" \
        -cp "$LIBS/*" kafka.Kafka "$nd/server.properties" \
        </dev/null >"$nd/stdout.log" 2>&1 9>&- &
    disown # no "Killed" job reports from this shell when kill/stop end the node
    local t
    for ((t = 0; t < 100; t++)); do [[ -s "$dir/node-$i.pid" ]] && return 0; sleep 0.05; done
    die "node $i did not start (see $nd/stdout.log)"
}

node_failed() { # print why node $1 is down
    log "node $1 is not running; last lines of $dir/node-$1/logs/server.log and stdout.log:"
    tail -n 30 "$dir/node-$1/logs/server.log" >&2 2>/dev/null || true
    tail -n 10 "$dir/node-$1/stdout.log" >&2 2>/dev/null || true
}

# Succeeds if every given port answers a Kafka Metadata request (v1, no topics) whose broker
# list (registered, unfenced brokers) includes every id in EXPECT (comma-separated). Plain
# Python rather than a Kafka tool: a JVM start per probe costs 1-2 s on 2 cores.
metadata_lists() { # EXPECT PORT...
    python3 - "$@" <<'EOF'
import socket, struct, sys
expect = {int(x) for x in sys.argv[1].split(",")}
def read(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("connection closed")
        b += c
    return b
def brokers(port):
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.settimeout(5)
        cid = b"lograil-kafka.sh"
        body = struct.pack(">hhih", 3, 1, 1, len(cid)) + cid + struct.pack(">i", 0)
        s.sendall(struct.pack(">i", len(body)) + body)
        r = read(s, struct.unpack(">i", read(s, 4))[0])
    off = 4  # correlation id
    (n,) = struct.unpack_from(">i", r, off); off += 4
    ids = set()
    for _ in range(n):
        (node_id, host_len) = struct.unpack_from(">ih", r, off); off += 6 + host_len + 4
        (rack_len,) = struct.unpack_from(">h", r, off); off += 2 + max(rack_len, 0)
        ids.add(node_id)
    return ids
for port in map(int, sys.argv[2:]):
    try:
        got = brokers(port)
    except (OSError, EOFError, struct.error) as e:
        print(f"127.0.0.1:{port}: {e}", file=sys.stderr)
        sys.exit(1)
    if not expect <= got:
        print(f"127.0.0.1:{port} lists brokers {sorted(got)}, want {sorted(expect)}", file=sys.stderr)
        sys.exit(1)
EOF
}

# Wait until the nodes given (and every other node that runs) answer metadata requests that list
# all running nodes as registered brokers. Fails early if a node given dies.
wait_ready() {
    local deadline=$((SECONDS + START_TIMEOUT)) i why="" ids ports
    while :; do
        for i in "$@"; do node_alive "$i" || { node_failed "$i"; return 1; }; done
        ids="" ports=()
        for ((i = 1; i <= NODES; i++)); do
            node_alive "$i" && ids+="${ids:+,}$i" && ports+=("${BROKER_PORTS[i - 1]}")
        done
        why="$(metadata_lists "$ids" "${ports[@]}" 2>&1)" && return 0
        ((SECONDS < deadline)) || { log "timed out after ${START_TIMEOUT}s: $why"; return 1; }
        sleep 0.25
    done
}

# SIGTERM the given nodes and wait for them to exit; SIGKILL whatever is left after STOP_TIMEOUT,
# or QUORUM_GRACE seconds after the cluster lost its controller majority. A broker's controlled
# shutdown needs the controller quorum: when every node gets SIGTERM at once, the last one
# sometimes requests it only after the others are gone, and then retries forever. (The last
# controller also waits 5 s for a Raft quorum that has gone; the grace covers that.)
QUORUM_GRACE=8
stop_nodes() {
    local i left alive deadline=$((SECONDS + STOP_TIMEOUT)) lost_at="" killed=()
    for i in "$@"; do
        if node_alive "$i"; then kill -TERM "$(node_pid "$i")" 2>/dev/null || true; fi
    done
    while :; do
        left=() alive=0
        for i in "$@"; do node_alive "$i" && left+=("$i"); done
        ((${#left[@]} == 0)) && break
        for ((i = 1; i <= NODES; i++)); do node_alive "$i" && alive=$((alive + 1)); done
        if [[ -z "$lost_at" ]] && ((alive <= NODES / 2)); then lost_at="$SECONDS"; fi
        if ((${#killed[@]} == 0)) && { ((SECONDS >= deadline)) ||
            { [[ -n "$lost_at" ]] && ((SECONDS >= lost_at + QUORUM_GRACE)); }; }; then
            if [[ -n "$lost_at" ]]; then
                log "node(s) ${left[*]} still up ${QUORUM_GRACE}s after the controller quorum went; sending SIGKILL"
            else
                log "node(s) ${left[*]} still up ${STOP_TIMEOUT}s after SIGTERM; sending SIGKILL"
            fi
            for i in "${left[@]}"; do kill -KILL "$(node_pid "$i")" 2>/dev/null || true; done
            killed+=("${left[@]}")
        fi
        sleep 0.2
    done
    for i in "$@"; do rm -f "$dir/node-$i.pid"; done
    # Keep a class-data-sharing archive that a node wrote on a clean exit (not one cut off by
    # SIGKILL); see cds_enabled.
    local jsa
    for i in "$@"; do
        jsa="$dir/node-$i/kafka.jsa"
        if [[ -s "$jsa" && " ${killed[*]} " != *" $i "* && ! -f "$CDS_ARCHIVE" ]]; then
            cp "$jsa" "$CDS_ARCHIVE.$$.tmp" && mv -f "$CDS_ARCHIVE.$$.tmp" "$CDS_ARCHIVE" &&
                log "saved a class-data-sharing archive to $CDS_ARCHIVE (faster JVM starts from now on)"
        fi
        rm -f "$jsa"
    done
}

# ---------------------------------------------------------------------------------- subcommands

cmd_start() {
    [[ $# -ge 1 ]] || usage
    local arg_dir="$1" n=3 features=() feature
    shift
    feature="${LOGRAIL_KAFKA_FEATURES:-}"; read -r -a features <<<"${feature//,/ }"
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --brokers) [[ $# -ge 2 ]] || usage; n="$2"; shift 2 ;;
            --brokers=*) n="${1#*=}"; shift ;;
            --feature) [[ $# -ge 2 ]] || usage; features+=("$2"); shift 2 ;;
            --feature=*) features+=("${1#*=}"); shift ;;
            *) usage ;;
        esac
    done
    [[ "$n" =~ ^[1-9]$ ]] || die "--brokers must be 1..9, not '$n'"
    FEATURE_ARGS=()
    for feature in "${features[@]}"; do
        [[ "$feature" =~ ^[a-z][a-z0-9._]*=[0-9]+$ ]] ||
            die "a feature is NAME=LEVEL (e.g. share.version=2), not '$feature'"
        FEATURE_ARGS+=(--feature "$feature")
    done
    cmd_fetch

    dir="$(abs_dir "$arg_dir")"
    if [[ -e "$dir" ]]; then
        if [[ -f "$dir/cluster.env" ]]; then
            # (In a subshell: load_cluster would replace this run's settings with the old ones.)
            if (load_cluster "$dir" && for ((i = 1; i <= NODES; i++)); do node_alive "$i" && exit 0; done; exit 1); then
                die "a cluster already runs in $dir; stop it first"
            fi
            # A stopped cluster of ours: start afresh.
            rm -rf "$dir"/node-* "$dir/bootstrap" "$dir/cluster.env" "$dir/tls" \
                "$dir/bootstrap-sasl-ssl" "$dir/client-sasl-ssl.properties"
        elif [[ -n "$(ls -A "$dir")" ]]; then
            die "$dir exists, is not empty and holds no kafka.sh cluster; give a new or empty directory"
        fi
    fi
    mkdir -p "$dir"

    NODES="$n"
    HEAP="${LOGRAIL_KAFKA_HEAP:-$([[ $n -eq 1 ]] && echo 1g || echo 512m)}"
    JIT="${LOGRAIL_KAFKA_JIT:-$([[ $n -eq 1 ]] && echo full || echo c1)}"
    [[ "$JIT" == full || "$JIT" == c1 ]] || die "LOGRAIL_KAFKA_JIT must be full or c1, not '$JIT'"
    local ports=()
    read -r -a ports <<<"$(pick_ports $((3 * n)))"
    BROKER_PORTS=("${ports[@]:0:n}")
    CONTROLLER_PORTS=("${ports[@]:n:n}")
    SASL_PORTS=("${ports[@]:2*n:n}")
    # A random Kafka Uuid: 16 bytes, URL-safe base64 without padding; like Kafka's own
    # Uuid.randomUuid, never one starting with "-" (command lines would take it for an option).
    CLUSTER_ID=-
    while [[ "$CLUSTER_ID" == -* ]]; do
        CLUSTER_ID="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
    done
    {
        echo "# written by kafka.sh start; read by stop/kill/restart/status"
        printf '%s=%q\n' KAFKA_VERSION "$KAFKA_VERSION" KAFKA_HOME "$KAFKA_HOME" \
            CLUSTER_ID "$CLUSTER_ID" NODES "$NODES" HEAP "$HEAP" JIT "$JIT" \
            BROKER_PORT_LIST "${BROKER_PORTS[*]}" CONTROLLER_PORT_LIST "${CONTROLLER_PORTS[*]}" \
            SASL_PORT_LIST "${SASL_PORTS[*]}"
    } >"$dir/cluster.env"
    command -v openssl >/dev/null || die "openssl is not on PATH (apt-get install openssl)"
    make_certs "$dir/tls"

    local rf=$((n < 3 ? n : 3)) min_isr=$((n < 2 ? n : 2)) voters="" i
    for ((i = 1; i <= n; i++)); do voters+="${voters:+,}$i@127.0.0.1:${CONTROLLER_PORTS[i - 1]}"; done
    for ((i = 1; i <= n; i++)); do
        mkdir -p "$dir/node-$i/data" "$dir/node-$i/logs"
        cat >"$dir/node-$i/server.properties" <<EOF
# Node $i of a $n-node Kafka $KAFKA_VERSION test cluster, written by tests/kafka/kafka.sh.
# Kafka's defaults except where noted.
process.roles=broker,controller
node.id=$i
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:${BROKER_PORTS[i - 1]},CONTROLLER://127.0.0.1:${CONTROLLER_PORTS[i - 1]},SASL_SSL://127.0.0.1:${SASL_PORTS[i - 1]}
advertised.listeners=PLAINTEXT://127.0.0.1:${BROKER_PORTS[i - 1]},SASL_SSL://127.0.0.1:${SASL_PORTS[i - 1]}
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
# The clients' SASL_SSL listener: TLS from PEM files, SCRAM users from the metadata log (added
# at format time), PLAIN users from the JAAS config.
listener.name.sasl_ssl.ssl.keystore.type=PEM
listener.name.sasl_ssl.ssl.keystore.location=$dir/tls/server.pem
listener.name.sasl_ssl.ssl.truststore.type=PEM
listener.name.sasl_ssl.ssl.truststore.location=$dir/tls/ca.pem
listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512,SCRAM-SHA-256,PLAIN
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret" user_bob="bob-secret";
log.dirs=$dir/node-$i/data
auto.create.topics.enable=true
# Internal topics sized to the cluster (Kafka's defaults, 3 and min.isr 2, need >= 3 brokers).
offsets.topic.replication.factor=$rf
transaction.state.log.replication.factor=$rf
transaction.state.log.min.isr=$min_isr
share.coordinator.state.topic.replication.factor=$rf
share.coordinator.state.topic.min.isr=$min_isr
# Share groups (KIP-932): enabled by the share.version feature (1: share groups; 2, Kafka 4.4's
# default: also KIP-1191's dead-letter queues), set when the storage is formatted
# (LOGRAIL_KAFKA_FEATURES / --feature). group.share.enable is not needed.
EOF
        # Extra settings of the caller's (e.g. an authorizer), one per line.
        if [[ -n "${LOGRAIL_KAFKA_PROPERTIES:-}" ]]; then
            printf '%s\n' "$LOGRAIL_KAFKA_PROPERTIES" >>"$dir/node-$i/server.properties"
        fi
    done

    # Format every node's storage (in parallel: each is a JVM start).
    local t0="$EPOCHREALTIME" t1 t2 pids=()
    for ((i = 1; i <= n; i++)); do
        java_quick kafka.tools.StorageTool format --cluster-id "$CLUSTER_ID" \
            --config "$dir/node-$i/server.properties" "${FEATURE_ARGS[@]}" \
            --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]' \
            --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' \
            >"$dir/node-$i/format.log" 2>&1 &
        pids+=($!)
    done
    for ((i = 1; i <= n; i++)); do
        wait "${pids[i - 1]}" || { cat "$dir/node-$i/format.log" >&2; die "formatting node $i failed"; }
    done

    t1="$EPOCHREALTIME"
    for ((i = 1; i <= n; i++)); do launch_node "$i"; done
    local nodes=()
    mapfile -t nodes < <(seq 1 "$n")
    if ! wait_ready "${nodes[@]}"; then
        log "start failed; stopping the nodes (logs stay in $dir)"
        STOP_TIMEOUT=5 stop_nodes "${nodes[@]}"
        exit 1
    fi
    t2="$EPOCHREALTIME"
    bootstrap_list >"$dir/bootstrap"
    write_client_files
    log "$n-node Kafka $KAFKA_VERSION cluster up in $dir after $(secs "$t0" "$t2")s" \
        "(format $(secs "$t0" "$t1")s, boot $(secs "$t1" "$t2")s)"
    cat "$dir/bootstrap"
}

cmd_stop() {
    [[ $# -eq 1 ]] || usage
    local d; d="$(abs_dir "$1")"
    [[ -f "$d/cluster.env" ]] || { log "no cluster in $d; nothing to stop"; return 0; }
    load_cluster "$1"
    stop_nodes $(seq 1 "$NODES")
}

cmd_kill() {
    [[ $# -eq 2 ]] || usage
    load_cluster "$1"
    check_node_arg "$2"
    local i="$2" t
    if ! node_alive "$i"; then log "node $i is not running"; return 0; fi
    kill -KILL "$(node_pid "$i")"
    for ((t = 0; t < 100; t++)); do node_alive "$i" || return 0; sleep 0.1; done
    die "node $i survived SIGKILL?"
}

cmd_restart() {
    [[ $# -eq 2 ]] || usage
    load_cluster "$1"
    check_node_arg "$2"
    node_alive "$2" && stop_nodes "$2"
    launch_node "$2"
    wait_ready "$2" || die "node $2 did not come back"
}

cmd_status() {
    [[ $# -eq 1 ]] || usage
    load_cluster "$1"
    local i rc=0
    for ((i = 1; i <= NODES; i++)); do
        if node_alive "$i"; then
            echo "node $i running pid $(node_pid "$i") 127.0.0.1:${BROKER_PORTS[i - 1]}"
        else
            echo "node $i stopped 127.0.0.1:${BROKER_PORTS[i - 1]}"
            rc=1
        fi
    done
    return "$rc"
}

cmd_tool() {
    [[ $# -ge 2 ]] || usage
    local d="$1" class="$2" a bs=""
    shift 2
    cmd_fetch
    local args=()
    for a in "$@"; do
        if [[ "$a" == "@bootstrap" ]]; then
            [[ "$d" != "-" && -f "$d/bootstrap" ]] || die "@bootstrap given but $d/bootstrap does not exist"
            [[ -n "$bs" ]] || bs="$(<"$d/bootstrap")"
            a="$bs"
        fi
        args+=("$a")
    done
    exec "$JAVA" "-Xmx${LOGRAIL_KAFKA_TOOL_HEAP:-512m}" -Djava.awt.headless=true "$(cds_opt)" \
        -Dlog4j2.configurationFile="$HERE/log4j2-tools.xml" -cp "$LIBS/*" "$class" ${args[@]+"${args[@]}"}
}

[[ $# -ge 1 ]] || usage
cmd="$1"
shift
case "$cmd" in
    fetch) [[ $# -eq 0 ]] || usage; cmd_fetch ;;
    start) cmd_start "$@" ;;
    stop) cmd_stop "$@" ;;
    kill) cmd_kill "$@" ;;
    restart) cmd_restart "$@" ;;
    status) cmd_status "$@" ;;
    tool) cmd_tool "$@" ;;
    -h | --help | help) usage ;;
    *) usage ;;
esac
