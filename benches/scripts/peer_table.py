#!/usr/bin/env python3
"""Turns the results of benches/scripts/peer_kafka.sh into BENCHMARKS.md's lograil-vs-Kafka
table: per figure the median over the repetitions of each broker (min-max in brackets), the
ratio lograil / Kafka of the medians, the issue-13 target and whether it is met; then the
physical limits of the same session. When the run had a `baseline` broker (BASELINE=, another
lograil binary, or BASELINE_ARGS=, this one with other flags), a second table puts it beside
this build and Kafka.

Usage: python3 benches/scripts/peer_table.py RESULTS_DIR
"""
import json
import pathlib
import re
import statistics
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)
OUT = pathlib.Path(sys.argv[1])
BROKERS = ("lograil", "kafka")
GIB = 1 << 30


def reps(pattern):
    return sorted(OUT.glob(pattern))


def json_runs(broker, step):
    return [json.loads(p.read_text()) for p in reps(f"{broker}-{step}-*.json")]


def kv_runs(broker, what):
    out = []
    for p in reps(f"{broker}-{what}-*.txt"):
        d = dict(re.findall(r"(\w+)=([^\s]+)", p.read_text()))
        out.append({k: float(v) for k, v in d.items()})
    return out


def values(broker, step, get):
    out = []
    for r in json_runs(broker, step):
        try:
            v = get(r)
        except (KeyError, TypeError):
            continue
        if v is not None:
            out.append(v)
    return out


def perf_values(broker, which):
    """ProducerPerformance: MB/sec in its summary line; ConsumerPerformance: fetch.MB.sec (the
    9th CSV field: throughput once the consumer has joined its group)."""
    out = []
    for p in reps(f"{broker}-{which}-perf-*.txt"):
        text = p.read_text()
        if which == "producer":
            m = re.search(r"\(([\d.]+) MB/sec\)", text)
            if m:
                out.append(float(m.group(1)))
        else:
            fields = [f.strip() for f in text.strip().split(",")]
            if len(fields) >= 9:
                try:
                    out.append(float(fields[8]))
                except ValueError:
                    pass
    return out


def cpu_per_gib(broker):
    """Broker CPU seconds per GiB over the produce, consume and idempotent-produce runs of each
    repetition."""
    out = []
    for rep in sorted({re.sub(r".*-(\d+)\.json$", r"\1", p.name) for p in reps(f"{broker}-produce-*.json")}):
        cpu = moved = 0.0
        for step in ("produce", "consume", "idem"):
            p = OUT / f"{broker}-{step}-{rep}.json"
            if not p.exists():
                continue
            r = json.loads(p.read_text())
            cpu += r["broker_cost"]["cpu_s"]
            part = r.get("produce") or r.get("consume")
            moved += part["bytes"]
        if moved:
            out.append(cpu / (moved / GIB))
    return out


def med(v):
    return statistics.median(v) if v else None


def fmt(v, unit="", digits=1):
    if not v:
        return "n/a"
    m = med(v)
    if len(v) == 1:
        return f"{m:,.{digits}f}{unit}"
    return f"{m:,.{digits}f}{unit} [{min(v):,.{digits}f}-{max(v):,.{digits}f}]"


rows = []  # (figure, lograil values, kafka values, unit, digits, target op, target, getter)


def row(figure, get_both, unit, digits, op, target):
    rows.append((figure, get_both("lograil"), get_both("kafka"), unit, digits, op, target, get_both))


def rss(key):
    return lambda b: [r[key] / 1024 for r in kv_runs(b, "rss") if r.get(key)]


row("produce 1000 B, acks=1, 6 partitions, 1 producer (MB/s)",
    lambda b: values(b, "produce", lambda r: r["produce"]["mb_per_s"]), "", 1, ">=", 1.5)
row("produce 100 B, acks=all, idempotent (MB/s)",
    lambda b: values(b, "idem", lambda r: r["produce"]["mb_per_s"]), "", 1, ">=", 1.5)
row("produce 1000 B, acks=1: delivery p99 (ms)",
    lambda b: values(b, "produce", lambda r: r["produce"]["delivery_latency"]["p99_us"] / 1000), "", 1, "", None)
row("produce 100 B, acks=all, idempotent: delivery p99 (ms)",
    lambda b: values(b, "idem", lambda r: r["produce"]["delivery_latency"]["p99_us"] / 1000), "", 1, "", None)
row("consume ~1 GiB from the start, 6 partitions (MB/s)",
    lambda b: values(b, "consume", lambda r: r["consume"]["mb_per_s"]), "", 1, ">=", 1.5)
row("end-to-end p99 at half Kafka's peak rate (ms)",
    lambda b: values(b, "e2e", lambda r: r["consume"]["end_to_end_latency"]["p99_us"] / 1000), "", 2, "<=", 0.5)
row("end-to-end p99, acks=all, same rate (ms)",
    lambda b: values(b, "e2eall", lambda r: r["consume"]["end_to_end_latency"]["p99_us"] / 1000), "", 2, "", None)
