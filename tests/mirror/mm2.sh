#!/usr/bin/env bash
# mm2.sh: Apache Kafka's MirrorMaker 2 in dedicated mode
# (org.apache.kafka.connect.mirror.MirrorMaker), for lograil's migration tests. The jars come
# from Maven Central (pom.xml beside this script) into a cache directory; nothing downloaded
# lives in the repository.
#
# Usage:
#   mm2.sh fetch               get MirrorMaker 2 and a logging backend into the cache (a no-op
#                              when already there)
#   mm2.sh run PROPS [ARGS...] run MirrorMaker with the properties file PROPS (in the
#                              foreground; ARGS go to MirrorMaker, e.g. --clients src->dst)
#
# Environment:
#   LOGRAIL_MM2_HOME   cache directory (default ~/.cache/lograil/mirror-maker-<version>)
#   LOGRAIL_MM2_HEAP   heap (default 512m)
#   LOGRAIL_MM2_LOG4J  a Log4j 2 configuration file (default log4j2.xml beside this script:
#                      warnings and errors, and MirrorMaker's own start and stop lines)
#   JAVA_HOME          used for bin/java when set; otherwise `java` on PATH
# Needs: bash, java (17+), mvn (for fetch), flock.
#
# The version is MirrorMaker's, not the broker's: connect-mirror is not served at 4.4.0 and 4.3's
# MirrorMaker does not run on 4.4's kafka-clients, so this is a whole 4.3 stack, apart from
# tests/kafka/kafka.sh's 4.4 jars.
set -euo pipefail

MM2_VERSION=4.3.1
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
MM2_HOME="${LOGRAIL_MM2_HOME:-$HOME/.cache/lograil/mirror-maker-$MM2_VERSION}"
LIBS="$MM2_HOME/libs"
if [[ -n "${JAVA_HOME:-}" && -x "$JAVA_HOME/bin/java" ]]; then JAVA="$JAVA_HOME/bin/java"; else JAVA=java; fi

log() { echo "mm2.sh: $*" >&2; }
die() { log "$*"; exit 1; }
usage() { sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}" >&2; exit 2; }

fetch_stamp() { echo "$MM2_VERSION $(sha256sum <"$HERE/pom.xml" | cut -d' ' -f1)"; }
fetched() { [[ -f "$MM2_HOME/fetched" && "$(<"$MM2_HOME/fetched")" == "$(fetch_stamp)" ]]; }

cmd_fetch() {
    fetched && return 0
    command -v mvn >/dev/null || die "mvn is not on PATH (apt-get install maven)"
    mkdir -p "$MM2_HOME"
    (
        flock 9
        fetched && exit 0
        log "fetching MirrorMaker $MM2_VERSION jars with Maven into $MM2_HOME"
        rm -rf "$MM2_HOME/.maven" "$LIBS.tmp"
        mkdir "$MM2_HOME/.maven"
        cp "$HERE/pom.xml" "$MM2_HOME/.maven/pom.xml"
        if ! (cd "$MM2_HOME/.maven" &&
            mvn -q -B -Dstyle.color=never dependency:copy-dependencies \
                -Dmirror.version="$MM2_VERSION" -DoutputDirectory="$LIBS.tmp") >"$MM2_HOME/fetch.log" 2>&1; then
            sed 's/\x1b\[[0-9;]*m//g' "$MM2_HOME/fetch.log" >&2
            die "mvn could not fetch MirrorMaker $MM2_VERSION (log above, and in $MM2_HOME/fetch.log)"
        fi
        [[ -f "$LIBS.tmp/connect-mirror-$MM2_VERSION.jar" ]] ||
            die "mvn finished but connect-mirror-$MM2_VERSION.jar is missing from $LIBS.tmp"
        rm -rf "$LIBS" "$MM2_HOME/.maven"
        mv "$LIBS.tmp" "$LIBS"
        fetch_stamp >"$MM2_HOME/fetched"
        log "fetched $(find "$LIBS" -name '*.jar' | wc -l) jars"
    ) 9>"$MM2_HOME/.lock"
}

cmd_run() {
    [[ $# -ge 1 ]] || usage
    local props="$1"
    shift
    [[ -f "$props" ]] || die "no properties file $props"
    cmd_fetch
    # C1 only and a serial heap: MirrorMaker is a short-lived test tool here, and the JVM's full
    # JIT costs more CPU than it saves on 2 cores.
    exec "$JAVA" "-Xmx${LOGRAIL_MM2_HEAP:-512m}" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
        -Djava.awt.headless=true \
        -Dlog4j2.configurationFile="${LOGRAIL_MM2_LOG4J:-$HERE/log4j2.xml}" \
        -cp "$LIBS/*" org.apache.kafka.connect.mirror.MirrorMaker "$props" "$@"
}

[[ $# -ge 1 ]] || usage
cmd="$1"
shift
case "$cmd" in
    fetch) [[ $# -eq 0 ]] || usage; cmd_fetch ;;
    run) cmd_run "$@" ;;
    -h | --help | help) usage ;;
    *) usage ;;
esac
