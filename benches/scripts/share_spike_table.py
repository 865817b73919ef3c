#!/usr/bin/env python3
"""The share-group spike table of BENCHMARKS.md from `share_spike.sh`'s JSONs in DIR: per run
the measured capacity, goodput before the spike, its lowest from the spike on, the recovery
time, the resubmissions, and the mean goodput per phase as a fraction of the pre-spike level
(before, the spike, the 5 s after it, the rest), the shape of the seed's table."""
import json
import sys

ORDER = ["fifo-nohdr", "fifo", "quota", "backlog-throttle", "backlog-reject", "overload"]


def mean(values):
    return sum(values) / len(values) if values else 0.0


def main(out):
    print("| run | capacity measured | goodput before | lowest from the spike on | back at 90 % "
          "| resubmitted | before / spike / 5 s after / rest |")
    print("|---|---|---|---|---|---|---|")
    for name in ORDER:
        try:
            with open(f"{out}/{name}.json") as f:
                r = json.load(f)
        except OSError:
            continue
        a = r["args"]
        useful = [s["useful"] for s in r["seconds"]]
        b, k = a["before_secs"], a["spike_secs"]
        base = r["goodput_before"] or 1
        phases = [useful[3:b], useful[b:b + k], useful[b + k:b + k + 5], useful[b + k + 5:]]
        shape = " / ".join(f"{mean(p) / base:.2f}" for p in phases)
        rec = r["recovery_secs"]
        print(f"| {a.get('label') or name} | {r['measured_capacity']:,.0f}/s "
              f"| {r['goodput_before']:,.0f}/s | **{r['goodput_min_from_spike']:,}/s** "
              f"| {'never' if rec is None else f'{rec} s'} | {r['share']['retried']:,} | {shape} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
