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

KERNEL_MIN, FLUSH_MIN = 1.015, 1.0


def main():
    rows = json.load(open(sys.argv[1]))["rows"]
    get = lambda r, n, k: r.get(n, {}).get(k)
    q = lambda a, b: a / b if a and b else None
    f3 = lambda x: f"{x:.3f}" if x else "nan"
    tf = lambda r, us: f"{r['flops'] / (us * 1e-6) / 1e12:.0f}" if us else "nan"
    print("| d | causal | S | np/def kernel | np/def flush | def/cuDNN kernel | np/cuDNN kernel"
          " | def TF | np TF | cuDNN TF | FA2 TF |")
    print("|---" * 11 + "|")
    groups = {}
    for r in sorted(rows, key=lambda r: (-r["d"], r["causal"], r["Sq"])):
        kd, kn, kc = (get(r, n, "kern_us") for n in ("flashc", "flashc_np", "cudnn"))
        fd, fn = get(r, "flashc", "flush"), get(r, "flashc_np", "flush")
        rk, rf = q(kd, kn), q(fd, fn)
        print(f"| {r['d']} | {int(r['causal'])} | {r['Sq']} | {f3(rk)} | {f3(rf)} | "
              f"{f3(q(kc, kd))} | {f3(q(kc, kn))} | {tf(r, kd)} | {tf(r, kn)} | {tf(r, kc)} | "
              f"{tf(r, get(r, 'flash', 'kern_us'))} |")
        ok = rk is not None and rf is not None and rk >= KERNEL_MIN and rf >= FLUSH_MIN
        groups.setdefault((r["d"], r["causal"]), []).append((r["Sq"], ok))
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
