#!/usr/bin/env bash
# run_scenarios.sh BOOTSTRAP [run_scenarios.py options...]
# Builds the Java share worker if it is missing or older than its sources, then runs every
# share-group scenario against BOOTSTRAP with both reference clients (see README.md).
# Needs java 17+, mvn (first build), python3 with confluent-kafka >= 2.16.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
[[ $# -ge 1 ]] || { sed -n '2,4s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }
"$HERE/build.sh"
exec python3 "$HERE/run_scenarios.py" "$@"
