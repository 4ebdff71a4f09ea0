#!/usr/bin/env python3
"""Issue 11, helper fwd16: the sm90 forward's defaults against the same kernels without
ping-pong (FLASHC_CUDA_KERNEL=sm90np), from bench_fwd11.py --set np --alt
flashc_np:FLASHC_CUDA_KERNEL=sm90np --out X.json (bench/gpu/s9_fwd16.sh).

Per cell (head dim, mask, seqlen; batch x seqlen = 16384): np/default in CUPTI kernel time and
under do_bench's L2 flush (the default's time / sm90np's: > 1 means sm90np is faster), the
default's and sm90np's ratio to SDPA cuDNN in kernel time, and TFLOP/s. Then the rule, per
(head dim, mask): sm90np becomes the default for seqlen <= T, T the largest seqlen such that at
every cell <= T np/default >= 1.015 in kernel time AND >= 1.0 under the flush (a cell with a
missing or wrong measure fails); no such T: nothing changes.

usage: np_table.py bench.json
"""
import json
import sys

from alt_cells import alt_cells, meets

KERNEL_MIN, FLUSH_MIN = 1.015, 1.0


def main():
    cells_of = alt_cells(json.load(open(sys.argv[1]))["rows"], "np", "def")
    groups = {g: [(S, meets(rk, rf, KERNEL_MIN, FLUSH_MIN)) for S, rk, rf, _ in c]
              for g, c in cells_of.items()}
    print(f"\nRule: sm90np the default for seqlen <= T where np/default >= {KERNEL_MIN} (kernel)"
          f" and >= {FLUSH_MIN} (flush) at every cell <= T:")
    for (d, causal), cells in sorted(groups.items(), key=lambda x: (-x[0][0], x[0][1])):
        T = None
        for S, ok in sorted(cells):
            if not ok:
                break
            T = S
        what = f"sm90np the default for seqlen <= {T}" if T else "nothing changes"
        print(f"  d {d} {'causal' if causal else 'non-causal'}: {what} (cells: " +
              ", ".join(f"{S}{'' if ok else ' no'}" for S, ok in sorted(cells)) + ")")
    return 0


if __name__ == "__main__":
    sys.exit(main())
