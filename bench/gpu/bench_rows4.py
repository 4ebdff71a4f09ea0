#!/usr/bin/env python3
"""RMSNorm bf16 on the GPU, issue 14's open targets: the library's variants (chosen per call by
FLASHC_CUDA_RMS_FWD / FLASHC_CUDA_RMS_BWD, see src/cuda/rows.cu and rows_v4.cu) against PyTorch
in the same process, with the copy ceilings and a per-kernel breakdown (torch.profiler / CUPTI:
each kernel's device time against the span per call, so launch gaps and the dw pass show apart).

  forward             flashc_rmsnorm            vs F.rms_norm
  forward + residual  flashc_rmsnorm_residual   vs h = x + r; F.rms_norm(h) (eager)
  backward (dx, dw)   flashc_rmsnorm_bwd        vs autograd of F.rms_norm
  copy ceilings       x.clone(); torch.add(x, dy, out=dx) (the backward's 2 reads + 1 write);
                      with --copylib (bench/gpu/rows_copy.cu) copies in the kernels' patterns

The lists below are the last round's (helper rows5: the backward v6 knobs); --fwd / --res / --bwd
replace them ("-" = unset, variants separated by ';'; written --bwd="-;v6", since a value may
start with "-"), so that an earlier round's lists (bench/RESULTS.md names them; bench_rows2.py
and bench_rows3.py, folded into this script and rows_bench_common.py, ran them) run again. Bytes, timing and checks: rows_bench_common.py;
each variant is checked against torch before it is timed.

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/gpu/bench_rows4.py \
      --copylib out/librows_copy.so --out rows5.json
"""

import argparse
import ctypes
import json
import sys

import torch
import torch.nn.functional as F

from flashc import _arrays, _lib

from rows_bench_common import Table, copy_ceilings, load_copylib, relerr, setvar, timed

# Defaults now: the plain forward rms_fwd_v4 R = 4 + PDL (rows >= 512 chunks), the residual v4
# + PDL, the backward v6 with every knob on (since 2026-12-03). "v2" by name = the old forward
# kernels; for the backward "v2" = rms_bwd_reg + rms_dw_sum plainly launched.
# Backward v6[:B,P,L,S,H] (rows.cu bwd6_env): B balanced grid, P the retained pool, L PDL, S
# rms_dw_sum4, H plain loads / stores; v6 = 1,1,1,1,1 (the default); each knob off in turn.
FWD = [None, "v2"]
RES = [None]
BWD = [None, "v2", "v2:1", "v6", "v6:0,1,1,1,1", "v6:1,0,1,1,1", "v6:1,1,0,1,1", "v6:1,1,1,0,1", "v6:1,1,1,1,0"]
# copies: (name, kind, p0..p3); kinds 1 / 2 (rows in registers, bulk-copy slots) were round
# rows3's: ("rows v4:0,2,0,0", 1, 0, 2, 0, 0), ("tma v5:4,3,0,1", 2, 4, 3, 0, 1)
COPIES = [("flat nc/st.normal", 0, 3, 2, 0, 0), ("flat nc/st.normal PDL", 0, 3, 2, 1, 0), ("rows R 4", 3, 4, 0, 0, 0)]
# backward variants timed again with 5x the calls a batch (v2's partials come from the default
# pool, which each batch's closing synchronisation empties: a cost a batch, not a call)
BIG = [None, "v2", "v6:1,0,1,1,1"]
# the kernel breakdown (torch.profiler): (op, variant)
PROF = [("rmsnorm", None), ("rms_bwd", None), ("rms_bwd", "v2"), ("rms_bwd", "v6:1,0,1,1,1")]


def res_name(v):
    return "v2 (v1 kernel)" if v == "v2" else "default (v4, PDL)" if v is None else v


