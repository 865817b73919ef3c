#!/usr/bin/env bash
# Issue 27's noisy neighbour: `lograil-bench noisy` (tenant A floods a one-partition share-group
# queue with FLOOD tasks, then B, C, D submit FEW each; WORKERS workers at SERVICE_MS a task;
# runs idle / fifo / fair, then the throughput check FIFO against fair) REPS times, each against
# a fresh `lograil serve`; one JSON per repetition, the medians table (noisy_table.py) and
# noisy.svg (the median repetition's waits) into $OUT.
#
#   cargo build --release -p lograil -p lograil-benches
#   bash benches/scripts/noisy.sh
#
# Environment: BROKER, BENCH, OUT, DATA, REPS (default 3), FLOOD (10000), FEW (20), WORKERS (8),
# SERVICE_MS (10), FAIR (the fair run's group config, default lograil.share.fairness.key=key),
# RUNS (default idle,fifo,fair,throughput).
set -euo pipefail
cd "$(dirname "$0")/../.."

BROKER=${BROKER:-target/release/lograil}
BENCH=${BENCH:-target/release/lograil-bench}
OUT=${OUT:-target/bench-results/noisy-$(date -u +%Y%m%dT%H%M%SZ)}
DATA=$(realpath -m "${DATA:-target/bench-data}")
REPS=${REPS:-3}
FLOOD=${FLOOD:-10000}
FEW=${FEW:-20}
WORKERS=${WORKERS:-8}
SERVICE_MS=${SERVICE_MS:-10}
FAIR=${FAIR:-lograil.share.fairness.key=key}
RUNS=${RUNS:-idle,fifo,fair,throughput}
mkdir -p "$OUT" "$DATA"
echo "results in $OUT"

source benches/scripts/serve.sh
for rep in $(seq "$REPS"); do
    DIR=$(mktemp -d "$DATA/noisy-XXXX")
    serve_lograil "$DIR"
    "$BENCH" noisy --brokers "$BROKER_ADDR" --flood "$FLOOD" --few "$FEW" --workers "$WORKERS" \
        --service-ms "$SERVICE_MS" --fair-config "$FAIR" --runs "$RUNS" \
        --label "repetition $rep" --json "$OUT/noisy-$rep.json" --plot "$OUT/noisy-$rep.svg" \
        >"$OUT/noisy-$rep.txt" 2>"$OUT/noisy-$rep.err" || {
        echo "repetition $rep failed:" >&2
        tail -3 "$OUT/noisy-$rep.err" >&2
    }
    tail -3 "$OUT/noisy-$rep.txt" || true
    kill "$BROKER_PID"
    wait "$BROKER_PID" || true
    rm -rf "$DIR"
done
python3 benches/scripts/noisy_table.py "$OUT" | tee "$OUT/table.md"
