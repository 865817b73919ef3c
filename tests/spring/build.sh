#!/usr/bin/env bash
# build.sh: build java/target/spring-retry-app.jar unless it is newer than pom.xml and every source.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAR="$HERE/java/target/spring-retry-app.jar"
if [[ -f "$JAR" && -z "$(find "$HERE/java/pom.xml" "$HERE/java/src" -newer "$JAR" -print -quit)" ]]; then
    exit 0
fi
command -v mvn >/dev/null || { echo "build.sh: mvn is not on PATH" >&2; exit 1; }
echo "build.sh: building $JAR" >&2
t0=$EPOCHREALTIME
(cd "$HERE/java" && mvn -q -B -Dstyle.color=never package) >&2
echo "build.sh: built in $(python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f}')")s" >&2
