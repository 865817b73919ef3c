#!/usr/bin/env python3
"""Turns the results of benches/scripts/tls_bench.sh into BENCHMARKS.md's TLS table: per client,
broker and protocol the median MB/s of produce and consume over the repetitions (min-max in brackets),
the ratio SASL_SSL / PLAINTEXT per broker (issue 23: lograil >= 0.7), the ratio lograil / Kafka
over SASL_SSL (>= 1.5), and the reconnect storm's new TLS connections per second.

Usage: python3 benches/scripts/tls_table.py RESULTS_DIR
"""
import json
import pathlib
import re
import statistics
import sys

if len(sys.argv) < 2:
    sys.exit(__doc__)
OUT = pathlib.Path(sys.argv[1])


CLIENTS = ("rdkafka", "lograil")


def rates(broker, protocol, step, client):
    runs = sorted(OUT.glob(f"{broker}-{client}-{protocol}-{step}-*.json"))
    return [json.loads(p.read_text())[step]["mb_per_s"] for p in runs]


def storms(broker):
    out = []
    for p in sorted(OUT.glob(f"{broker}-storm-*.txt")):
        m = re.search(r"handshakes_per_s=(\d+)", p.read_text())
        if m:
            out.append(float(m.group(1)))
    return out


def cell(values, digits=0):
    if not values:
        return "-"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def ratio(a, b):
    return statistics.median(a) / statistics.median(b) if a and b else float("nan")


print("| client | figure | lograil | Kafka | lograil / Kafka |")
print("|---|---|---|---|---|")
for client in CLIENTS:
    for step in ("produce", "consume"):
        for protocol in ("plaintext", "sasl_ssl"):
            lo, ka = rates("lograil", protocol, step, client), rates("kafka", protocol, step, client)
            print(f"| {client} | {step} 1000 B, {protocol}, MB/s | {cell(lo)} | {cell(ka)} | {ratio(lo, ka):.2f} |")
lo, ka = storms("lograil"), storms("kafka")
print(f"| Python ssl | new TLS connections per second | {cell(lo)} | {cell(ka)} | {ratio(lo, ka):.2f} |")
print()
print("| client | TLS / plaintext (medians) | lograil | Kafka |")
print("|---|---|---|---|")
for client in CLIENTS:
    for step in ("produce", "consume"):
        row = [ratio(rates(b, "sasl_ssl", step, client), rates(b, "plaintext", step, client)) for b in ("lograil", "kafka")]
        print(f"| {client} | {step} | {row[0]:.2f} | {row[1]:.2f} |")
