#!/usr/bin/env python3
"""Issue 11, helper fwd15: the leave-one-out table of the sm90 forward's default kernel (v6 at
d 128 without the mask), from bench_fwd11.py --set abl --out X.json, whose alt instances are
named flashc_<FLASHC_SM90_ABLATE value> (bench/gpu/s9_fwd15.sh).

Per cell (d 128 non-causal, 2k and 16k) and variant: TFLOP/s in CUPTI kernel time (do_bench's
flushed time beside it), the ratio to the default (flashc, the dispatcher's v6) and to SDPA
cuDNN in kernel time; then one line per stage: "stage X is worth Y %" = how much slower the
kernel is without it (t_without / t_default - 1, kernel time; negative: faster without it).
flashc_none (sm90abl with nothing left out: v6 itself, another library instance) measures the
noise of one instance against another.

usage: abl_table.py bench.json
"""
import json
import sys

# what each FLASHC_SM90_ABLATE value leaves out of v6 (src/cuda/attn_fwd_sm90.cu, sm90abl), in
# the table's order
STAGES = [
    ("overlap", "intra-warpgroup overlap (in v6's SASS: the row max under P_{i-1} V)"),
    ("pingpong", "ping-pong (the consumers' turns on named barriers)"),
    ("dynamic", "dynamic tile scheduler (persistent grid, static walk)"),
    ("persist", "persistent grid (one tile per thread block)"),
    ("stores", "TMA store epilogue (direct stores: v6d)"),
    ("bn128", "176-key blocks (128: v6n)"),
]
ORDER = ["flashc", "flashc_none"] + [f"flashc_{v}" for v, _ in STAGES] + [
    "flashc_s2d", "flashc_s3d", "cudnn", "flash"]


def main():
    rows = json.load(open(sys.argv[1]))["rows"]
    tf = lambda r, us: r["flops"] / (us * 1e-6) / 1e12 if us else float("nan")
    kern = lambda r, n: r.get(n, {}).get("kern_us")
    flush = lambda r, n: r.get(n, {}).get("flush")  # ms
    print("| S | variant | kernel TF | flush TF | /default kernel | /cuDNN kernel |")
    print("|---" * 6 + "|")
    worth = {}
    for r in rows:
        if "flashc" not in r:
            print(f"| {r['Sq']} | (no timing: maxdiff {r.get('maxdiff')}) |")
            continue
        names = [n for n in ORDER if n in r] + sorted(n for n in r if n.startswith("flashc_")
                                                       and n not in ORDER)
        kd, kc = kern(r, "flashc"), kern(r, "cudnn")
        for n in names:
            if n not in r:
                continue
            k, f = kern(r, n), flush(r, n)
            q = lambda a, b: f"{a / b:.3f}" if a and b else "nan"
            print(f"| {r['Sq']} | {n} | {tf(r, k):.0f} | {tf(r, f * 1e3 if f else None):.0f} | "
                  f"{q(kd, k) if n.startswith('flashc') else ''} | "
                  f"{q(kc, k) if n.startswith('flashc') else ''} |")
            if n.startswith("flashc_") and k and kd:
                worth.setdefault(n[7:], []).append((r["Sq"], k / kd - 1.0))
        t = {n: kern(r, f"flashc_{n}") for n in ("s2d", "s3d")}
        if t["s2d"] and t["s3d"]:  # where a third slot fits: 128-key blocks, direct stores
            worth.setdefault("3rd", []).append((r["Sq"], t["s2d"] / t["s3d"] - 1.0))
    cells = lambda v: ", ".join(f"{100 * y:+.1f} % at {s // 1024}k" for s, y in worth.get(v, []))
    print("\nworth = kernel time without the stage / with it - 1 (CUPTI kernel time, same run)")
    print(f"noise: flashc_none (v6 in another instance) against flashc: {cells('none')}")
    for v, what in STAGES:
        print(f"stage {v}: {what}: worth {cells(v)}")
    print(f"stage 3rd K/V slot (s2d against s3d: 128-key blocks, direct stores): worth "
          f"{cells('3rd')}")


if __name__ == "__main__":
    main()