row("produce delivery p99, acks=all, same rate (ms)",
    lambda b: values(b, "e2eall", lambda r: r["produce"]["delivery_latency"]["p99_us"] / 1000), "", 2, "", None)
row("broker peak RSS, VmHWM (MiB)", rss("vm_hwm_kb"), "", 0, "<=", 0.25)
row("broker VmRSS sampled, mean over the session (MiB)", rss("vm_rss_mean_kb"), "", 0, "", None)
row("broker VmRSS sampled, peak (MiB)", rss("vm_rss_peak_kb"), "", 0, "", None)
row("broker peak anonymous memory, RssAnon sampled (MiB)", rss("rss_anon_peak_kb"), "", 0, "", None)
row("broker CPU s per GiB moved (produce + consume + idempotent produce)",
    cpu_per_gib, "", 2, "<=", 0.5)
row("restart: first fetch served after start (s)",
    lambda b: [r["first_fetch_s"] for r in kv_runs(b, "restart") if r.get("first_fetch_s") == r.get("first_fetch_s")], "", 2, "<=", 0.5)
row("produce to 1,000 partitions (MB/s)",
    lambda b: values(b, "wide", lambda r: r["produce"]["mb_per_s"]), "", 1, "", None)
row("Kafka's ProducerPerformance, 1000 B, acks=1 (MB/s)",
    lambda b: perf_values(b, "producer"), "", 1, "", None)
row("Kafka's ConsumerPerformance, fetch MB/s",
    lambda b: perf_values(b, "consumer"), "", 1, "", None)

print("| figure | lograil | Kafka | lograil / Kafka | target | verdict |")
print("|---|---|---|---|---|---|")
for figure, ours, theirs, unit, digits, op, target, _ in rows:
    ratio = med(ours) / med(theirs) if ours and theirs and med(theirs) else None
    ratio_s = f"**{ratio:.2f}**" if ratio is not None else "n/a"
    if target is None or ratio is None:
        verdict, target_s = "", ""
    else:
        met = ratio >= target if op == ">=" else ratio <= target
        verdict = "met" if met else "missed"
        target_s = f"{op} {target}"
    print(f"| {figure} | {fmt(ours, unit, digits)} | {fmt(theirs, unit, digits)} | {ratio_s} | {target_s} | {verdict} |")

if reps("baseline-rss-*.txt"):
    print()
    print("| figure | lograil (this build) | baseline | Kafka | this build / baseline | this build / Kafka | baseline / Kafka |")
    print("|---|---|---|---|---|---|---|")
    for figure, ours, theirs, unit, digits, _, _, get in rows:
        before = get("baseline")
        if not ours and not before:
            continue

        def ratio(x, y):
            return f"{med(x) / med(y):.2f}" if x and y and med(y) else "n/a"

        print(f"| {figure} | {fmt(ours, unit, digits)} | {fmt(before, unit, digits)} | {fmt(theirs, unit, digits)} "
              f"| **{ratio(ours, before)}** | **{ratio(ours, theirs)}** | {ratio(before, theirs)} |")

# Partition count: each broker against its own 6-partition figure.
print()
print("| 1,000 partitions / 6 partitions, same broker | lograil | Kafka | target (lograil) |")
print("|---|---|---|---|")
wide = {b: med(values(b, "wide", lambda r: r["produce"]["mb_per_s"])) for b in BROKERS}
six = {b: med(values(b, "produce", lambda r: r["produce"]["mb_per_s"])) for b in BROKERS}
cells = [f"{wide[b] / six[b]:.2f}" if wide[b] and six[b] else "n/a" for b in BROKERS]
print(f"| produce MB/s ratio | **{cells[0]}** | {cells[1]} | >= 0.8 |")

limits_path = OUT / "limits.json"
if limits_path.exists():
    lim = json.loads(limits_path.read_text())
    tcp = lim["tcp"]["mb_per_s"]
    disk = lim["disk"]["buffered"]["write_mb_per_s"]
    print()
    print("| physical limit (`lograil-bench limits`, same session) | value | lograil produce / it | lograil consume / it | Kafka produce / it | Kafka consume / it |")
    print("|---|---|---|---|---|---|")
    p = {b: med(values(b, "produce", lambda r: r["produce"]["mb_per_s"])) for b in BROKERS}
    c = {b: med(values(b, "consume", lambda r: r["consume"]["mb_per_s"])) for b in BROKERS}

    def r(x, y):
        return f"{x / y:.2f}" if x and y else "n/a"

    print(f"| loopback TCP, one stream | {tcp:,.0f} MB/s | {r(p['lograil'], tcp)} | {r(c['lograil'], tcp)} | {r(p['kafka'], tcp)} | {r(c['kafka'], tcp)} |")
    print(f"| file write, 1 MiB blocks, no sync | {disk:,.0f} MB/s | {r(p['lograil'], disk)} | | {r(p['kafka'], disk)} | |")
