#!/usr/bin/env python3
"""RMSNorm bf16 T x D on the GPU: the kernel variants of src/cuda/rows.cu against PyTorch, one run.

  forward             flashc_rmsnorm            vs F.rms_norm
  forward + residual  flashc_rmsnorm_residual   vs h = x + r; F.rms_norm(h) (eager)
  backward (dx, dw)   flashc_rmsnorm_bwd        vs autograd of F.rms_norm
  copy ceiling        x.clone() of the same (T, D) tensor (read + write)

The variants are chosen by the environment, which the library reads at every call
(FLASHC_CUDA_RMS_FWD, FLASHC_CUDA_RMS_BWD: "v3:A,S" = the ring kernels; unset = v2; the residual
forward's v2 default is v1's rms_fwd_vec). Bytes as bench/gpu/bench_rows.py counts them, the
fewest each op must move: forward x read + y written (+ w), residual x and r read + h and y
written (+ w), backward x and dy read + dx written (+ w read and dw written); the copy read +
write. Times: CUDA events around batches of --calls back-to-back calls, median of --reps batches
after a warm-up batch. The library is called through ctypes on views built once, so that the
Python wrapper's per-call work (allocation, checks) is not timed. Every variant's output is
checked against torch before it is timed; a variant that fails is reported and not timed.

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/gpu/bench_rows2.py --out rows2.json
"""

import argparse
import ctypes
import json
import os
import statistics
import sys

import torch
import torch.nn.functional as F

from flashc import _arrays, _lib

FWD = [None, "v3:4,3", "v3:2,6", "v3:3,4", "v3:8,2", "v3:1,7"]
BWD = [None, "v3:4,3", "v3:4,4", "v3:4,6", "v3:2,4", "v3:1,4"]


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dev, bf = "cuda", torch.bfloat16
    torch.manual_seed(0)
    T, D, eps = a.tokens, a.hidden, 1e-6
    lib = _lib.library()
    rows = []

    def row(op, impl, ms, nbytes, peer=None, note=""):
        r = {"op": op, "impl": impl, "ms": ms, "tbps": nbytes / (ms * 1e-3) / 1e12, "note": note}
        if peer is not None:
            r["vs_peer"] = r["tbps"] / peer["tbps"]
        rows.append(r)
        print(f"  {op:10s} {impl:28s} {ms * 1e3:8.1f} us {r['tbps']:5.2f} TB/s {note}", flush=True)
        return r

    def call(st):
        _lib.check(st)  # raises with the library's message

    x = torch.randn(T, D, device=dev, dtype=bf)
    r = torch.randn(T, D, device=dev, dtype=bf)
    w = torch.rand(D, device=dev, dtype=bf) + 0.5
    dy = torch.randn(T, D, device=dev, dtype=bf)
    y, h = torch.empty_like(x), torch.empty_like(x)
    dx, dw = torch.empty_like(x), torch.empty_like(w)
    vx, vr, vw, vy = (_arrays.view(n, t) for n, t in (("x", x), ("r", r), ("w", w), ("y", y)))
    vh, vdy, vdx, vdw = (_arrays.view(n, t) for n, t in (("h", h), ("dy", dy), ("dx", dx), ("dw", dw)))
    for v in (vx, vr, vw, vy, vh, vdy, vdx, vdw):
        assert v.owner is not None
    fe = ctypes.c_float(eps)

    # copy ceiling: the same tensor size, read + write
    cp = row("copy", "torch clone (T, D)", timed(lambda: x.clone(), a.calls, a.reps), 2 * T * D * 2)

    # forward
    nb = 2 * T * D * 2 + D * 2
    yt = F.rms_norm(x, (D,), w, eps=eps)
    pf = row("rmsnorm", "torch F.rms_norm", timed(lambda: F.rms_norm(x, (D,), w, eps=eps), a.calls, a.reps), nb)
    for v in FWD:
        setvar("FLASHC_CUDA_RMS_FWD", v)
        y.fill_(float("nan"))
        try:
            call(lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref))
            torch.cuda.synchronize()
            e = relerr(y, yt)
            if not e < 2e-2:
                raise RuntimeError(f"max_err vs torch {e}")
        except Exception as ex:  # report, keep going with the other variants
            print(f"  rmsnorm {v or 'v2'}: FAILED: {ex}", flush=True)
            rows.append({"op": "rmsnorm", "impl": f"flashc {v or 'v2'}", "error": str(ex)})
            continue
        row("rmsnorm", f"flashc {v or 'v2'}", timed(lambda: lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref), a.calls, a.reps),
            nb, pf, f"err {e:.1e}")

    # forward + residual: h = x + r (written), y = rms_norm(h) * w
    nb = 4 * T * D * 2 + D * 2
    ht = x + r
    yt = F.rms_norm(ht, (D,), w, eps=eps)
    pr = row("rms+res", "torch x + r; F.rms_norm", timed(lambda: F.rms_norm(x + r, (D,), w, eps=eps), a.calls, a.reps), nb)
    for v in FWD:
        setvar("FLASHC_CUDA_RMS_FWD", v)
        try:
            h.copy_(x)
            y.fill_(float("nan"))
            call(lib.flashc_rmsnorm_residual(vh.ref, vr.ref, vw.ref, fe, vy.ref))
            torch.cuda.synchronize()
            if not torch.equal(h, ht):
                raise RuntimeError("h != x + r")
            e = relerr(y, yt)
            if not e < 3e-2:
                raise RuntimeError(f"max_err vs torch {e}")
        except Exception as ex:
            print(f"  rms+res {v or 'v2'}: FAILED: {ex}", flush=True)
            rows.append({"op": "rms+res", "impl": f"flashc {v or 'v2 (v1 kernel)'}", "error": str(ex)})
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
        setvar("FLASHC_CUDA_RMS_BWD", v)
        dx.fill_(float("nan"))
        try:
            call(lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref))
            torch.cuda.synchronize()
            ex_, ew_ = relerr(dx, dxt), relerr(dw, dwt)
            if not (ex_ < 5e-2 and ew_ < 5e-2):
                raise RuntimeError(f"max_err vs torch dx {ex_} dw {ew_}")
        except Exception as ex:
            print(f"  rms_bwd {v or 'v2'}: FAILED: {ex}", flush=True)
            rows.append({"op": "rms_bwd", "impl": f"flashc {v or 'v2'}", "error": str(ex)})
            continue
        row("rms_bwd", f"flashc {v or 'v2'}",
            timed(lambda: lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref), a.calls, a.reps),
            nb, pb, f"err dx {ex_:.1e} dw {ew_:.1e}")
    setvar("FLASHC_CUDA_RMS_BWD", None)

    for q in rows:
        if "tbps" in q:
            q["of_copy"] = q["tbps"] / cp["tbps"]
    print(f"\nRMSNorm bf16 {T}x{D}, {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print("| op | impl | us | TB/s | of copy | vs torch |")
    print("|---|---|--:|--:|--:|--:|")
    for q in rows:
        if "error" in q:
            print(f"| {q['op']} | {q['impl']} | FAILED: {q['error'][:60]} | | | |")
            continue
        vs = f"{q['vs_peer']:.2f}x" if "vs_peer" in q else ""
        print(f"| {q['op']} | {q['impl']} | {q['ms'] * 1e3:.1f} | {q['tbps']:.2f} | {100 * q['of_copy']:.0f}% | {vs} |")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "T": T, "D": D, "rows": rows},
                      fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
