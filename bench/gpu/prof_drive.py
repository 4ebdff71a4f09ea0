#!/usr/bin/env python3
"""bench/gpu/prof_drive.py — calls of one op (flashc, then its torch peer) on the current CUDA device,
for `ncu` to profile (bf16, the issue targets' shapes).

  prof_drive.py OP              (bench/gpu/prof_r0.sh) OP: decode | rms | rms_bwd | fwd | bwd, shape
                                from the environment (B, CTX / S, D, CAUSAL); each side runs 5 calls,
                                flashc first, then the peer, a torch.cuda.synchronize between, so
                                `ncu --launch-skip` can pick.
  prof_drive.py --ranges CASE.. (bench/gpu/s9_prof2.sh, under `ncu --profile-from-start off`) CASE:
                                OP[:KEY=VALUE,...], e.g. fwd:S=16384,D=128 or decode:B=1,CTX=32768;
                                each side runs 4 warm-up calls, then ONE call inside a
                                cudaProfilerStart/Stop range that starts with a marker kernel
                                (torch.cuda._sleep: spin_kernel), so every kernel ncu records belongs
                                to the segment of the last marker. Prints one "SEG <case> <side>" line
                                a segment, in order (prof_table.py reads them). --dry: the plan only.

Shapes: fwd / bwd: batch x seqlen = 16384, hidden 2048 (H = 2048 / D); decode: Hq 32, Hkv 8, d 128,
B sequences of CTX cached keys; rms: 16384 x 4096.
"""
import os
import sys


def parse_case(spec):
    op, _, kv = spec.partition(":")
    if op not in ("decode", "rms", "rms_bwd", "fwd", "bwd"):
        sys.exit(f"unknown op {op}")
    p = dict(B="1", CTX="32768", S="4096", D="128", CAUSAL="0")
    for item in filter(None, kv.split(",")):
        k, _, v = item.partition("=")
        if k not in p or not v.isdigit():
            sys.exit(f"bad case {spec!r}: {item!r}")
        p[k] = v
    return op, {k: int(v) for k, v in p.items()}


if len(sys.argv) < 2:
    sys.exit(__doc__)
ranges = sys.argv[1] == "--ranges"
dry = "--dry" in sys.argv
if ranges:
    specs = [a for a in sys.argv[2:] if a != "--dry"]
    cases = [(s,) + parse_case(s) for s in specs]
else:
    op = sys.argv[1]
    cases = [(op,) + parse_case(op + ":" + ",".join(
        f"{k}={os.environ[k]}" for k in ("B", "CTX", "S", "D", "CAUSAL") if k in os.environ))]
if dry:
    for name, op, p in cases:
        print("case", name, op, p)
    sys.exit(0)

import torch  # noqa: E402
import torch.cuda.profiler  # noqa: E402,F401
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

import flashc  # noqa: E402

dev = "cuda"
bf = torch.bfloat16


def profiler(on):
    """cudaProfilerStart / Stop (what `ncu --profile-from-start off` waits for); the driver API's
    cuProfilerStart / Stop on the current context if torch's wrapper is missing."""
    try:
        (torch.cuda.profiler.start if on else torch.cuda.profiler.stop)()
    except (AttributeError, RuntimeError, OSError):
        import ctypes
        rc = getattr(ctypes.CDLL("libcuda.so.1"), "cuProfilerStart" if on else "cuProfilerStop")()
        if rc:
            raise RuntimeError(f"cuProfiler{'Start' if on else 'Stop'}: CUresult {rc}")


def cudnn(fn):
    def call():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return fn()
    return call


def sides(op, p):
    """[(side, fn)]: flashc's call(s) first, then the peer's, on the same inputs."""
    torch.manual_seed(0)
    if op == "decode":
        B, ctx, hq, hkv, d = p["B"], p["CTX"], 32, 8, 128
        q = torch.randn(B, 1, hq, d, device=dev, dtype=bf)
        kc = torch.randn(B, ctx, hkv, d, device=dev, dtype=bf)
        vc = torch.randn(B, ctx, hkv, d, device=dev, dtype=bf)
        sl = torch.full((B,), ctx, device=dev, dtype=torch.int32)
        qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
        return [("flashc", lambda: flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=sl)),
                ("cudnn", cudnn(lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)))]
    if op in ("rms", "rms_bwd"):
        T, D = 16384, 4096
        x = torch.randn(T, D, device=dev, dtype=bf)
        w = torch.randn(D, device=dev, dtype=bf)
        if op == "rms":
            return [("flashc", lambda: flashc.ops.rms_norm_forward(x, w, 1e-6)),
                    ("torch", lambda: F.rms_norm(x, (D,), w, 1e-6)),
                    ("copy", lambda: x.clone())]
        dy = torch.randn_like(x)
        return [("flashc", lambda: flashc.ops.rms_norm_backward(dy, x, w, 1e-6))]
    S, d, causal = p["S"], p["D"], p["CAUSAL"] == 1
    H, B, grad = 2048 // d, 16384 // S, op == "bwd"
    q = torch.randn(B, S, H, d, device=dev, dtype=bf, requires_grad=grad)
    k = torch.randn_like(q, requires_grad=grad)
    v = torch.randn_like(q, requires_grad=grad)
    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_(grad) for t in (q, k, v))
    if op == "fwd":
        return [("flashc", lambda: flashc.flash_attn_func(q, k, v, causal=causal)),
                ("cudnn", cudnn(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)))]
    o = flashc.flash_attn_func(q, k, v, causal=causal)
    do = torch.randn_like(o)
    ot = cudnn(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal))()
    dot = do.transpose(1, 2)
    return [("flashc", lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True)),
            ("cudnn", lambda: torch.autograd.grad(ot, (qt, kt, vt), dot, retain_graph=True))]


for name, op, p in cases:
    try:
        for side, fn in sides(op, p):
            for _ in range(4):
                fn()
            torch.cuda.synchronize()
            if ranges:
                profiler(True)
                torch.cuda._sleep(1000)
                print("SEG", name, side, flush=True)
            try:
                fn()
                torch.cuda.synchronize()
            finally:
                if ranges:
                    profiler(False)
    except Exception as e:  # a failed case must not cost the others' profiles
        print("FAILED", name, f"{type(e).__name__}: {e}"[:300], flush=True)
    torch.cuda.empty_cache()
print("done", " ".join(c[0] for c in cases), flush=True)
