#!/usr/bin/env python3
"""Issue 11, helper fwd19: the sm90 kernels padded to the head dims between their instances'
(FLASHC_CUDA_SM90_PAD) against sm80 (FLASHC_CUDA_KERNEL=sm80), from bench_fwd11.py --set padw
--alt flashc_pad:FLASHC_CUDA_SM90_PAD=1 --alt flashc_sm80:FLASHC_CUDA_KERNEL=sm80 --out X.json
(bench/gpu/s11_fwd19.sh).

Per cell (head dim, mask, seqlen; batch x seqlen = 16384, H = 2048 / d): pad/sm80 in CUPTI
kernel time and under do_bench's L2 flush (sm80's time / the padded sm90's: > 1 means padding
is faster), each one's ratio to SDPA cuDNN in kernel time, TFLOP/s (of the true head dim), and
the kernel the padded instance launched; then the kernels each instance launched per head dim
("flashc" is the default dispatch: sm80 at d 160 / 224 today, padded sm90 at d 96 / 112 from 1k).
Then the rule, per padded instance (head-dim range): its padding is on by default only if in
every cell measured in its range (both masks, every seqlen) pad/sm80 >= 1.03 in kernel time AND
under the flush, and pad launched an sm90 kernel and sm80 an sm80 one (a missing or wrong
measure fails); it also needs every t-* job of s11_fwd19.sh passed and the sanitizers clean.
d 160 and 224 are the worst cases of their ranges against sm80 by flops: there sm80 has an
instance of the exact head dim while sm90 pads by 1.2x / 1.14x; at any other D % 8 == 0 of the
range both pad (sm80 to 160 / 192 / 224 / 256), sm90 by at most the same factor relative to sm80
(136: 192 / 160 = 1.2x, 200: 256 / 224 = 1.14x; 168-184 and 232-248: the same instance's size);
d 136 and 200 (2k only) check that on the sm80 kernels' own padding.

usage: padw_table.py bench.json
"""
import json
import math
import sys

from alt_cells import alt_cells, meets

MIN = 1.03
# head dims measured -> the sm90 instance they pad into, its padded range, its bit in
# attn_fwd_sm90.cu's SM90_PAD_DEFAULT
RANGES = (((136, 160), "d 192 instance (D 136-184)", 4),
          ((200, 224), "d 256 instance (D 200-248)", 8),
          ((96, 112), "d 128 instance (D 72-120, the default since 2026-12-04)", 2))


def main():
    rows = json.load(open(sys.argv[1]))["rows"]
    right = lambda r: isinstance(r.get("maxdiff"), float) and math.isfinite(r["maxdiff"])
    for r in rows:  # a cell where an instance was wrong has no measure: the rule fails there
        if not right(r):
            print(f"d {r['d']} S {r['Sq']} causal {int(r['causal'])}: WRONG (an instance "
                  "disagreed with SDPA flash), no measure")
            for n in [n for n in r if n.startswith("flashc")]:
                del r[n]
    cells = alt_cells(rows, "pad", "sm80", name_col=True, base_impl="flashc_sm80")
    short = lambda n: (n or "?").replace("void ", "").replace("(anonymous namespace)::", "").split(
        "(")[0][:64]  # the kernel and its template arguments (dtype, D, BN, stages, VER)
    for d in sorted({r["d"] for r in rows}, reverse=True):
        names = {}
        for r in rows:
            if r["d"] == d:
                for n in ("flashc", "flashc_pad", "flashc_sm80"):
                    names.setdefault(n, set()).add(short(r.get(n, {}).get("main")))
        print(f"d {d} launched: " + "; ".join(f"{n}: {', '.join(sorted(v))}"
                                              for n, v in names.items()))
    sm80_of = {(r["d"], r["causal"], r["Sq"]): short(r.get("flashc_sm80", {}).get("main"))
               for r in rows}
    print(f"\nRule: an instance pads by default where pad/sm80 >= {MIN} in kernel time and under "
          "the flush in every cell of its range (and the tests passed):")
    on = 0
    for dims, what, bit in RANGES:
        got = [(d, c, S, rk, rf, name) for (d, c), lst in cells.items() if d in dims
               for S, rk, rf, name in lst]
        bad = [(d, c, S) for d, c, S, rk, rf, name in got
               if not (meets(rk, rf, MIN, MIN) and "sm90" in name and "sm80" in sm80_of[(d, c, S)])]
        ks = [rk for *_, rk, _, _ in got if rk]
        gm = math.exp(sum(math.log(k) for k in ks) / len(ks)) if ks else float("nan")
        yes = got and not bad
        on |= bit if yes else 0
        print(f"  {what}: {'padding on by default' if yes else 'sm80 stays (opt-in only)'}; "
              f"{len(got)} cells, kernel-time geomean {gm:.3f}x sm80, min "
              f"{min(ks) if ks else float('nan'):.3f}" +
              ("; failing: " + ", ".join(f"d{d} S{S}" + (" causal" if c else "")
                                          for d, c, S in bad) if bad else ""))
    print(f"  => attn_fwd_sm90.cu: SM90_PAD_DEFAULT = {on} (today 2; bits: 2 = d 128, 4 = d 192, "
          "8 = d 256)")
    return 0 if all(right(r) for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
