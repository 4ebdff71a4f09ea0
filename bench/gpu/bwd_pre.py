#!/usr/bin/env python3
"""The CUDA backward's preprocess (D = rowsum(dO * O), attn_bwd_pre_kernel in
src/cuda/attn_bwd_common.cuh) in its two launch shapes: R rows a warp (the default since helper
bwd10: 2 at d <= 64, 1 above) against one row a warp (FLASHC_CUDA_BWD_PRE=r1, the shape before).

1. Same bits: per shape (bf16 and fp16, d 64 and 128, a row count that leaves the last warp half
   full), one deterministic backward under each launch shape into a workspace filled with 0xff;
   D (the workspace's dsum region) and dQ, dK, dV must be bitwise equal (any NaN fails).
2. Time: the preprocess kernel's device time (torch.profiler, as bwd_which.py) over N calls of
   the whole backward (fast mode, default family), median, each launch shape, at d 64 (B 4, H 32)
   and d 128 (B 4, H 16), S 4096, bf16, non-causal: the 2026-12-04 profile's cases.

usage: bwd_pre.py --lib build/libflashc.so [--calls 20]
"""
import argparse
import ctypes
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_bwd as bb  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

SHAPES = ((torch.bfloat16, 1, 1001, 3, 64), (torch.float16, 1, 1001, 3, 64),
          (torch.bfloat16, 1, 777, 5, 128), (torch.float16, 2, 333, 3, 128),
          (torch.bfloat16, 4, 4096, 32, 64), (torch.bfloat16, 4, 4096, 16, 128))


def setup(lib, dt, B, S, H, d):
    torch.manual_seed(B * S + H + d)
    q, k, v, dout = (torch.randn(B, S, H, d, device="cuda", dtype=dt) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    stream = torch.cuda.current_stream().cuda_stream
    ts = (q, k, v, o, dout, lse, dq, dk, dv)
    vs = [bb.view(x) for x in ts]
    refs = [ctypes.byref(x) for x in vs]
    p = bb.params(False, stream)
    assert lib.flashc_attn_fwd(ctypes.byref(p), refs[0], refs[1], refs[2], refs[3], refs[5],
                               None) == 0, lib.flashc_last_error()
    return ts, vs, refs, stream


def pre_env(shape):
    if shape == "r1":
        os.environ["FLASHC_CUDA_BWD_PRE"] = "r1"
    else:
        os.environ.pop("FLASHC_CUDA_BWD_PRE", None)


def bits(lib, dt, B, S, H, d):
    ts, vs, refs, stream = setup(lib, dt, B, S, H, d)
    dq, dk, dv = ts[6:]
    n = ctypes.c_size_t(0)
    pw = bb.params(False, stream, 1)
    assert lib.flashc_attn_bwd_workspace_size(ctypes.byref(pw), *refs, ctypes.byref(n)) == 0
    rows = B * H * S
    off = (rows * d * 4 + 255) // 256 * 256
    got = {}
    for shape in ("r1", "new"):
        pre_env(shape)
        ws = torch.full((n.value,), 0xff, dtype=torch.uint8, device="cuda")
        pb = bb.params(False, stream, 1, ws.data_ptr(), n.value)
        for g in (dq, dk, dv):
            g.fill_(float("nan"))
        st = lib.flashc_attn_bwd(ctypes.byref(pb), *refs, None)
        torch.cuda.synchronize()
        assert st == 0, lib.flashc_last_error()
        dsum = ws[off:off + rows * 4].view(torch.float32).clone()
        got[shape] = (dsum, dq.clone(), dk.clone(), dv.clone())
    pre_env("new")
    iv = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
    ok = all(torch.equal(x.view(iv[x.dtype]), y.view(iv[y.dtype])) and
             not torch.isnan(x).any().item() for x, y in zip(got["r1"], got["new"]))
    name = "bf16" if dt == torch.bfloat16 else "fp16"
    print(f"pre bits: {name} B{B} S{S} H{H} d{d}: D, dQ, dK, dV (deterministic) "
          f"{'IDENTICAL' if ok else 'DIFFER'} under r1 and the new shape", flush=True)
    return ok


def timing(lib, B, S, H, d, calls):
    ts, vs, refs, stream = setup(lib, torch.bfloat16, B, S, H, d)
    n = ctypes.c_size_t(0)
    pw = bb.params(False, stream, 0)
    assert lib.flashc_attn_bwd_workspace_size(ctypes.byref(pw), *refs, ctypes.byref(n)) == 0
    ws = torch.empty(n.value, dtype=torch.uint8, device="cuda")
    pb = bb.params(False, stream, 0, ws.data_ptr(), n.value)
    res = {}
    for shape in ("r1", "new", "r1", "new"):  # interleaved twice; the second pass is reported
        pre_env(shape)
        for _ in range(3):
            lib.flashc_attn_bwd(ctypes.byref(pb), *refs, None)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                assert lib.flashc_attn_bwd(ctypes.byref(pb), *refs, None) == 0
            torch.cuda.synchronize()
        pre, tot = [], []
        for e in prof.events():
            if "attn_bwd" not in e.name or e.device_type != torch.autograd.DeviceType.CUDA:
                continue
            t = e.time_range.elapsed_us()  # a kernel's own span (rows_bench_common.py's way)
            if "pre_kernel" in e.name:
                pre.append(t)
            tot.append(t)
        res[shape] = (statistics.median(pre), sum(tot) / calls,
                      next(e.name.split("(")[0] for e in prof.events() if "pre_kernel" in e.name))
    pre_env("new")
    (p1, t1, n1), (p2, t2, n2) = res["r1"], res["new"]
    print(f"pre time: d{d} B{B} S{S} H{H} bf16 non-causal: preprocess r1 {p1:.1f} us, new "
          f"{p2:.1f} us ({p1 / p2:.2f}x); all backward kernels {t1:.0f} -> {t2:.0f} us a call "
          f"({t1 / t2:.3f}x); kernels {n1.replace('attn_bwd_', '')} / "
          f"{n2.replace('attn_bwd_', '')}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    lib = ctypes.CDLL(a.lib)
    lib.flashc_last_error.restype = ctypes.c_char_p
    bad = 0
    for sh in SHAPES:
        bad += not bits(lib, *sh)
    timing(lib, 4, 4096, 32, 64, a.calls)
    timing(lib, 4, 4096, 16, 128, a.calls)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
