"""Issue 39's curves as PNGs: partitions, consumers, latency under load and 1,000 producers,
lograil beside Apache Kafka 4.4, from benches/figures/scale/figures.json (run 1 of each table
in BENCHMARKS.md). Needs matplotlib (`pip install matplotlib`); not part of the tests.

    python3 benches/scripts/scale_curves.py        # writes benches/figures/scale/*.png
"""
import json
import pathlib

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parents[1] / "figures" / "scale"
DATA = json.loads((HERE / "figures.json").read_text())
STYLE = {"lograil": dict(color="tab:blue", marker="o"), "kafka": dict(color="tab:orange", marker="s")}


def save(fig, name):
    fig.tight_layout()
    fig.savefig(HERE / name, dpi=110)
    plt.close(fig)


def partitions():
    d = DATA["partitions"]
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    for ax, key, title in zip(
        axes,
        ("create_s", "rss_mb", "kill9_restart_s"),
        ("CreateTopics (s)", "resident memory (MB)", "restart after kill -9 (s)"),
    ):
        for broker in ("lograil", "kafka"):
            points = [(c, v) for c, v in zip(d["counts"], d[broker][key]) if v is not None]
            ax.plot(*zip(*points), label=broker, **STYLE[broker])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("partitions on one broker")
        ax.set_title(title)
        ax.legend()
    axes[2].annotate("Kafka: did not start\nfrom 10,000 on", xy=(0.05, 0.8), xycoords="axes fraction")
    save(fig, "partitions.png")


def consumers():
    d = DATA["consumers"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(d["counts"], d["lograil_mb_s"], label="lograil", **STYLE["lograil"])
    ax.plot(d["counts"], d["kafka_mb_s"], label="Kafka 4.4", **STYLE["kafka"])
    ax.set_xscale("log", base=2)
    ax.set_xlabel("consumer processes (same topic, from the page cache)")
    ax.set_ylabel("MB/s, all consumers")
    ax.set_title("consumers until the machine is the limit")
    ax.legend()
    save(fig, "consumers.png")


def latency():
    d = DATA["latency_under_load"]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (
        ("lograil_at_kafka_loads", "lograil at Kafka's loads", STYLE["lograil"]),
        ("lograil_own_loads", "lograil at its own loads", dict(STYLE["lograil"], linestyle="--")),
        ("kafka", "Kafka 4.4", STYLE["kafka"]),
    ):
        ax.plot(d[key]["rate"], d[key]["p99"], label=f"{label}, p99", **style)
    ax.set_yscale("log")
    ax.set_xlabel("records/s of 1000 B, open loop")
    ax.set_ylabel("end-to-end p99 (ms)")
    ax.set_title("latency under load (25, 50, 75, 90 % of each one's max)")
    ax.legend()
    save(fig, "latency_under_load.png")


def producers():
    d = DATA["producers_1000"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for broker, label in (("lograil", "lograil"), ("kafka", "Kafka 4.4")):
        ax.plot(d["rate"], d[broker]["p99"], label=f"{label}, p99", **STYLE[broker])
        ax.plot(d["rate"], d[broker]["p50"], label=f"{label}, p50", linestyle=":", **STYLE[broker])
    ax.set_yscale("log")
    ax.set_xlabel("records/s in total, 1,000 producers, open loop")
    ax.set_ylabel("delivery latency (ms)")
    ax.set_title("1,000 active producers")
    ax.legend()
    save(fig, "producers.png")


if __name__ == "__main__":
    for draw in (partitions, consumers, latency, producers):
        draw()
    print("written:", ", ".join(sorted(p.name for p in HERE.glob("*.png"))))
