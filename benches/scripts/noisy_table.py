#!/usr/bin/env python3
"""The noisy-neighbour table of BENCHMARKS.md from `noisy.sh`'s JSONs in DIR: per run and
tenant the median (min-max) over the repetitions of the p50 and p99 wait and the completion
time, then the targets' ratios (each computed within one repetition, then the median); copies
the median repetition's SVG (by the fair/idle ratio) to DIR/noisy.svg."""
import glob
import json
import shutil
import statistics
import sys


def spread(values, fmt):
    if not values:
        return "-"
    m = statistics.median(values)
    if len(values) == 1:
        return fmt.format(m)
    return f"{fmt.format(m)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def main(out):
    reports = []
    for path in sorted(glob.glob(f"{out}/noisy-*.json")):
        with open(path) as f:
            reports.append((path, json.load(f)))
    if not reports:
        sys.exit(f"no noisy-*.json in {out}")
    print(f"{len(reports)} repetitions; median (min-max)\n")
    print("| run | tenant | tasks | wait p50 ms | wait p99 ms | done after s |")
    print("|---|---|---|---|---|---|")
    names = [r["run"] for r in reports[0][1]["runs"] if r["tenants"]]
    for name in names:
        tenants = {}
        for _, rep in reports:
            for run in rep["runs"]:
                if run["run"] != name:
                    continue
                for t in run["tenants"]:
                    tenants.setdefault(t["tenant"], []).append(t)
        for tenant, rows in sorted(tenants.items()):
            print(
                f"| {name} | {tenant} | {rows[0]['tasks']} "
                f"| {spread([r['wait_p50_ms'] for r in rows], '{:.0f}')} "
                f"| {spread([r['wait_p99_ms'] for r in rows], '{:.0f}')} "
                f"| {spread([r['completion_s'] for r in rows], '{:.2f}')} |"
            )
    print()
    tput = {}
    for _, rep in reports:
        for run in rep["runs"]:
            if run["run"].startswith("throughput"):
                tput.setdefault(run["run"], []).append(run["completed_per_s"])
    for name, values in sorted(tput.items()):
        print(f"- {name}: {spread(values, '{:.0f}')} records/s completed")
    targets = [
        ("fair_p99_over_idle", "B/C/D worst p99 wait, fair over idle", "<= 2"),
        ("fifo_p99_over_idle", "B/C/D worst p99 wait, FIFO over idle", "(contrast)"),
        ("flood_completion_fair_over_fifo", "A's completion time, fair over FIFO", "<= 1.05"),
        ("throughput_fair_over_fifo", "completed records/s, fair over FIFO", ">= 0.8"),
    ]
    for key, what, target in targets:
        values = [rep[key] for _, rep in reports if rep.get(key) is not None]
        print(f"- {what}: {spread(values, '{:.2f}')} (target {target})")
    ranked = sorted(
        (rep.get("fair_p99_over_idle") or 0, path) for path, rep in reports
    )
    median_path = ranked[len(ranked) // 2][1].replace(".json", ".svg")
    try:
        shutil.copy(median_path, f"{out}/noisy.svg")
        print(f"\nplot: {out}/noisy.svg (from {median_path})")
    except OSError:
        pass


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
