#!/usr/bin/env python3
"""Turns the JSON files of benches/scripts/broker_bench.sh into the BENCHMARKS.md tables: the
median of the repetitions of each run (min-max in brackets) and its ratio to the median machine
limit measured by `lograil-bench limits` in the same session.

Usage: python3 benches/scripts/broker_table.py RESULTS_DIR [--half-peak]
  --half-peak  print only half the median records/s of the produce-1000-acks1 runs (the
               end-to-end rate) and exit
"""
import json
import pathlib
import re
import statistics
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)
OUT = pathlib.Path(sys.argv[1])

runs = {}  # name without the repetition -> [report]
for path in sorted(OUT.glob("*.json")):
    name = re.sub(r"-\d+$", "", path.stem)
    runs.setdefault(name, []).append(json.loads(path.read_text()))


def values(name, get):
    out = []
    for r in runs.get(name, []):
        try:
            out.append(get(r))
        except (KeyError, TypeError):
            pass
    return out


def med(name, get):
    v = values(name, get)
    return statistics.median(v) if v else None


def fmt(name, get, f="{:,.0f}"):
    v = values(name, get)
    if not v:
        return "-"
    s = f.format(statistics.median(v))
    if len(v) > 1:
        s += f" [{f.format(min(v))}-{f.format(max(v))}]"
    return s


def us(x):
    return f"{x / 1000:.2f} ms" if x >= 1000 else f"{x:.0f} µs"


def fmt_us(name, get):
    v = values(name, get)
    if not v:
        return "-"
    s = us(statistics.median(v))
    if len(v) > 1:
        s += f" [{us(min(v))}-{us(max(v))}]"
    return s


if "--half-peak" in sys.argv:
    peak = med("produce-1000-acks1", lambda r: r["produce"]["records_per_s"])
    if peak is None:
        sys.exit("no produce-1000-acks1 runs in " + str(OUT))
    print(f"{peak / 2:.0f}")
    sys.exit(0)

tcp = med("limits", lambda r: r["tcp"]["mb_per_s"])
rtt50 = med("limits", lambda r: r["tcp"]["round_trip"]["p50_us"])
rtt99 = med("limits", lambda r: r["tcp"]["round_trip"]["p99_us"])
disk = med("limits", lambda r: r["disk"]["buffered"]["write_mb_per_s"])
disk_synced = med("limits", lambda r: r["disk"]["buffered"]["synced_mb_per_s"])


def sync_rate(size):
    def get(r):
        return next(s["mb_per_s"] for s in r["disk"]["fdatasync"] if s["block_bytes"] == size)
    return get


def ratio(x, limit):
    return f"{x / limit:.2f}" if x is not None and limit else "-"


n_limits = len(runs.get("limits", []))
print(f"### Limits ({n_limits} runs of `lograil-bench limits`, median [min-max])\n")
print("| limit | value |")
print("|---|---|")
print(f"| loopback TCP, one stream | {fmt('limits', lambda r: r['tcp']['mb_per_s'])} MB/s |")
print(f"| loopback TCP round trip, 64 B | p50 {fmt_us('limits', lambda r: r['tcp']['round_trip']['p50_us'])}, p99 {fmt_us('limits', lambda r: r['tcp']['round_trip']['p99_us'])} |")
print(f"| file write, 1 MiB blocks, no sync (1 GiB) | {fmt('limits', lambda r: r['disk']['buffered']['write_mb_per_s'])} MB/s |")
print(f"| the same incl. one final fdatasync | {fmt('limits', lambda r: r['disk']['buffered']['synced_mb_per_s'])} MB/s |")
for size, label in [(16384, "16 KiB"), (65536, "64 KiB"), (1 << 20, "1 MiB")]:
    print(f"| write + fdatasync per {label} | {fmt('limits', sync_rate(size))} MB/s, "
          f"{fmt('limits', lambda r, s=size: next(x['syncs_per_s'] for x in r['disk']['fdatasync'] if x['block_bytes'] == s))} syncs/s |")
print()

