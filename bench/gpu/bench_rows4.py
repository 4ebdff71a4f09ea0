#!/usr/bin/env python3
"""RMSNorm bf16 on the GPU, issue 14's open targets (helper rows4): the defaults set in round 2
(plain forward rms_fwd_v4 on four warps a row, R = 4, launched as a programmatic dependent,
PDL; the residual forward's v4 with PDL) against the old kernels by name ("v2"), the rms_fwd_v4
knobs around them, and the backward with PDL (v2:1; v4:...,L), against PyTorch in the same
process, with the copy ceilings and a per-kernel breakdown (torch.profiler / CUPTI: each
kernel's device time against the span per call, so launch gaps and rms_dw_sum show apart).

  forward             flashc_rmsnorm            vs F.rms_norm
  forward + residual  flashc_rmsnorm_residual   vs h = x + r; F.rms_norm(h) (eager)
  backward (dx, dw)   flashc_rmsnorm_bwd        vs autograd of F.rms_norm
  copy ceilings       x.clone(); torch.add(x, dy, out=dx) (the backward's 2 reads + 1 write);
                      with --copylib (bench/gpu/rows_copy.cu) copies in the kernels' patterns

Knobs: FLASHC_CUDA_RMS_FWD=v4:P,W,B,H,G,R,L and FLASHC_CUDA_RMS_BWD=v4:N,B,H,G,L or v2:1 (see
src/cuda/rows_v4.cu). Bytes, timing and checks as bench_rows3.py: CUDA events around batches
of --calls back-to-back calls, median of --reps batches after a warm-up batch; each variant is
checked against torch before it is timed.

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/gpu/bench_rows4.py \
      --copylib out/librows_copy.so --out rows4.json
"""

import argparse
import ctypes
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

from flashc import _arrays, _lib

# Round 2 of rows4 (round 1's lists and figures: bench/RESULTS.md). The defaults now: the plain
# forward v4 with R = 4 and PDL (rows of >= 512 chunks), the residual v4 with PDL; "v2" by name
# = the old kernels (plain rms_fwd_reg; residual v1's rms_fwd_vec). Backward "v2:1": v2 with PDL.
FWD = [None, "v2", "v4:0,2,0,0,0,4", "v4:0,2,0,1,0,4,1", "v4:0,2,0,0,0,2,1", "v4:0,2,0,1,0,2,1", "v4:0,2,0,9,0,4,1",
       "v4:0,2,0,0,0,8,1"]
FWD_WIDE = [None, "v2", "v4:0,2,0,0,0,4", "v4:0,2,0,1,0,4,1", "v4:0,2,0,0,0,2,1", "v4:0,2,0,0,0,16,1"]
RES = [None, "v2", "v4:0,2,0,0", "v4:0,2,0,1,0,1,1", "v4:0,2,0,9,0,1,1"]
BWD = [None, "v2:1", "v4:2,0,0,0,1", "v4:4,0,0,0,1", "v4:2,0,1,0,1"]
# copies: (name, kind, p0..p3)
COPIES = [("flat nc/st.normal", 0, 3, 2, 0, 0), ("flat nc/st.normal PDL", 0, 3, 2, 1, 0), ("flat cs/cs", 0, 0, 0, 0, 0),
          ("rows R 2", 3, 2, 0, 0, 0), ("rows R 4", 3, 4, 0, 0, 0)]
# the kernel breakdown (torch.profiler): (op, variant)
PROF = [("rmsnorm", None), ("rmsnorm", "v2"), ("rms_bwd", None), ("rms_bwd", "v2:1"), ("rms_bwd", "v4:2,0,0,0,1")]


def timed(fn, calls, reps):
    fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps + 1):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(calls):
            fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / calls)
    return statistics.median(out[1:])  # the first batch is a warm-up


def kshort(n):
    n = n.split("(")[0].replace("void ", "")
    return n.split("<")[0][:40]


