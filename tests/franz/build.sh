#!/usr/bin/env bash
# build.sh: build bin/franz-roundtrip (franz-go, from the Go module proxy) unless it is newer than
# go.mod, go.sum and the sources.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="$HERE/bin/franz-roundtrip"
if [[ -f "$BIN" && -z "$(find "$HERE/go.mod" "$HERE/go.sum" "$HERE/main.go" "$HERE/txn.go" -newer "$BIN" -print -quit)" ]]; then
    exit 0
fi
command -v go >/dev/null || { echo "build.sh: go is not on PATH" >&2; exit 1; }
echo "build.sh: building $BIN" >&2
(cd "$HERE" && go build -o "$BIN" .) >&2
