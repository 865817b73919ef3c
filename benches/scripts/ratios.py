#!/usr/bin/env python3
"""Turns criterion's results for the log_core bench into the BENCHMARKS.md table: the median
time per iteration of each benchmark, its throughput, and its ratio to the raw baseline of the
same group measured in the same run.

Usage: python3 benches/scripts/ratios.py [new|base]   (criterion keeps the last two runs)
"""
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2] / "target" / "criterion"
WHICH = sys.argv[1] if len(sys.argv) > 1 else "new"

# group -> [(log-core id, raw id)]
PAIRS = {
    "append_never": [("log_core/100B_x_16KiB", "raw_write/100B_x_16KiB"),
                     ("log_core/1KiB_x_1MiB", "raw_write/1KiB_x_1MiB")],
    "append_always": [("log_core_4_appenders/100B_x_16KiB", "raw_write_fdatasync/100B_x_16KiB")],
    "sequential_read": [("log_core/256MiB", "raw_read/256MiB")],
}
# Records in one iteration's bytes (the bench's batches: 160 x 100 B, 1000 x 1 KiB).
RECORDS = {"100B_x_16KiB": 160, "1KiB_x_1MiB": 1000}


def load(group, ident):
    d = ROOT / group / ident / WHICH
    if not d.exists():  # bench_function ids are stored with '/' as '_'
        d = ROOT / group / ident.replace("/", "_") / WHICH
    median_ns = json.loads((d / "estimates.json").read_text())["median"]["point_estimate"]
    bench = json.loads((d / "benchmark.json").read_text())
    nbytes = bench["throughput"]["Bytes"]
    return median_ns, nbytes


print("| benchmark | log-core | raw, same run | ratio |")
print("|---|---|---|---|")
for group, pairs in PAIRS.items():
    for ours, raw in pairs:
        t_ours, n = load(group, ours)
        t_raw, n_raw = load(group, raw)
        mbs = lambda t, n: n / t * 1e9 / 1e6
        label = ours.split("/")[-1]
        records = RECORDS.get(label)
        rec = f", {records / t_ours * 1e9 / 1e6:.2f} M records/s" if records else ""
        print(f"| {group}/{ours} | {mbs(t_ours, n):,.0f} MB/s{rec} | {mbs(t_raw, n_raw):,.0f} MB/s ({raw.split('/')[0]}) | {t_raw / t_ours * n / n_raw:.2f} |")
