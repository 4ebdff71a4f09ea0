#!/usr/bin/env python3
"""Issue 11, helper fwd18: the sm90 forward at d 192 / 256 (FLASHC_CUDA_KERNEL=sm90v6h, and
sm90v6hnp without ping-pong) against the default there (sm80), from bench_fwd11.py --set wide
--alt flashc_h:FLASHC_CUDA_KERNEL=sm90v6h --alt flashc_hnp:FLASHC_CUDA_KERNEL=sm90v6hnp
--out X.json (bench/gpu/s10_fwd18.sh).

Per alt, per cell (head dim, mask, seqlen; batch x seqlen = 16384, H = 2048 / d): alt/sm80 in
CUPTI kernel time and under do_bench's L2 flush (sm80's time / the sm90 kernel's: > 1 means
sm90 is faster), each one's ratio to SDPA cuDNN in kernel time, TFLOP/s, and the kernel the alt
launched (alt_cells.py). Then the rule, per (head dim, mask): an sm90 family becomes the default
from the smallest seqlen S such that at S and every seqlen measured above it alt/sm80 >= 1.03
in kernel time AND >= 1.0 under the flush (a missing or wrong measure fails); of the two
families the one that holds from the smaller S (at a tie, the larger geometric mean of alt/sm80
kernel over those cells). It also needs every t-* job of s10_fwd18.sh passed and racecheck clean.

usage: wide_table.py bench.json
"""
import json
import math
import sys

from alt_cells import alt_cells, meets

KERNEL_MIN, FLUSH_MIN = 1.03, 1.0
FAMILIES = (("h", "sm90v6h"), ("hnp", "sm90v6hnp"))


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
    wrong = [r for r in rows if not (isinstance(r.get("maxdiff"), float) and
                                     math.isfinite(r["maxdiff"]))]
    for r in wrong:
        print(f"WRONG: d {r['d']} S {r['Sq']} causal {int(r['causal'])}: no measure (a flashc "
              "instance disagreed with SDPA flash)")
    per = {}
    for alt, fam in FAMILIES:
        print(f"\n{fam} (flashc_{alt}) against the default (sm80):")
        for key, cells in alt_cells(rows, alt, "sm80", name_col=True).items():
            per.setdefault(key, {})[fam] = from_seqlen(cells)
    print(f"\nRule: an sm90 family the default at (d, mask) from the smallest seqlen S where it is"
          f" >= {KERNEL_MIN}x sm80 (kernel) and >= {FLUSH_MIN}x (flush) at S and every seqlen "
          "above (and the tests passed):")
    for (d, causal), fams in sorted(per.items(), key=lambda x: (-x[0][0], x[0][1])):
        ok = [(S, -g, fam) for fam, (S, g) in fams.items() if S is not None]
        what = "sm80 stays"
        if ok:
            S, g, fam = min(ok)
            what = f"{fam} the default from seqlen {S} (geomean {-g:.3f}x sm80 there)"
        print(f"  d {d} {'causal' if causal else 'non-causal'}: {what}; " + ", ".join(
            f"{fam} {'from ' + str(S) if S else 'never'}" for fam, (S, _) in fams.items()))
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
