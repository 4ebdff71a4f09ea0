#!/usr/bin/env python3
"""The decision table of bench/gpu/s8_bwd6.sh (helper bwd6, issue 12): which d 64 backward
becomes the default on CC 9.0, from bench_bwd4.py's JSON and the device script's job exit codes.

Rule (s8_bwd6.sh's header): X in (sm90v3w, sm90v3ws) qualifies if every job of X (its tests,
racecheck, synccheck: the files OUT/{,rc-,sc-}<x>-*.rc) exited 0, X / default >= 1.05 at every
d 64 shape in fast mode and X det / default det >= 1.00 at every d 64 shape; of two that
qualify, the higher geometric mean of X / default (fast). No torch needed.

usage: bwd6_decide.py OUT/bwd6.json OUT_DIR
"""
import glob
import json
import math
import os
import re
import sys

NEW = {"sm90v3w": "flashc_v3w", "sm90v3ws": "flashc_v3ws"}
FAST_MIN, DET_MIN = 1.05, 1.00


def jobs_ok(out, fam):
    """(all passed, number of jobs) for fam's jobs: v3w-*, rc-v3w-*, sc-v3w-* (not v3ws-*)."""
    short = fam[len("sm90"):]
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
          "dispatcher's choice (d 64 sm90v2s, d 128 sm90v3w)")
    print("| d | causal | S | def | def det | v3w | v3w det | v3ws | v3ws det | FA2 | cuDNN | "
          "v3w/def | v3wdet/defdet | v3ws/def | v3wsdet/defdet | best/FA2 | best/cuDNN | "
          "det/fast (def) |")
    print("|---|---|---|" + "--:|" * 15)
    ratios = {fam: ([], []) for fam in NEW}
    for d, c, S in shapes:
        de, dd = g(d, c, S, "flashc"), g(d, c, S, "flashc_det")
        fa, cu = g(d, c, S, "flash"), g(d, c, S, "cudnn")
        cells = [f(de, 0), f(dd, 0)]
        rr = []
        best = max([x for x in [de] + [g(d, c, S, i) for i in NEW.values()] if x == x],
                   default=nan)
        for fam, impl in NEW.items():
            x, xd = g(d, c, S, impl), g(d, c, S, impl + "_det")
            cells += [f(x, 0), f(xd, 0)]
            rr += [f(x / de), f(xd / dd)]
            if d == 64:
                ratios[fam][0].append(x / de)
                ratios[fam][1].append(xd / dd)
        print(f"| {d} | {'yes' if c else 'no'} | {S} | " + " | ".join(cells) + f" | {f(fa, 0)} | "
              f"{f(cu, 0)} | " + " | ".join(rr) + f" | {f(best / fa)} | {f(best / cu)} | "
              f"{f(dd / de)} |")
    n64 = len([s for s in shapes if s[0] == 64])
    qual = []
    for fam in NEW:
        ok, njobs = jobs_ok(out, fam)
        fast, det = ratios[fam]
        good = [x for x in fast if x == x]
        gm = math.exp(sum(math.log(x) for x in good) / len(good)) if good else nan
        mf = min(fast) if fast and all(x == x for x in fast) else nan
        md = min(det) if det and all(x == x for x in det) else nan
        q = ok and n64 > 0 and mf >= FAST_MIN and md >= DET_MIN
        print(f"{fam}: {njobs} jobs {'all passed' if ok else 'NOT all passed (or none ran)'}; "
              f"fast / default min {f(mf)} geomean {f(gm)} (need >= {FAST_MIN} everywhere); "
              f"det / default det min {f(md)} (need >= {DET_MIN}) -> "
              f"{'QUALIFIES' if q else 'does not qualify'}")
        if q:
            qual.append((gm, fam))
    if qual:
        print(f"DECISION: make {max(qual)[1]} the d 64 default on CC 9.0 (its variants' opt_in 0; "
              "sm90v2s becomes opt_in 1)")
    else:
        print("DECISION: keep sm90v2s the d 64 default")
    return 0


if __name__ == "__main__":
    sys.exit(main())
