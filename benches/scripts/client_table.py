#!/usr/bin/env python3
"""Medians (and ranges) of the client_bench.sh runs in a results folder, as Markdown tables:
lograil's client beside librdkafka, and the ratio lograil / librdkafka."""
import json
import statistics
import sys
from pathlib import Path


def load(folder, pattern):
    runs = []
    for path in sorted(Path(folder).glob(pattern)):
        runs.append(json.loads(path.read_text()))
    return runs


def med(values):
    values = [v for v in values if v is not None]
    if not values:
        return None, None, None
    return statistics.median(values), min(values), max(values)


def fmt(stat, unit="", scale=1.0, digits=1):
    m, lo, hi = stat
    if m is None:
        return "-"
    return f"{m / scale:,.{digits}f}{unit} [{lo / scale:,.{digits}f}-{hi / scale:,.{digits}f}]"


def main():
    folder = sys.argv[1]
    rows = []
    ratios = []
    for label, mode, variant, getter, unit, scale, higher_better in [
        ("produce MB/s (client defaults)", "produce", "defaults", lambda r: r["produce"]["mb_per_s"], "", 1, True),
        ("produce delivery p99 (client defaults)", "produce", "defaults", lambda r: r["produce"]["delivery_latency"]["p99_us"], " ms", 1000, False),
        ("produce MB/s (batch.size 262144)", "produce", "batch256k", lambda r: r["produce"]["mb_per_s"], "", 1, True),
        ("produce delivery p99 (batch.size 262144)", "produce", "batch256k", lambda r: r["produce"]["delivery_latency"]["p99_us"], " ms", 1000, False),
        ("consume MB/s", "consume", "defaults", lambda r: r["consume"]["mb_per_s"], "", 1, True),
        ("e2e open loop: delivery p99", "e2e", "defaults", lambda r: r["produce"]["delivery_latency"]["p99_us"], " ms", 1000, False),
        ("e2e open loop: end-to-end p99", "e2e", "defaults", lambda r: r["consume"]["end_to_end_latency"]["p99_us"], " ms", 1000, False),
        ("client CPU s per GiB (produce, defaults)", "produce", "defaults", lambda r: r["client_cost"]["cpu_s_per_gib"], " s", 1, False),
        ("client CPU s per GiB (produce, batch.size 262144)", "produce", "batch256k", lambda r: r["client_cost"]["cpu_s_per_gib"], " s", 1, False),
        ("client CPU s per GiB (consume)", "consume", "defaults", lambda r: r["client_cost"]["cpu_s_per_gib"], " s", 1, False),
        ("client peak RSS MB (produce, defaults)", "produce", "defaults", lambda r: r["client_cost"]["peak_rss_bytes"], " MB", 1e6, False),
    ]:
        stats = {}
        for client in ["rdkafka", "lograil"]:
            runs = load(folder, f"{mode}-{client}-{variant}-*.json")
            values = []
            for r in runs:
                try:
                    values.append(getter(r))
                except (KeyError, TypeError):
                    values.append(None)
            stats[client] = med(values)
        ratio = None
        if stats["rdkafka"][0] and stats["lograil"][0] is not None:
            ratio = stats["lograil"][0] / stats["rdkafka"][0]
        digits = 2 if scale == 1000 else 1
        rows.append(f"| {label} | {fmt(stats['lograil'], unit, scale, digits)} | {fmt(stats['rdkafka'], unit, scale, digits)} | "
                    + (f"**{ratio:.2f}**" if ratio is not None else "-") + " |")
    print("| figure | lograil client | librdkafka | lograil / librdkafka |")
    print("|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
