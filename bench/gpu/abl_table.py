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

# what each FLASHC_SM90_ABLATE value leaves out of v6 (src/cuda/attn_fwd_sm90.cu, sm90abl)
STAGES = {
    "none": "nothing (v6 itself: the noise between instances)",
    "overlap": "intra-warpgroup overlap (softmax of S_i under P_{i-1} V)",
    "pingpong": "ping-pong (the consumers' turns on named barriers)",
    "dynamic": "dynamic tile scheduler (persistent, static walk)",
    "persist": "persistent grid (one tile per thread block)",
    "stores": "TMA store epilogue (direct stores: v6d)",
    "bn128": "176-key blocks (128: v6n)",
    "s3d": "(a 3rd stage, 128-key blocks, direct stores: v6s; against s2d)",
    "s2d": "(128-key blocks, direct stores, 2 stages: s3d's base)",
}


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
        names = ["flashc"] + sorted(n for n in r if n.startswith("flashc_")) + ["cudnn", "flash"]
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
        s2, s3 = kern(r, "flashc_s2d"), kern(r, "flashc_s3d")
        if s2 and s3:  # the third stage, where one fits (128-key blocks, direct stores)
            worth.setdefault("3rd stage (s3d vs s2d: t_s2d / t_s3d - 1)", []).append(
                (r["Sq"], s2 / s3 - 1.0))
    print()
    for v, cells in worth.items():
        what = STAGES.get(v, v)
        print(f"stage {v}: {what}: worth " +
              ", ".join(f"{100 * y:+.1f} % at {s // 1024}k" for s, y in cells))


if __name__ == "__main__":
    main()
