#!/usr/bin/env python3
"""bench/gpu/decode10_table.py TESTS_OK BENCH_JSON... — the decision table of s10_decode10.sh
(issue 13, helper decode10), from one or more bench_decode.py --out files (their rows joined; a
file a timeout left unwritten is named and skipped): each variant of --variants DEF,V1,.. (DEF
first: the defaults) against DEF and SDPA cuDNN at every shape, contiguous and page 16, in TB/s
of K+V; the explicit split sweep where there is one; then one verdict line a variant by the rule
of RESULTS.md (decode10): the default where its
forced tests passed (TESTS_OK = 1), no cell was WRONG, its geometric mean / DEF >= 1.02 over
every cell (contiguous and page 16) and no cell < 0.98; else a dispatch rule where it is
>= 1.02x in a whole region (the cells are listed); else it stays opt-in. Last: the issue's
targets for the defaults and for the best variant."""
import json
import math
import sys


def main():
    tests_ok = sys.argv[1] == "1"
    rows, copy_gbs = [], None
    for path in sys.argv[2:]:
        try:
            d = json.load(open(path))
        except (OSError, ValueError) as e:
            print(f"decode10_table: {path}: {e} (cut by its timeout?)")
            continue
        rows += d["rows"]
        copy_gbs = copy_gbs or d["copy_gbs"]
    if not rows:
        print("decode10_table: no bench rows")
        return 1
    keys = list(dict.fromkeys(k[:-4] for r in rows for k in r if k.endswith("_err")))
    variants = []
    for k in keys:
        v = k.split("@", 1)[1] if "@" in k else "v1"
        if "/s" not in v and v not in variants:
            variants.append(v)
    if not variants:
        print("decode10_table: no flashc cells in", " ".join(sys.argv[2:]))
        return 1
    dflt, alts = variants[0], variants[1:]
    g = lambda r, k: r.get(k + "_gbs")
    print(f"decode bf16 d 128, TB/s of K+V; x = / {dflt} (same process), c = / SDPA cuDNN; "
          f"p16 = page 16 / contiguous; sN = splits (copy ceiling {copy_gbs:.0f} GB/s)")
    print("| Hq/Hkv | B x ctx | cuDNN | " + " | ".join(
        [f"{dflt} (c; p16)"] + [f"{v} (x; c; p16)" for v in alts]) + " |")
    print("|---|---|--:|" + "--:|" * (1 + len(alts)))
    ratios = {v: [] for v in alts}
    wrong = {v: 0 for v in variants}
    q = lambda a, b, f: f.format(a / b) if a and b else "-"
    for r in rows:
        cu = g(r, "sdpa_cudnn")
        base = {lay: g(r, f"{lay}@{dflt}") for lay in ("contig", "page16")}
        cells = []
        for v in variants:
            c, p = g(r, f"contig@{v}"), g(r, f"page16@{v}")
            for lay in ("contig", "page16"):
                if f"{lay}@{v}_err" in r and not g(r, f"{lay}@{v}"):
                    wrong[v] += 1
                elif v != dflt and g(r, f"{lay}@{v}") and base[lay]:
                    ratios[v].append((g(r, f"{lay}@{v}") / base[lay], r, lay))
            parts = ([q(c, base["contig"], "{:.3f}")] if v != dflt else []) + [
                q(c, cu, "{:.2f}"), q(p, c, "{:.2f}")]
            head = (f"{c / 1e3:.2f}" if c else
                    "WRONG" if f"contig@{v}_err" in r else "-")
            cells.append(f"{head} ({'; '.join(parts)}) s{r.get(f'contig@{v}_splits', '-')}")
        print(f"| {r['Hq']}/{r['Hkv']} | {r['B']} x {r['ctx'] // 1024}k | "
              f"{f'{cu / 1e3:.2f}' if cu else '-'} | " + " | ".join(cells) + " |")
    for r in rows:
        sw = sorted((k[:-4] for k in r if "/s" in k and k.endswith("_gbs")),
                    key=lambda k: (k.split("/s")[0], int(k.split("/s")[1])))
        if sw:
            print(f"split sweep {r['B']} x {r['ctx'] // 1024}k contiguous, TB/s (x {dflt}): "
                  + ", ".join(f"{k.split('@')[1]} {g(r, k) / 1e3:.2f} "
                              f"({q(g(r, k), g(r, 'contig@' + dflt), '{:.3f}')})" for k in sw))
    print()
    print(f"verdicts (forced tests {'passed' if tests_ok else 'NOT passed'}; rule: default if "
          f"geomean x >= 1.02, every cell >= 0.98, no WRONG)")
    best = None
    for v in alts:
        xs = [x for x, _, _ in ratios[v]]
        if not xs:
            print(f"- {v}: no cells")
            continue
        gm = math.exp(sum(math.log(x) for x in xs) / len(xs))
        win = [f"{r['B']}x{r['ctx'] // 1024}k/{lay[0]}" for x, r, lay in ratios[v] if x >= 1.02]
        lose = [f"{r['B']}x{r['ctx'] // 1024}k/{lay[0]}" for x, r, lay in ratios[v] if x < 0.98]
        ok = tests_ok and not wrong[v]
        verdict = ("DEFAULT" if ok and gm >= 1.02 and not lose else
                   "a dispatch rule where the >= 1.02x cells make a region (B or ctx)"
                   if ok and win else "stays opt-in")
        print(f"- {v}: geomean x {gm:.3f}, min {min(xs):.3f}, max {max(xs):.3f}, "
              f"{len(xs)} cells, WRONG {wrong[v]}: {verdict}")
        print(f"    >= 1.02x: {' '.join(win) or 'none'}; < 0.98x: {' '.join(lose) or 'none'}")
        if best is None or gm > best[1]:
            best = (v, gm)
    print()
    print("targets (contiguous): >= 4.0 TB/s and >= 1.0x cuDNN at ctx >= 32k; >= 0.9x cuDNN at "
          "4k; page 16 within 5%")
    for v in [dflt] + ([best[0]] if best else []):
        miss = []
        for r in rows:
            c, p, cu = g(r, f"contig@{v}"), g(r, f"page16@{v}"), g(r, "sdpa_cudnn")
            name = f"{r['B']}x{r['ctx'] // 1024}k"
            if not c or not cu:
                miss.append(name + " (no figure)")
                continue
            if r["ctx"] >= 32768 and (c < 4000 or c / cu < 1.0):
                miss.append(f"{name} ({c / 1e3:.2f}, {c / cu:.2f}x)")
            if r["ctx"] < 32768 and c / cu < 0.9:
                miss.append(f"{name} ({c / cu:.2f}x)")
            if p and p / c < 0.95:
                miss.append(f"{name} p16 {p / c:.2f}")
        print(f"- {v}: missed at {', '.join(miss) if miss else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