print("### Produce (1 producer, 6 partitions, unkeyed, librdkafka defaults but acks)\n")
print("| run | MB/s | records/s | delivery p50 | delivery p99 | broker round trip ~p50 / ~p99 | broker CPU s/GiB | broker cores busy | harness cores busy | / TCP | / disk write |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for name in ["produce-1000-acks1", "produce-100-acks1", "produce-1000-acksall", "produce-100-acksall"]:
    if name not in runs:
        continue
    mbs = med(name, lambda r: r["produce"]["mb_per_s"])
    limit_disk = disk if "acks1" in name else med("limits", sync_rate(1 << 20))
    print(f"| {name} | {fmt(name, lambda r: r['produce']['mb_per_s'], '{:,.1f}')} "
          f"| {fmt(name, lambda r: r['produce']['records_per_s'])} "
          f"| {fmt_us(name, lambda r: r['produce']['delivery_latency']['p50_us'])} "
          f"| {fmt_us(name, lambda r: r['produce']['delivery_latency']['p99_us'])} "
          f"| {fmt_us(name, lambda r: r['produce']['librdkafka']['broker_round_trip']['approx_p50_us'])} / "
          f"{fmt_us(name, lambda r: r['produce']['librdkafka']['broker_round_trip']['approx_p99_us'])} "
          f"| {fmt(name, lambda r: r['broker_cost']['cpu_s_per_gib'], '{:.2f}')} "
          f"| {fmt(name, lambda r: r['broker_cost']['cores_busy'], '{:.2f}')} "
          f"| {fmt(name, lambda r: r['client_cost']['cores_busy'], '{:.2f}')} "
          f"| {ratio(mbs, tcp)} | {ratio(mbs, limit_disk)} |")
print()

print("### Consume (a 1 GiB topic of 1000 B values, 6 partitions; 1 consumer, then 2)\n")
print("| run | MB/s | records/s | first record after | broker CPU s/GiB | harness cores busy | / TCP |")
print("|---|---|---|---|---|---|---|")
for name in ["consume-1000", "consume-1000-2consumers"]:
    if name not in runs:
        continue
    mbs = med(name, lambda r: r["consume"]["mb_per_s"])
    print(f"| {name} | {fmt(name, lambda r: r['consume']['mb_per_s'], '{:,.1f}')} "
          f"| {fmt(name, lambda r: r['consume']['records_per_s'])} "
          f"| {fmt(name, lambda r: r['consume']['first_record_after_ms'], '{:.1f}')} ms "
          f"| {fmt(name, lambda r: r['broker_cost']['cpu_s_per_gib'], '{:.2f}')} "
          f"| {fmt(name, lambda r: r['client_cost']['cores_busy'], '{:.2f}')} "
          f"| {ratio(mbs, tcp)} |")
print()

print("### End-to-end (open loop, 1 producer, 1 consumer, 1000 B, acks=1)\n")
print("| run | rate asked | achieved | e2e p50 | e2e p99 | e2e p99.9 | e2e max | delivery p99 | broker round trip ~p50 / ~p99 | producer queue mean | broker cores busy |")
print("|---|---|---|---|---|---|---|---|---|---|---|")


def e2e_key(name):
    m = re.search(r"rate(\d+)", name)
    return (name.startswith("e2e-rate"), int(m.group(1)) if m else 0, name)


for name in sorted((n for n in runs if n.startswith("e2e")), key=e2e_key):
    lat = lambda k: (lambda r: r["consume"]["end_to_end_latency"][k])
    rtt = lambda k: (lambda r: r["produce"]["librdkafka"]["broker_round_trip"][k])
    print(f"| {name} "
          f"| {fmt(name, lambda r: r['produce']['target_rate'])} "
          f"| {fmt(name, lambda r: r['produce']['records_per_s'])} "
          f"| {fmt_us(name, lat('p50_us'))} "
          f"| {fmt_us(name, lat('p99_us'))} "
          f"| {fmt_us(name, lat('p99_9_us'))} "
          f"| {fmt_us(name, lat('max_us'))} "
          f"| {fmt_us(name, lambda r: r['produce']['delivery_latency']['p99_us'])} "
          f"| {fmt_us(name, rtt('approx_p50_us'))} / {fmt_us(name, rtt('approx_p99_us'))} "
          f"| {fmt_us(name, lambda r: r['produce']['librdkafka']['producer_queue']['mean_us'])} "
          f"| {fmt(name, lambda r: r['broker_cost']['cores_busy'], '{:.2f}')} |")
