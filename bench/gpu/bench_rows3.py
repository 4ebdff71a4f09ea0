#!/usr/bin/env python3
"""RMSNorm bf16 on the GPU: v2 and the rows_v4.cu variants (v4 registers, v5 bulk copies)
against PyTorch and against copies written with the kernels' own access patterns, one process.

  forward             flashc_rmsnorm            vs F.rms_norm
  forward + residual  flashc_rmsnorm_residual   vs h = x + r; F.rms_norm(h) (eager)
  backward (dx, dw)   flashc_rmsnorm_bwd        vs autograd of F.rms_norm
  copy ceilings       x.clone() of the (T, D) tensor, and (--copylib, bench/gpu/rows_copy.cu)
                      copies in the patterns of the kernels: flat, rows in registers (v4), rows
                      through shared memory by bulk copies (v5), with the same knobs

Variants by FLASHC_CUDA_RMS_FWD / FLASHC_CUDA_RMS_BWD (read by the library at every call; see
src/cuda/rows_v4.cu for the knobs). Bytes are the fewest each op must move (bench_rows2.py's
count): forward x + y (+ w), residual x, r, h, y (+ w), backward x, dy, dx (+ w, dw); copies
read + write. Times: CUDA events around batches of --calls back-to-back calls, median of --reps
batches after a warm-up batch; the library is called through ctypes on views built once. Each
variant's output is checked against torch before it is timed (a failing one is reported, not
timed). A variant that does not apply to a shape falls back to v2 inside the library, so such
rows are not listed for that shape (v5 forward: rows of at most 512 chunks).

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/gpu/bench_rows3.py \
      --copylib out/librows_copy.so --out rows3.json
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

# forward: v2, then v4 (P,W,B,H) and v5 (W,S,B,H); backward: v5 (N,S,B,H) and v4 (N,B,H)
FWD = [None, "v4:0,2,0,0", "v4:0,2,0,1", "v4:0,2,0,2", "v4:0,2,0,3", "v4:0,2,0,4", "v4:0,2,0,8",
       "v4:0,2,0,9", "v4:0,2,0,11", "v4:0,2,4,0", "v4:0,2,6,0", "v4:0,2,8,0", "v4:0,4,3,0",
       "v4:0,1,12,0", "v4:0,2,6,9", "v4:1,2,5,0", "v4:1,2,4,0", "v4:1,1,10,0", "v4:1,2,5,9",
       "v4:1,1,8,1", "v4:2,1,8,0", "v4:2,1,6,0", "v4:2,1,8,9",
       "v5:4,3,0,1", "v5:4,3,0,0", "v5:4,3,0,9", "v5:8,3,0,1", "v5:8,2,0,1", "v5:4,6,0,1",
       "v5:2,4,0,1", "v5:3,3,0,1", "v5:7,4,0,1", "v5:6,2,0,1", "v5:2,6,0,1", "v5:4,2,0,1"]
RES = [None, "v4:0,2,0,0", "v4:0,2,0,1", "v4:0,2,0,9", "v4:0,2,8,0", "v4:1,1,8,0", "v4:1,1,6,9",
       "v5:4,3,0,1", "v5:2,3,0,1", "v5:3,2,0,1", "v5:6,2,0,1", "v5:2,2,0,9", "v5:4,3,0,9"]
BWD = [None, "v5:4,3,0,1", "v5:4,3,0,0", "v5:4,3,0,5", "v5:4,2,0,1", "v5:4,4,0,1", "v5:4,6,0,1",
       "v5:4,4,3,1", "v5:4,3,3,1", "v5:4,6,2,1", "v5:2,3,0,1", "v5:2,4,0,1", "v5:4,3,0,9",
       "v5:4,8,1,1", "v5:4,5,2,1", "v4:4,0,0", "v4:4,0,1", "v4:4,0,2", "v4:4,0,4", "v4:4,0,9", "v4:4,3,0",
       "v4:2,0,0", "v4:2,0,1"]
# copies: (name, kind, p0..p3)
COPIES = [("flat cs/cs", 0, 0, 0, 0, 0), ("flat na.ef/st.ef", 0, 1, 1, 0, 0), ("flat 256B/st.normal", 0, 2, 2, 0, 0),
          ("flat nc/st.normal", 0, 3, 2, 0, 0),
          ("rows v4:0,2,0,0", 1, 0, 2, 0, 0), ("rows v4:0,2,0,9", 1, 0, 2, 0, 9), ("rows v4:0,2,6,0", 1, 0, 2, 6, 0),
          ("rows v4:0,2,8,0", 1, 0, 2, 8, 0), ("rows v4:1,2,5,0", 1, 1, 2, 5, 0), ("rows v4:1,1,10,0", 1, 1, 1, 10, 0),
          ("rows v4:1,2,5,9", 1, 1, 2, 5, 9),
          ("tma v5:4,3,0,1", 2, 4, 3, 0, 1), ("tma v5:8,3,0,1", 2, 8, 3, 0, 1), ("tma v5:4,6,0,1", 2, 4, 6, 0, 1),
          ("tma v5:8,2,0,1", 2, 8, 2, 0, 1), ("tma v5:4,3,0,9", 2, 4, 3, 0, 9), ("tma v5:7,4,0,1", 2, 7, 4, 0, 1)]


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


def setvar(name, v):
    if v is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = v


def relerr(a, b):
    return ((a.float() - b.float()).abs() / (1 + b.float().abs())).max().item()


def run_shape(lib, cl, T, D, a, rows, deadline):
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

    # forward
    nb = 2 * T * D * 2 + D * 2
    yt = F.rms_norm(x, (D,), w, eps=eps)
    pf = row("rmsnorm", "torch F.rms_norm", timed(lambda: F.rms_norm(x, (D,), w, eps=eps), a.calls, a.reps), nb)
    for v in FWD:
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
            fail("rmsnorm", f"flashc {v or 'v2'}", ex)
            continue
        row("rmsnorm", f"flashc {v or 'v2'}", timed(lambda: lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref), a.calls, a.reps),
            nb, pf, f"err {e:.1e}")

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
            fail("rms+res", f"flashc {v or 'v2 (v1 kernel)'}", ex)
            continue
        # h grows by r at every timed call (h += r in place): bf16, no overflow in a few hundred
        row("rms+res", f"flashc {v or 'v2 (v1 kernel)'}",
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
    setvar("FLASHC_CUDA_RMS_BWD", None)
    for q in rows:
        if q.get("shape") == shape and "tbps" in q:
            q["of_copy"] = q["tbps"] / cp["tbps"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="16384x4096,4096x8192")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--copylib", default=None)
    ap.add_argument("--budget", type=float, default=40.0, help="seconds; later variants are skipped")
    ap.add_argument("--out", default=None)
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
        except OSError as ex:
            print(f"copy library not loaded: {ex}", flush=True)
    rows = []
    for s in a.shapes.split(","):
        T, D = (int(v) for v in s.split("x"))
        run_shape(lib, cl, T, D, a, rows, deadline)
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
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
