#!/usr/bin/env python3
"""The decision table of bench/gpu/s8_bwd6.sh (helper bwd6, issue 12): does sm90v3w, the d 64
backward default on CC 9.0 since 2026-12-03 (round B: 1.09-1.37x sm90v2s fast, 1.32-1.95x
deterministic; bench/RESULTS.md), stay it? From bench_bwd4.py's JSON and the device script's job
exit codes.

Rule (s8_bwd6.sh's header): sm90v3w stays the d 64 default if every job of it (its tests,
racecheck, synccheck: the files OUT/{,rc-,sc-}v3w-*.rc) exited 0, default / sm90v2s >= 1.05 at
every d 64 shape in fast mode and default det / sm90v2s det >= 1.00 at every d 64 shape (the
default is the dispatcher's choice, sm90v3w; sm90v2s forced, the previous default). No torch
needed.

usage: bwd6_decide.py OUT/bwd6.json OUT_DIR
"""
import glob
import json
import math
import os
import re
import sys

FAST_MIN, DET_MIN = 1.05, 1.00


def jobs_ok(out, short):
    """(all passed, number of jobs) for the jobs v3w-*, rc-v3w-*, sc-v3w-* (short = "v3w")."""
    pat = re.compile(r"^(rc-|sc-)?" + re.escape(short) + r"-")
    rcs = [f for f in glob.glob(os.path.join(out, "*.rc")) if pat.match(os.path.basename(f))]
    ok = all(open(f).read().strip() == "0" for f in rcs)
    return ok and len(rcs) > 0, len(rcs)


def main():
    path, out = sys.argv[1], sys.argv[2]
    try:
        rows = json.load(open(path))["rows"]
    except (OSError, ValueError, KeyError) as e:
        print(f"bwd6_decide: no bench results ({e}): no decision")
        return 1
    t = {}
    for r in rows:
        if r.get("status") == "ok":
            t[(r["d"], r["causal"], r["S"], r["impl"])] = r["tflops"]
    nan = float("nan")

    def g(d, c, S, i):
        return t.get((d, c, S, i), nan)

    def f(x, p=2):
        return "-" if x != x else (f"{x:.{p}f}" if p else f"{x:.0f}")

    shapes = sorted({(r["d"], r["causal"], r["S"]) for r in rows},
                    key=lambda k: (k[0] != 64, k[0], k[1], k[2]))
    print("\n== s8_bwd6 decision table: bf16 backward TFLOP/s (medians, same process); def = the "
          "dispatcher's choice (sm90v3w at d 64 and d 128); v2s = sm90v2s forced (d 64 only)")
    print("| d | causal | S | def | def det | v2s | v2s det | FA2 | cuDNN | def/v2s | "
          "defdet/v2sdet | def/FA2 | def/cuDNN | det/fast (def) |")
    print("|---|---|---|" + "--:|" * 11)
    fast, det = [], []
    for d, c, S in shapes:
        de, dd = g(d, c, S, "flashc"), g(d, c, S, "flashc_det")
        v, vd = g(d, c, S, "flashc_v2s"), g(d, c, S, "flashc_v2s_det")
        fa, cu = g(d, c, S, "flash"), g(d, c, S, "cudnn")
        if d == 64:
            fast.append(de / v)
            det.append(dd / vd)
        print(f"| {d} | {'yes' if c else 'no'} | {S} | {f(de, 0)} | {f(dd, 0)} | {f(v, 0)} | "
              f"{f(vd, 0)} | {f(fa, 0)} | {f(cu, 0)} | {f(de / v)} | {f(dd / vd)} | "
              f"{f(de / fa)} | {f(de / cu)} | {f(dd / de)} |")
    ok, njobs = jobs_ok(out, "v3w")
    good = [x for x in fast if x == x]
    gm = math.exp(sum(math.log(x) for x in good) / len(good)) if good else nan
    mf = min(fast) if fast and all(x == x for x in fast) else nan
    md = min(det) if det and all(x == x for x in det) else nan
    q = ok and len(fast) > 0 and mf >= FAST_MIN and md >= DET_MIN
    print(f"sm90v3w: {njobs} jobs {'all passed' if ok else 'NOT all passed (or none ran)'}; "
          f"default / sm90v2s min {f(mf)} geomean {f(gm)} (need >= {FAST_MIN} everywhere); "
          f"det / sm90v2s det min {f(md)} (need >= {DET_MIN})")
    if q:
        print("DECISION: sm90v3w stays the d 64 default on CC 9.0")
    else:
        print("DECISION: look again: sm90v3w (the d 64 default) did not pass or fell below the "
              "rule against sm90v2s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
