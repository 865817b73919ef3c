#!/usr/bin/env bash
# build.sh: build java/target/ecosystem.jar and java/target/lib/ (its dependencies) unless the jar
# is newer than pom.xml and every source.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
JAR="$HERE/java/target/ecosystem.jar"
if [[ -f "$JAR" && -d "$HERE/java/target/lib" && -z "$(find "$HERE/java/pom.xml" "$HERE/java/src" -newer "$JAR" -print -quit)" ]]; then
    exit 0
fi
command -v mvn >/dev/null || { echo "build.sh: mvn is not on PATH" >&2; exit 1; }
echo "build.sh: building $JAR" >&2
t0=$EPOCHREALTIME
# A stale lib/ could keep jars of dependencies that are gone: copy them anew.
rm -rf "$HERE/java/target/lib"
(cd "$HERE/java" && mvn -q -B -Dstyle.color=never package) >&2
echo "build.sh: built in $(python3 -c "print(f'{$EPOCHREALTIME - $t0:.1f}')")s" >&2