def breakdown(fn, calls):
    """Per call: each kernel's device time (CUPTI through torch.profiler) and the span from the
    first kernel's start to the last one's end, over `calls` back-to-back calls."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if not ev:
        raise RuntimeError("no device events")
    per, cnt = {}, {}
    for e in ev:
        k = kshort(e.name)
        per[k] = per.get(k, 0.0) + e.time_range.elapsed_us()
        cnt[k] = cnt.get(k, 0) + 1
    span = (max(e.time_range.end for e in ev) - min(e.time_range.start for e in ev)) / calls
    return {k: (v / calls, cnt[k] / calls) for k, v in per.items()}, span


def res_name(v):
    return "v2 (v1 kernel)" if v == "v2" else "default (v4, PDL)" if v is None else v


def setvar(name, v):
    if v is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = v


def relerr(a, b):
    return ((a.float() - b.float()).abs() / (1 + b.float().abs())).max().item()


def run_shape(lib, cl, T, D, a, rows, deadline, profs):
    dev, bf = "cuda", torch.bfloat16
    eps = 1e-6
    shape = f"{T}x{D}"
    narrow = D // 8 <= 512  # v5 forward and the row copies: rows of <= 512 chunks

    def row(op, impl, ms, nbytes, peer=None, note=""):
        r = {"shape": shape, "op": op, "impl": impl, "ms": ms, "tbps": nbytes / (ms * 1e-3) / 1e12, "note": note}
        if peer is not None:
            r["vs_peer"] = r["tbps"] / peer["tbps"]
        rows.append(r)
        print(f"  {shape} {op:8s} {impl:26s} {ms * 1e3:8.1f} us {r['tbps']:5.2f} TB/s {note}", flush=True)
        return r

    def fail(op, impl, ex):
        print(f"  {shape} {op} {impl}: FAILED: {ex}", flush=True)
        rows.append({"shape": shape, "op": op, "impl": impl, "error": str(ex)})

    def late():
        return time.monotonic() > deadline

    x = torch.randn(T, D, device=dev, dtype=bf)
    r = torch.randn(T, D, device=dev, dtype=bf)
    w = torch.rand(D, device=dev, dtype=bf) + 0.5
    dy = torch.randn(T, D, device=dev, dtype=bf)
    y, h = torch.empty_like(x), torch.empty_like(x)
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    vx, vr, vw, vy = (_arrays.view(n, t) for n, t in (("x", x), ("r", r), ("w", w), ("y", y)))
    vh, vdy, vdx, vdw = (_arrays.view(n, t) for n, t in (("h", h), ("dy", dy), ("dx", dx), ("dw", dw)))
    fe = ctypes.c_float(eps)

    cp = row("copy", "torch clone (T, D)", timed(lambda: x.clone(), a.calls, a.reps), 2 * T * D * 2)
    if cl is not None:
        for name, kind, p0, p1, p2, p3 in COPIES:
            if kind and not narrow:
                continue
            y.zero_()
            st = cl.rows_copy(kind, ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), T, D, p0, p1, p2, p3)
            torch.cuda.synchronize()
            if st != 0 or not torch.equal(y, x):
                fail("copy", name, f"status {st}" if st else "y != x")
                continue
            args = (kind, ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), T, D, p0, p1, p2, p3)
            row("copy", name, timed(lambda: cl.rows_copy(*args), a.calls, a.reps), 2 * T * D * 2, cp)

    # the backward's traffic: two reads, one write
    dyc, dxc, want = torch.randn(T, D, device=dev, dtype=bf), torch.empty(T, D, device=dev, dtype=bf), None
    row("copy3", "torch.add(x, dy, out=dx)", timed(lambda: torch.add(x, dyc, out=dxc), a.calls, a.reps), 3 * T * D * 2, cp)
    if cl is not None and hasattr(cl, "rows_copy3"):
        for pdl in (0, 1):
            args3 = (ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(dyc.data_ptr()), ctypes.c_void_p(dxc.data_ptr()), T, D, pdl)
            st = cl.rows_copy3(*args3)
            torch.cuda.synchronize()
            want = (x.view(torch.int16) ^ dyc.view(torch.int16))
            if st != 0 or not torch.equal(dxc.view(torch.int16), want):
                fail("copy3", f"flat x^dy cs{' PDL' if pdl else ''}", f"status {st}" if st else "wrong")
                continue
            row("copy3", f"flat x^dy cs{' PDL' if pdl else ''}", timed(lambda: cl.rows_copy3(*args3), a.calls, a.reps),
                3 * T * D * 2, cp)
    del dyc, dxc, want

    def prof(op, impl, fn):
        if late() or not a.prof:
            return
        try:
            ks, span = breakdown(fn, a.calls)
        except Exception as ex:  # the profiler is a diagnosis, never a failure
            print(f"  prof {shape} {op} {impl}: {ex}", flush=True)
            return
        profs.append({"shape": shape, "op": op, "impl": impl, "span_us": span, "kernels": ks})

    prof("copy", "torch clone", lambda: x.clone())

    # forward
    nb = 2 * T * D * 2 + D * 2
    yt = F.rms_norm(x, (D,), w, eps=eps)
    pf = row("rmsnorm", "torch F.rms_norm", timed(lambda: F.rms_norm(x, (D,), w, eps=eps), a.calls, a.reps), nb)
    prof("rmsnorm", "torch F.rms_norm", lambda: F.rms_norm(x, (D,), w, eps=eps))
    for v in FWD if narrow else FWD_WIDE:
        if late():
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
            fail("rmsnorm", f"flashc {v or 'default'}", ex)
            continue
        row("rmsnorm", f"flashc {v or 'default (v4 R4 PDL)'}", timed(lambda: lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref), a.calls, a.reps),
            nb, pf, f"err {e:.1e}")
        if ("rmsnorm", v) in PROF:
            prof("rmsnorm", f"flashc {v or 'default'}", lambda: lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref))

    # forward + residual
    nb = 4 * T * D * 2 + D * 2
    ht = x + r
    yt = F.rms_norm(ht, (D,), w, eps=eps)
    pr = row("rms+res", "torch x + r; F.rms_norm", timed(lambda: F.rms_norm(x + r, (D,), w, eps=eps), a.calls, a.reps), nb)
    for v in RES:
        if late():
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
            fail("rms+res", f"flashc {res_name(v)}", ex)
            continue
        # h grows by r at every timed call (h += r in place): bf16, no overflow in a few hundred
        row("rms+res", f"flashc {res_name(v)}",
            timed(lambda: lib.flashc_rmsnorm_residual(vh.ref, vr.ref, vw.ref, fe, vy.ref), a.calls, a.reps), nb, pr,
            f"err {e:.1e}")
    setvar("FLASHC_CUDA_RMS_FWD", None)
    del ht

    # backward
    nb = 3 * T * D * 2 + 2 * D * 2
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    yg = F.rms_norm(xg, (D,), wg, eps=eps)
    dxt, dwt = torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True)
    pb = row("rms_bwd", "torch autograd", timed(lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True), a.calls, a.reps), nb)
    prof("rms_bwd", "torch autograd", lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True))
    for v in BWD:
        if late():
            break
        setvar("FLASHC_CUDA_RMS_BWD", v)
        dx.fill_(float("nan"))
        try:
            _lib.check(lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref))
            torch.cuda.synchronize()
            ex_, ew_ = relerr(dx, dxt), relerr(dw, dwt)
            if not (ex_ < 5e-2 and ew_ < 5e-2):
                raise RuntimeError(f"max_err vs torch dx {ex_} dw {ew_}")
        except Exception as ex:
            fail("rms_bwd", f"flashc {v or 'v2'}", ex)
            continue
        row("rms_bwd", f"flashc {v or 'v2'}",
            timed(lambda: lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref), a.calls, a.reps),
            nb, pb, f"err dx {ex_:.1e} dw {ew_:.1e}")
        if ("rms_bwd", v) in PROF:
            prof("rms_bwd", f"flashc {v or 'v2'}",
                 lambda: lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref))
    setvar("FLASHC_CUDA_RMS_BWD", None)
    for q in rows:
        if q.get("shape") == shape and "tbps" in q:
            q["of_copy"] = q["tbps"] / cp["tbps"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="16384x4096,4096x8192")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--copylib", default=None)
    ap.add_argument("--budget", type=float, default=40.0, help="seconds; later variants are skipped")
    ap.add_argument("--out", default=None)
    ap.add_argument("--prof", type=int, default=1, help="the torch.profiler kernel breakdown (0: off)")
    a = ap.parse_args()
    deadline = time.monotonic() + a.budget
    torch.manual_seed(0)
    lib = _lib.library()
    cl = None
    if a.copylib:
        try:
            cl = ctypes.CDLL(a.copylib)
            cl.rows_copy.restype = ctypes.c_int
            cl.rows_copy.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_longlong,
                                     ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
            cl.rows_copy3.restype = ctypes.c_int
            cl.rows_copy3.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                                      ctypes.c_longlong, ctypes.c_int]
        except OSError as ex:
            print(f"copy library not loaded: {ex}", flush=True)
    rows, profs = [], []
    for s in a.shapes.split(","):
        T, D = (int(v) for v in s.split("x"))
        run_shape(lib, cl, T, D, a, rows, deadline, profs)
    if profs:
        print("\nkernel breakdown (torch.profiler; us per call: span = first kernel start to last end / calls)")
        for q in profs:
            ks = "; ".join(f"{k} {v[0]:.1f} (x{v[1]:.0f})" for k, v in sorted(q["kernels"].items(), key=lambda kv: -kv[1][0]))
            tot = sum(v[0] for v in q["kernels"].values())
            print(f"  {q['shape']} {q['op']} {q['impl']}: span {q['span_us']:.1f}, kernels {tot:.1f}, "
                  f"gaps {q['span_us'] - tot:.1f}: {ks}")
    print(f"\nRMSNorm bf16, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| shape | op | impl | us | TB/s | of clone | vs torch |")
    print("|---|---|---|--:|--:|--:|--:|")
    for q in rows:
        if "error" in q:
            print(f"| {q['shape']} | {q['op']} | {q['impl']} | FAILED: {q['error'][:50]} | | | |")
            continue
        vs = f"{q['vs_peer']:.2f}x" if "vs_peer" in q else ""
        print(f"| {q['shape']} | {q['op']} | {q['impl']} | {q['ms'] * 1e3:.1f} | {q['tbps']:.2f} | "
              f"{100 * q.get('of_copy', 0):.0f}% | {vs} |")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows, "prof": profs}, fh,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