def run_shape(lib, cl, T, D, a, tab, lists):
    dev, bf = "cuda", torch.bfloat16
    eps = 1e-6
    shape = f"{T}x{D}"
    narrow = D // 8 <= 512  # v5 forward and the row copies: rows of <= 512 chunks
    fwd, res, bwd = lists

    def prof(op, impl, fn):
        if a.prof:
            tab.prof(shape, op, impl, fn, a.calls)

    x = torch.randn(T, D, device=dev, dtype=bf)
    r = torch.randn(T, D, device=dev, dtype=bf)
    w = torch.rand(D, device=dev, dtype=bf) + 0.5
    dy = torch.randn(T, D, device=dev, dtype=bf)
    y, h = torch.empty_like(x), torch.empty_like(x)
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    vx, vr, vw, vy = (_arrays.view(n, t) for n, t in (("x", x), ("r", r), ("w", w), ("y", y)))
    vh, vdy, vdx, vdw = (_arrays.view(n, t) for n, t in (("h", h), ("dy", dy), ("dx", dx), ("dw", dw)))
    fe = ctypes.c_float(eps)

    cp = copy_ceilings(tab, cl, x, T, D, COPIES, a.calls, a.reps, narrow)
    prof("copy", "torch clone", lambda: x.clone())

    # forward
    nb = 2 * T * D * 2 + D * 2
    yt = F.rms_norm(x, (D,), w, eps=eps)
    pf = tab.row(shape, "rmsnorm", "torch F.rms_norm", timed(lambda: F.rms_norm(x, (D,), w, eps=eps), a.calls, a.reps), nb)
    prof("rmsnorm", "torch F.rms_norm", lambda: F.rms_norm(x, (D,), w, eps=eps))
    for v in fwd:
        if tab.late():
            break
        if v and v.startswith("v5") and not narrow:
            continue
        setvar("FLASHC_CUDA_RMS_FWD", v)
        y.fill_(float("nan"))
        try:
            _lib.check(lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref))
            torch.cuda.synchronize()
            e = relerr(y, yt)
            if not e < 2e-2:
                raise RuntimeError(f"max_err vs torch {e}")
        except Exception as ex:  # report, keep going with the other variants
            tab.fail(shape, "rmsnorm", f"flashc {v or 'default'}", ex)
            continue
        tab.row(shape, "rmsnorm", f"flashc {v or 'default (v4 R4 PDL)'}",
                timed(lambda: lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref), a.calls, a.reps), nb, pf, f"err {e:.1e}")
        if ("rmsnorm", v) in PROF:
            prof("rmsnorm", f"flashc {v or 'default'}", lambda: lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref))

    # forward + residual
    nb = 4 * T * D * 2 + D * 2
    ht = x + r
    yt = F.rms_norm(ht, (D,), w, eps=eps)
    pr = tab.row(shape, "rms+res", "torch x + r; F.rms_norm",
                 timed(lambda: F.rms_norm(x + r, (D,), w, eps=eps), a.calls, a.reps), nb)
    for v in res:
        if tab.late():
            break
        if v and v.startswith("v5") and not narrow:
            continue
        setvar("FLASHC_CUDA_RMS_FWD", v)
        try:
            h.copy_(x)
            y.fill_(float("nan"))
            _lib.check(lib.flashc_rmsnorm_residual(vh.ref, vr.ref, vw.ref, fe, vy.ref))
            torch.cuda.synchronize()
            if not torch.equal(h, ht):
                raise RuntimeError("h != x + r")
            e = relerr(y, yt)
            if not e < 3e-2:
                raise RuntimeError(f"max_err vs torch {e}")
        except Exception as ex:
            tab.fail(shape, "rms+res", f"flashc {res_name(v)}", ex)
            continue
        # h grows by r at every timed call (h += r in place): bf16, no overflow in a few hundred
        tab.row(shape, "rms+res", f"flashc {res_name(v)}",
                timed(lambda: lib.flashc_rmsnorm_residual(vh.ref, vr.ref, vw.ref, fe, vy.ref), a.calls, a.reps), nb, pr,
                f"err {e:.1e}")
    setvar("FLASHC_CUDA_RMS_FWD", None)
    del ht

    # backward; dw of each variant twice, bit for bit (the library's contract: no atomics)
    nb = 3 * T * D * 2 + 2 * D * 2
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    yg = F.rms_norm(xg, (D,), wg, eps=eps)
    dxt, dwt = torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True)
    pb = tab.row(shape, "rms_bwd", "torch autograd",
                 timed(lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True), a.calls, a.reps), nb)
    prof("rms_bwd", "torch autograd", lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True))
    for v in bwd:
        if tab.late():
            break
        setvar("FLASHC_CUDA_RMS_BWD", v)
        dx.fill_(float("nan"))
        try:
            _lib.check(lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref))
            torch.cuda.synchronize()
            dw1 = dw.clone()
            ex_, ew_ = relerr(dx, dxt), relerr(dw, dwt)
            if not (ex_ < 5e-2 and ew_ < 5e-2):
                raise RuntimeError(f"max_err vs torch dx {ex_} dw {ew_}")
        except Exception as ex:
            tab.fail(shape, "rms_bwd", f"flashc {v or 'default (v6)'}", ex)
            continue
        ms = timed(lambda: lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref), a.calls, a.reps)
        same = torch.equal(dw, dw1)
        tab.row(shape, "rms_bwd", f"flashc {v or 'default (v6)'}", ms, nb, pb,
                f"err dx {ex_:.1e} dw {ew_:.1e}{'' if same else ' DW NOT REPEATABLE'}")
        if v in BIG:  # the same with 5x the calls a batch: a fixed cost a batch shows as a drop
            tab.row(shape, "rms_bwd", f"flashc {v or 'default (v6)'} ({5 * a.calls} a batch)",
                    timed(lambda: lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref),
                          5 * a.calls, a.reps), nb, pb)
        if ("rms_bwd", v) in PROF:
            prof("rms_bwd", f"flashc {v or 'default (v6)'}",
                 lambda: lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref))
    setvar("FLASHC_CUDA_RMS_BWD", None)
    tab.of_copy(shape, cp)


def variants(arg, default):
    if arg is None:
        return default
    return [None if v.strip() in ("-", "") else v.strip() for v in arg.split(";")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="16384x4096,4096x8192")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--copylib", default=None)
    ap.add_argument("--fwd", default=None, help="forward variants, ';'-separated ('-': unset)")
    ap.add_argument("--res", default=None, help="residual forward variants")
    ap.add_argument("--bwd", default=None, help="backward variants")
    ap.add_argument("--budget", type=float, default=40.0, help="seconds; later variants are skipped")
    ap.add_argument("--out", default=None)
    ap.add_argument("--prof", type=int, default=1, help="the torch.profiler kernel breakdown (0: off)")
    a = ap.parse_args()
    lists = (variants(a.fwd, FWD), variants(a.res, RES), variants(a.bwd, BWD))
    tab = Table(a.budget)
    torch.manual_seed(0)
    lib = _lib.library()
    cl = load_copylib(a.copylib)
    for s in a.shapes.split(","):
        T, D = (int(v) for v in s.split("x"))
        run_shape(lib, cl, T, D, a, tab, lists)
    tab.print("RMSNorm bf16")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": tab.rows,
                       "prof": tab.profs}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
