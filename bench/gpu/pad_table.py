#!/usr/bin/env python3
"""Issue 11, helper fwd17: the sm90 defaults padded to head dims below their instances'
(FLASHC_CUDA_SM90_PAD=1) against the default there (sm80), from bench_fwd11.py --set pad
--alt flashc_pad:FLASHC_CUDA_SM90_PAD=1 --out X.json (bench/gpu/s10_fwd17.sh).

Per cell (head dim, mask, seqlen; batch x seqlen = 16384, H = 2048 / d): pad/sm80 in CUPTI
kernel time and under do_bench's L2 flush (sm80's time / the padded sm90's: > 1 means padding
is faster), each one's ratio to SDPA cuDNN in kernel time, TFLOP/s (of the true head dim), and
the kernel each instance launched (a padded cell that still names sm80 was not padded). Then
the rule, per (head dim, mask): padded sm90 becomes the default there if at every seqlen
pad/sm80 >= 1.05 in kernel time AND >= 1.0 under the flush (a missing or wrong measure fails);
it also needs every t-* job of s10_fwd17.sh passed and both sanitizers clean.

usage: pad_table.py bench.json
"""
import json
import sys

from alt_cells import alt_cells, meets

KERNEL_MIN, FLUSH_MIN = 1.05, 1.0


def main():
    cells_of = alt_cells(json.load(open(sys.argv[1]))["rows"], "pad", "sm80", name_col=True)
    groups = {g: [(S, meets(rk, rf, KERNEL_MIN, FLUSH_MIN) and "sm90" in name)
                  for S, rk, rf, name in c] for g, c in cells_of.items()}
    print(f"\nRule: padded sm90 the default at (d, mask) where pad/sm80 >= {KERNEL_MIN} (kernel)"
          f" and >= {FLUSH_MIN} (flush) at every seqlen measured (and the tests passed):")
    for (d, causal), cells in sorted(groups.items(), key=lambda x: (-x[0][0], x[0][1])):
        yes = all(ok for _, ok in cells)
        print(f"  d {d} {'causal' if causal else 'non-causal'}: "
              f"{'padded sm90 the default (from 2k)' if yes else 'sm80 stays'} (cells: " +
              ", ".join(f"{S}{'' if ok else ' no'}" for S, ok in sorted(cells)) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
