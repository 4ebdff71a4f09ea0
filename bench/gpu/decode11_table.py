#!/usr/bin/env python3
"""The decision tables of bench/gpu/s11_decode11.sh (issue 13, helper decode11), read from the
per-shape lines of bench_decode.py's logs ("Hq/Hkv 32/8 B  64 ctx  32768: GB/s sdpa_flash 2780,
sdpa_cudnn 4430, contig@auto 4357 s2, page16@auto 4100 s2, contig@deep 4450 s4, ..,
contig@auto/s4 4470"), so a run cut by its timeout still counts the shapes it finished.

usage: decode11_table.py TESTS_OK LOG...

Variants (FLASHC_DECODE_*, read by the library at every call): auto = the defaults (lean loader,
fill / fa2 split rule, auto merge); deep = FLASHC_DECODE_SPLITS=deep; wide =
FLASHC_DECODE_KERNEL=wide; fused = FLASHC_DECODE_MERGE=fused. Ratios are variant GB/s / default
GB/s in the same process and layout (the same inputs, timed one after the other).

Decision rule (bench/RESULTS.md, decode11): a variant becomes the default in a region (a range of
B x ctx that a dispatch rule can name from the plan-time maxima) when its forced tests passed and
it is >= 1.02x the default in every cell of that region measured (contiguous and page 16, both
head ratios) and never < 0.99x in a cell where it would run; else it stays opt-in.
"""
import math
import re
import sys

LINE = re.compile(r"^Hq/Hkv (\d+)/(\d+) B +(\d+) ctx +(\d+): GB/s (.*)$")
VARIANTS = ("deep", "wide", "fused")


def parse(paths):
    """{(log, Hq, Hkv, B, ctx): {name: (GB/s, splits or None)}}: a cell of each log apart, as
    ratios are taken inside one process."""
    cells = {}
    for src, p in enumerate(paths):
        try:
            fh = open(p)
        except OSError:
            continue
        for line in fh:
            m = LINE.match(line.strip())
            if not m:
                continue
            key = (src,) + tuple(int(x) for x in m.groups()[:4])
            d = cells.setdefault(key, {})
            for part in m.group(5).split(", "):
                f = part.split()
                if len(f) >= 2:
                    try:
                        d[f[0]] = (float(f[1]), int(f[2][1:]) if len(f) > 2 else None)
                    except ValueError:
                        pass
    return cells


