#!/usr/bin/env python3
"""Issue 11, helper fwd18: the sm90 forward at d 192 / 256 (FLASHC_CUDA_KERNEL=sm90v6h, v6 on
64-key blocks; sm90v6hnp, the same without ping-pong; sm90v6hw, 80-key blocks) against the
default there (sm80), from bench_fwd11.py --set wide --alt flashc_h:FLASHC_CUDA_KERNEL=sm90v6h
--alt flashc_hnp:FLASHC_CUDA_KERNEL=sm90v6hnp --alt flashc_hw:FLASHC_CUDA_KERNEL=sm90v6hw
--out X.json (bench/gpu/s10_fwd18.sh).

One table, a row per cell (head dim, mask, seqlen; batch x seqlen = 16384, H = 2048 / d):
TFLOP/s in CUPTI kernel time of sm80, each family, SDPA cuDNN and FA2; then the fastest family
(kernel time) and its ratios: to sm80 in kernel time and under do_bench's L2 flush (sm80's time
/ its own: > 1 means sm90 is faster) and to cuDNN in kernel time. Then the rule, per (head
dim, mask): an sm90 family becomes the default from the smallest seqlen S such that at S and
every seqlen measured above it family/sm80 >= 1.03 in kernel time AND >= 1.0 under the flush
and it launched an sm90 kernel (a missing or wrong measure fails); of the families, the one
that holds from the smallest S (at a tie, the larger geometric mean of family/sm80 in kernel
time over those cells). It also needs every t-* job of s10_fwd18.sh passed and the
sanitizers clean.

usage: wide_table.py bench.json
"""
import json
import math
import sys

from alt_cells import alt_cells, meets

KERNEL_MIN, FLUSH_MIN = 1.03, 1.0
FAMILIES = (("h", "sm90v6h"), ("hnp", "sm90v6hnp"), ("hw", "sm90v6hw"))


def from_seqlen(cells):
    """The smallest S from which every cell meets the rule, with the geometric mean of the
    kernel ratio over those cells; (None, 0) if the largest seqlen does not."""
    cells = sorted(cells)
    start = None
    for S, rk, rf, name in reversed(cells):
        if not (meets(rk, rf, KERNEL_MIN, FLUSH_MIN) and "sm90" in name):
            break
        start = S
    if start is None:
        return None, 0.0
    ks = [rk for S, rk, _, _ in cells if S >= start]
    return start, math.exp(sum(math.log(k) for k in ks) / len(ks))


def main():
    rows = json.load(open(sys.argv[1]))["rows"]
    right = lambda r: isinstance(r.get("maxdiff"), float) and math.isfinite(r["maxdiff"])
    for r in rows:  # a cell where an instance was wrong has no measure: the rule fails there
        if not right(r):
            for n in [n for n in r if n.startswith("flashc")]:
                del r[n]
    get = lambda r, n, k: r.get(n, {}).get(k)
    tf = lambda r, n: (f"{r['flops'] / (get(r, n, 'kern_us') * 1e-6) / 1e12:.0f}"
                       if get(r, n, "kern_us") else "nan")
    f3 = lambda x: f"{x:.3f}" if x else "nan"
    cells = {alt: alt_cells(rows, alt, "sm80", show=False) for alt, _ in FAMILIES}
    by = {}  # (d, causal, S) -> {alt: (rk, rf, name)}
    for alt, groups in cells.items():
        for (d, c), lst in groups.items():
            for S, rk, rf, name in lst:
                by.setdefault((d, c, S), {})[alt] = (rk, rf, name)
    names = " | ".join(f"{alt} TF" for alt, _ in FAMILIES)
    print(f"\n| d | causal | S | sm80 TF | {names} | cuDNN TF | FA2 TF | best | best/sm80 "
          "kernel | best/sm80 flush | best/cuDNN |")
    print("|---" * (9 + len(FAMILIES)) + "|")
    kernels = {}
    for r in sorted(rows, key=lambda r: (-r["d"], r["causal"], r["Sq"])):
        key = (r["d"], r["causal"], r["Sq"])
        if not right(r):
            print(f"| {r['d']} | {int(r['causal'])} | {r['Sq']} | WRONG: a flashc instance "
                  "disagreed with SDPA flash, no measure |")
            continue
        fams = by.get(key, {})
        best = max(fams, key=lambda a: fams[a][0] or 0.0) if fams else None
        rk, rf, _ = fams.get(best, (None, None, ""))
        ck, bk = get(r, "cudnn", "kern_us"), get(r, f"flashc_{best}", "kern_us")
        for alt in fams:
            kernels.setdefault(alt, set()).add(fams[alt][2])
        print(f"| {r['d']} | {int(r['causal'])} | {r['Sq']} | {tf(r, 'flashc')} | " +
              " | ".join(tf(r, f"flashc_{alt}") for alt, _ in FAMILIES) +
              f" | {tf(r, 'cudnn')} | {tf(r, 'flash')} | {best} | {f3(rk)} | {f3(rf)} | "
              f"{f3(ck / bk if ck and bk else None)} |")
    for alt, fam in FAMILIES:
        print(f"{alt} = {fam}, launched: {', '.join(sorted(kernels.get(alt, ()))) or '?'}")
    print(f"\nRule: an sm90 family the default at (d, mask) from the smallest seqlen S where it is"
          f" >= {KERNEL_MIN}x sm80 (kernel) and >= {FLUSH_MIN}x (flush) at S and every seqlen "
          "above (and the tests passed):")
    for (d, causal) in sorted(cells[FAMILIES[0][0]], key=lambda x: (-x[0], x[1])):
        fams = {fam: from_seqlen(cells[alt][(d, causal)]) for alt, fam in FAMILIES}
        ok = [(S, -g, fam) for fam, (S, g) in fams.items() if S is not None]
        what = "sm80 stays"
        if ok:
            S, g, fam = min(ok)
            what = f"{fam} the default from seqlen {S} (geomean {-g:.3f}x sm80 there)"
        print(f"  d {d} {'causal' if causal else 'non-causal'}: {what}; " + ", ".join(
            f"{fam} {'from ' + str(S) if S else 'never'}" for fam, (S, _) in fams.items()))
    return 0 if all(right(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
