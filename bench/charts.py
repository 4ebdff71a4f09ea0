#!/usr/bin/env python3
"""Charts of `flashc bench --format json` output: time and measured peak memory against n,
log-log, one line per implementation (naive, unfused, flash / fused; per head dim when a run
has several), one chart per (op, device). Rows that did not fit ("OOM: needs X GiB") are drawn
as crosses on the top edge of the time panel, labelled with what they would have needed.

    python3 bench/charts.py bench.json [more.json ...] --out bench/charts [--format png,svg]

Memory panel: the measured peak of the case (rss_mib: the child's peak RSS on the CPU, the
device peak from the tool's counting allocator on the GPU; inputs included), so every point
is a measurement and none is zero. Ops measured at a single n get a bar chart instead.
"""

import argparse
import json
import os
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"naive": ("tab:red", "o"), "unfused": ("tab:orange", "s"), "flash": ("tab:blue", "^"),
         "fused": ("tab:blue", "^")}


def load(paths):
    """(device, op) -> list of rows (each with the run's device)."""
    groups = defaultdict(list)
    for p in paths:
        with open(p) as f:
            d = json.load(f)
        dev = d.get("meta", {}).get("device", "cpu")
        machine = d.get("meta", {}).get("machine", "")
        for r in d["results"]:
            r = dict(r, device=dev, machine=machine)
            groups[(dev, r["op"])].append(r)
    return groups


def series_key(r, several_d):
    return f"{r['impl']} d={r['d']}" if several_d else r["impl"]


def chart_lines(dev, op, rows, out, formats):
    several_d = len({r["d"] for r in rows}) > 1
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    series = defaultdict(list)
    ooms = []
    for r in rows:
        if "error" in r:
            if r["error"].startswith("OOM"):
                ooms.append(r)
            continue
        series[series_key(r, several_d)].append(r)
    order = list(STYLE)
    for key, rs in sorted(series.items(), key=lambda kv: (order.index(kv[1][0]["impl"]) if kv[1][0]["impl"] in order else 9, kv[1][0]["d"])):
        rs.sort(key=lambda r: r["n"])
        impl = rs[0]["impl"]
        color, marker = STYLE.get(impl, ("tab:gray", "x"))
        dashed = several_d and rs[0]["d"] != min(r["d"] for r in rows)
        ls = "--" if dashed else "-"
        ns = [r["n"] for r in rs]
        ax_t.plot(ns, [r["ms"] for r in rs], ls, color=color, marker=marker, label=key)
        ax_m.plot(ns, [max(r["rss_mib"], 1e-3) for r in rs], ls, color=color, marker=marker, label=key)
    if ooms:
        top = max((r["ms"] for rs in series.values() for r in rs), default=1.0) * 3
        by_n = defaultdict(list)
        for r in ooms:
            by_n[(r["n"], r["impl"])].append(r)
        for (n, impl), rs in sorted(by_n.items()):
            color, _ = STYLE.get(impl, ("tab:gray", "x"))
            needs = [m.group(1) for m in (re.search(r"needs ([0-9.]+) GiB", r["error"]) for r in rs) if m]
            dims = ", ".join(str(r["d"]) for r in rs)
            need = f"{min(needs, key=float)}-{max(needs, key=float)}" if len(set(needs)) > 1 else (needs[0] if needs else "?")
            ax_t.plot([n], [top], "x", color=color, markersize=10)
            ax_t.annotate(f"{impl} d={dims}: OOM\n(needs {need} GiB)", (n, top),
                          textcoords="offset points", xytext=(-95, -30), fontsize=7, color=color)
    for ax, title in ((ax_t, "time per call (ms, median)"),
                      (ax_m, "measured peak memory (MiB, inputs included)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (sequence length)" if op.startswith("attn") else "n")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    machine = rows[0].get("machine", "")
    impls = " vs ".join(dict.fromkeys(r["impl"] for r in rows))
    fig.suptitle(f"{op} on {dev}: {impls}  ({machine})", fontsize=10)
    fig.tight_layout()
    return save(fig, out, f"{op}_{dev}", formats)


def chart_bars(dev, op, rows, out, formats):
    rows = [r for r in rows if "error" not in r]
    if not rows:
        return []
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(8, 3.6))
    labels = [f"{r['impl']}\n{r['dtype']}" for r in rows]
    colors = [STYLE.get(r["impl"], ("tab:gray", "x"))[0] for r in rows]
    ax_t.bar(labels, [r["ms"] for r in rows], color=colors)
    ax_m.bar(labels, [r["rss_mib"] for r in rows], color=colors)
    ax_t.set_title("time per call (ms, median)", fontsize=10)
    ax_m.set_title("measured peak memory (MiB, inputs included)", fontsize=10)
    for ax in (ax_t, ax_m):
        ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"{op} on {dev}: {rows[0]['shape']}", fontsize=10)
    fig.tight_layout()
    return save(fig, out, f"{op}_{dev}", formats)


def save(fig, out, stem, formats):
    paths = []
    for fmt in formats:
        p = os.path.join(out, f"{stem}.{fmt}")
        fig.savefig(p, dpi=110)
        paths.append(p)
    plt.close(fig)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", nargs="+", help="flashc bench --format json outputs")
    ap.add_argument("--out", default="bench/charts", help="output folder")
    ap.add_argument("--format", default="png", help="comma-separated: png, svg")
    ap.add_argument("--op", default=None, help="only these ops (comma-separated)")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    formats = [f for f in a.format.split(",") if f]
    wanted = set(a.op.split(",")) if a.op else None
    made = []
    for (dev, op), rows in sorted(load(a.json).items()):
        if wanted and op not in wanted:
            continue
        if op in ("copy", "sgemm"):
            continue  # ceilings: no naive / fast pair
        ns = {r["n"] for r in rows}
        made += (chart_lines if len(ns) > 1 else chart_bars)(dev, op, rows, a.out, formats)
    for p in made:
        print(p)
    return 0 if made else 1


if __name__ == "__main__":
    sys.exit(main())
