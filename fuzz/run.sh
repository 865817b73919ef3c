#!/usr/bin/env bash
# Builds every fuzz target and runs each for SECONDS (default 60) from its seed corpus in
# corpus/<target>/, one after the other; stops at the first crash, prints the reproducer and
# how to replay and minimize it, and exits non-zero. Needs the nightly toolchain and cargo-fuzz
# (`rustup toolchain install nightly`, `cargo install cargo-fuzz`).
#
#   fuzz/run.sh [SECONDS] [TARGET...]
#
# What libFuzzer finds beyond the seeds is kept in fuzz/work/<target>/ (not checked in) and
# used again by the next run; crashes land in fuzz/artifacts/<target>/.
set -euo pipefail

seconds=${1:-60}
shift || true
cd "$(dirname "$0")"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(frame request request_body record_batch segment_chain sasl_plain scram_server)
fi

# The same flags for build and run, or cargo-fuzz rebuilds everything. 16 codegen units: a much
# shorter build of kafka-protocol for slightly slower fuzzing.
flags=(-O --codegen-units 16)
# The request and segment_chain targets create a data dir per input: on tmpfs when there is one.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    export TMPDIR=/dev/shm
fi

# Per-target libFuzzer options. A decoder that allocates far beyond its input is a crash.
options() {
    case $1 in
        frame | request_body | record_batch) echo "-malloc_limit_mb=16" ;;
        *) echo "" ;;
    esac
}

echo "building ${targets[*]}"
cargo +nightly fuzz build "${flags[@]}" 2>&1 | grep -E "^(error|warning: unused)" || true
summary=()
for target in "${targets[@]}"; do
    mkdir -p "work/$target"
    log="work/$target.log"
    echo "fuzzing $target for ${seconds}s (log: fuzz/$log)"
    # shellcheck disable=SC2046
    if ! cargo +nightly fuzz run "${flags[@]}" "$target" "work/$target" "corpus/$target" -- \
        -max_total_time="$seconds" -timeout=10 -print_final_stats=1 $(options "$target") \
        >"$log" 2>&1; then
        crash=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
        echo
        echo "CRASH in $target:"
        grep -E "panicked at|^ERROR|SUMMARY" -A2 "$log" | head -20 || true
        if [ -n "$crash" ]; then
            echo
            echo "reproducer: fuzz/${crash#"$PWD"/}"
            echo "replay:     cargo +nightly fuzz run ${flags[*]} $target ${crash#"$PWD"/}   (in fuzz/)"
            echo "minimize:   cargo +nightly fuzz tmin ${flags[*]} $target ${crash#"$PWD"/}"
        else
            tail -20 "$log"
        fi
        exit 1
    fi
    done_line=$(grep -E "^#[0-9]+[[:space:]]+DONE" "$log" | tail -1)
    summary+=("$(printf '%-14s %s' "$target" "${done_line#*DONE}")")
done
echo
echo "no crash; per target: coverage (edges), features, corpus, executions per second"
printf '%s\n' "${summary[@]}"
