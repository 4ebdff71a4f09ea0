#!/usr/bin/env python3
"""The decision table of the backward's device scripts (issue 12: s8_bwd6.sh, s9_bwd9.sh): does
a candidate configuration beat a baseline in bench_bwd4.py's JSON, with every test and sanitizer
job of the candidate passed? (bwd6_decide.py until helper bwd8 made its names options.)

Rule: the candidate qualifies if every job of it (the files OUT/{,rc-,sc-}JOBS-*.rc) exited 0,
and at every shape of the decided head dims cand / base >= --fast-min, their geometric mean
>= --fast-gm, and cand det / base det >= --det-min (a configuration X's deterministic mode is
the configuration X_det, or --cand-det), and, with --det-gm, the geometric mean of cand det /
base det over the decided shapes (--det-gm-dims: only those head dims; --det-gm-causal: only
those non-causal, or causal) >= it.
The defaults are s8_bwd6.sh's: cand flashc (the dispatcher's choice,
sm90v3w since 2026-12-03) against flashc_v2s (sm90v2s forced), jobs v3w, d 64, fast >= 1.05
everywhere, det >= 1.00. The table prints every shape of the JSON, the other head dims too. No
torch needed.

usage: bwd_decide.py OUT/x.json OUT_DIR [--cand flashc] [--base flashc_v2s] [--jobs v3w]
                     [--dims 64] [--fast-min 1.05] [--fast-gm 0] [--det-min 1.00]
                     [--adopt "sm90v3w stays the d 64 default on CC 9.0"] [--rows all|decided]
                     [--cand-det flashc_v3wg_det] [--det-gm 1.05] [--det-gm-dims 64]
                     [--det-gm-causal no]
"""
import argparse
import glob
import json
import math
import os
import re
import sys


def jobs_ok(out, short):
    """(all passed, number of jobs) for the jobs SHORT-*, rc-SHORT-*, sc-SHORT-*."""
    pat = re.compile(r"^(rc-|sc-)?" + re.escape(short) + r"-")
    rcs = [f for f in glob.glob(os.path.join(out, "*.rc")) if pat.match(os.path.basename(f))]
    ok = all(open(f).read().strip() == "0" for f in rcs)
    return ok and len(rcs) > 0, len(rcs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("out")
    ap.add_argument("--cand", default="flashc")
    ap.add_argument("--base", default="flashc_v2s")
    ap.add_argument("--jobs", default="v3w")
    ap.add_argument("--dims", default="64")
    ap.add_argument("--fast-min", type=float, default=1.05)
    ap.add_argument("--fast-gm", type=float, default=0.0)
    ap.add_argument("--det-min", type=float, default=1.00)
    ap.add_argument("--adopt", default="sm90v3w stays the d 64 default on CC 9.0")
    ap.add_argument("--cand-det", default=None,
                    help="the candidate's deterministic configuration (default: CAND_det)")
    ap.add_argument("--det-gm", type=float, default=0.0)
    ap.add_argument("--det-gm-dims", default=None, help="default: --dims")
    ap.add_argument("--det-gm-causal", choices=("any", "no", "yes"), default="any")
    ap.add_argument("--rows", choices=("all", "decided"), default="all",
                    help="the table's shapes: every one, or those of --dims only")
    a = ap.parse_args()
    dims = {int(x) for x in a.dims.split(",")}
    gm_dims = {int(x) for x in (a.det_gm_dims or a.dims).split(",")}
    try:
        rows = json.load(open(a.json))["rows"]
    except (OSError, ValueError, KeyError) as e:
        print(f"bwd_decide: no bench results ({e}): no decision")
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

    cdet = a.cand_det or a.cand + "_det"
    cn, bn = a.cand.replace("flashc_", ""), a.base.replace("flashc_", "")
    cdn = cdet.replace("flashc_", "") if a.cand_det else cn + " det"
    shapes = sorted({(r["d"], r["causal"], r["S"]) for r in rows
                     if a.rows == "all" or r["d"] in dims},
                    key=lambda k: (k[0] not in dims, k[0], k[1], k[2]))
    print(f"\n== decision table: bf16 backward TFLOP/s (medians, same process); flashc = the "
          f"dispatcher's choice; {cn} against {bn} at d {a.dims}")
    print(f"| d | causal | S | {cn} | {cdn} | {bn} | {bn} det | FA2 | cuDNN | {cn}/{bn} | "
          f"{cdn}/{bn}det | {cn}/FA2 | {cn}/cuDNN | {bn}/FA2 | {bn}/cuDNN | {cdn}/{cn} | "
          f"{bn} det/fast |")
    print("|---|---|---|" + "--:|" * 14)
    fast, det, det_gm = [], [], []
    for d, c, S in shapes:
        ce, cd = g(d, c, S, a.cand), g(d, c, S, cdet)
        be, bd = g(d, c, S, a.base), g(d, c, S, a.base + "_det")
        fa, cu = g(d, c, S, "flash"), g(d, c, S, "cudnn")
        if d in dims:
            fast.append(ce / be)
            det.append(cd / bd)
            if d in gm_dims and (a.det_gm_causal == "any" or (a.det_gm_causal == "yes") == bool(c)):
                det_gm.append(cd / bd)
        print(f"| {d} | {'yes' if c else 'no'} | {S} | {f(ce, 0)} | {f(cd, 0)} | {f(be, 0)} | "
              f"{f(bd, 0)} | {f(fa, 0)} | {f(cu, 0)} | {f(ce / be)} | {f(cd / bd)} | "
              f"{f(ce / fa)} | {f(ce / cu)} | {f(be / fa)} | {f(be / cu)} | {f(cd / ce)} | "
              f"{f(bd / be)} |")
    ok, njobs = jobs_ok(a.out, a.jobs)
    good = [x for x in fast if x == x]
    gm = math.exp(sum(math.log(x) for x in good) / len(good)) if good else nan
    mf = min(fast) if fast and all(x == x for x in fast) else nan
    md = min(det) if det and all(x == x for x in det) else nan
    gd = [x for x in det_gm if x == x]
    dgm = math.exp(sum(math.log(x) for x in gd) / len(gd)) if gd else nan
    q = (ok and len(fast) > 0 and mf >= a.fast_min and gm >= a.fast_gm and md >= a.det_min and
         (a.det_gm <= 0 or dgm >= a.det_gm))
    print(f"{cn}: {njobs} jobs ({a.jobs}-*) {'all passed' if ok else 'NOT all passed (or none ran)'}; "
          f"{cn} / {bn} min {f(mf)} (need >= {a.fast_min}) geomean {f(gm)} (need >= {a.fast_gm}); "
          f"det / det min {f(md)} (need >= {a.det_min})" +
          (f", geomean (d {a.det_gm_dims or a.dims}, causal {a.det_gm_causal}) {f(dgm)} "
           f"(need >= {a.det_gm})" if a.det_gm > 0
           else ""))
    if q:
        print(f"DECISION: {a.adopt}")
    else:
        print(f"DECISION: not {a.adopt}: {cn} did not pass or fell below the rule against {bn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