def gm(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def ctxk(c):
    return f"{c // 1024}k"


def cell_name(k):
    return f"{k[3]}x{ctxk(k[4])} {k[1]}/{k[2]}"


def main():
    tests_ok = sys.argv[1] == "1"
    paths = sys.argv[2:]
    cells = parse(paths)
    if not cells:
        print("decode11_table: no bench lines found")
        return 1
    names = [p.rsplit("/", 1)[-1].rsplit(".", 1)[0] for p in paths]
    order = sorted(cells, key=lambda k: (k[0], -k[1], k[4], k[3]))  # log, heads, ctx, B

    print("\n### decode11: GB/s of K+V, bf16 d 128 (x = / SDPA cuDNN; variant columns: / default "
          "in the same process and layout; sN = splits used)")
    print("| log | Hq/Hkv | B x ctx | cuDNN | flash | default | x cuDNN | deep | wide | fused | "
          "p16 default / contig | p16 deep | p16 wide | p16 fused |")
    print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    ratios = {v: [] for v in VARIANTS}  # (cell, layout, ratio, splits default, splits variant)
    for k in order:
        d = cells[k]
        cud = d.get("sdpa_cudnn", (None,))[0]
        fla = d.get("sdpa_flash", (None,))[0]
        de = d.get("contig@auto")
        if not de:
            continue

        def rat(lay, v):
            a, b = d.get(f"{lay}@auto"), d.get(f"{lay}@{v}")
            if not a or not b:
                return "-"
            r = b[0] / a[0]
            ratios[v].append((k, lay, r, a[1], b[1]))
            return f"{r:.3f} s{b[1]}"
        cols = [rat("contig", v) for v in VARIANTS]
        p16 = d.get("page16@auto")
        pcols = [rat("page16", v) for v in VARIANTS]
        print(f"| {names[k[0]]} | {k[1]}/{k[2]} | {k[3]} x {ctxk(k[4])} | {cud or 0:.0f} | "
              f"{fla or 0:.0f} | {de[0]:.0f} s{de[1]} | "
              f"{de[0] / cud if cud else float('nan'):.3f} | " + " | ".join(cols) +
              f" | {f'{p16[0] / de[0]:.3f}' if p16 else '-'} | " + " | ".join(pcols) + " |")

    sweep = [k for k in order if any("/s" in x for x in cells[k])]
    if sweep:
        print("\n### split sweep (contiguous, explicit num_splits, default loader and merge): "
              "GB/s / the default's automatic count")
        ns = sorted({int(x.split("/s")[1]) for k in sweep for x in cells[k] if "/s" in x})
        print("| Hq/Hkv | B x ctx | auto | deep's | " + " | ".join(f"s{n}" for n in ns) +
              " | best |")
        print("|---|---|--:|--:|" + "--:|" * len(ns) + "---|")
        for k in sweep:
            d = cells[k]
            a = d.get("contig@auto")
            if not a:
                continue
            dp = d.get("contig@deep")
            row, best = [], (1.0, f"auto s{a[1]}")
            for n in ns:
                g = d.get(f"contig@auto/s{n}")
                row.append(f"{g[0] / a[0]:.3f}" if g else "-")
                if g and g[0] / a[0] > best[0]:
                    best = (g[0] / a[0], f"s{n}")
            print(f"| {k[1]}/{k[2]} | {k[3]} x {ctxk(k[4])} | {a[0]:.0f} s{a[1]} | "
                  f"{('s' + str(dp[1])) if dp else '-'} | " + " | ".join(row) +
                  f" | {best[1]} {best[0]:.3f} |")

    print("\n### verdicts (rule: >= 1.02x the default in every cell of a region, never < 0.99x "
          "where it runs; tests " + ("passed" if tests_ok else "NOT passed: nothing changes") + ")")
    for v in VARIANTS:
        rs = ratios[v]
        if not rs:
            print(f"- {v}: no cells")
            continue
        lo = [f"{cell_name(k)} {lay} {r:.3f}" for k, lay, r, _, _ in rs if r < 0.99]
        print(f"- {v}: {len(rs)} cells, geomean {gm([x[2] for x in rs]):.3f}, min "
              f"{min(x[2] for x in rs):.3f}; < 0.99: {', '.join(lo) or 'none'}")
        if v == "deep":  # the cells where its count differs from the default's: its region
            ch = [x for x in rs if x[3] != x[4]]
            same = [x for x in rs if x[3] == x[4]]
            for name, part in (("deep part (splits >= 8192 keys)",
                                [x for x in ch if x[0][4] // x[4] >= 8192]),
                               ("whole-wave part", [x for x in ch if x[0][4] // x[4] < 8192])):
                if part:
                    mn = min(x[2] for x in part)
                    print(f"    {name}: {len(part)} cells, geomean {gm([x[2] for x in part]):.3f}"
                          f", min {mn:.3f} -> "
                          + ("ADOPT there" if tests_ok and mn >= 1.02 else
                             "keep opt-in" if mn >= 0.99 else "reject there"))
                    print("      " + ", ".join(f"{cell_name(x[0])} {x[1]} s{x[3]}->s{x[4]} "
                                               f"{x[2]:.3f}" for x in part))
            if same:
                print(f"    same count as the default: {len(same)} cells, "
                      f"{min(x[2] for x in same):.3f}-{max(x[2] for x in same):.3f} (noise)")
        else:  # regions by context length and by batch
            for label, key in (("ctx", lambda x: x[0][4]), ("B", lambda x: x[0][3])):
                groups = {}
                for x in rs:
                    groups.setdefault(key(x), []).append(x[2])
                print(f"    by {label}: " + "; ".join(
                    f"{ctxk(g) if label == 'ctx' else g} min {min(r):.3f} gm {gm(r):.3f}" +
                    (" ADOPTABLE" if tests_ok and min(r) >= 1.02 else "")
                    for g, r in sorted(groups.items())))

    print("\n### issue 13 targets, contiguous cells of every log (default; best variant of the "
          "same process per cell)")
    for lab, sel, tgt in (("ctx 4k >= 0.9x cuDNN", lambda k: k[4] == 4096, 0.9),
                          ("ctx >= 32k >= 1.0x cuDNN", lambda k: k[4] >= 32768, 1.0)):
        xs, bs = [], []
        for k in order:
            d = cells[k]
            cud, de = d.get("sdpa_cudnn", (None,))[0], d.get("contig@auto")
            if not sel(k) or not cud or not de:
                continue
            xs.append(de[0] / cud)
            bs.append(max([de[0]] + [d[f"contig@{v}"][0] for v in VARIANTS
                                     if f"contig@{v}" in d]) / cud)
        if xs:
            print(f"- {lab}: default {min(xs):.3f}-{max(xs):.3f} ({sum(x >= tgt for x in xs)}/"
                  f"{len(xs)} met); best variant {min(bs):.3f}-{max(bs):.3f} "
                  f"({sum(x >= tgt for x in bs)}/{len(bs)} met)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
