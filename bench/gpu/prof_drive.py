#!/usr/bin/env python3
"""bench/gpu/prof_drive.py OP — a few calls of one op (flashc, then its torch peer) on the current
CUDA device, for `ncu` to profile (the lead's profiling pass of 2026-12-01 late session: where do
decode, RMSNorm, the sm90 forward and backward lose to their peers?). OP: decode | rms | rms_bwd |
fwd | bwd. Shapes are the issue targets' (bf16). Each op runs 3 warm-up calls then 2 more, flashc
first, then the peer, with a torch.cuda.synchronize between, so `ncu --launch-skip` can pick.
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flashc

op = sys.argv[1]
dev = "cuda"
bf = torch.bfloat16
torch.manual_seed(0)


def rep(fn, n=5):
    for _ in range(n):
        fn()
    torch.cuda.synchronize()


if op == "decode":
    B, ctx, hq, hkv, d = int(os.environ.get("B", 1)), int(os.environ.get("CTX", 32768)), 32, 8, 128
    q = torch.randn(B, 1, hq, d, device=dev, dtype=bf)
    kc = torch.randn(B, ctx, hkv, d, device=dev, dtype=bf)
    vc = torch.randn(B, ctx, hkv, d, device=dev, dtype=bf)
    sl = torch.full((B,), ctx, device=dev, dtype=torch.int32)
    rep(lambda: flashc.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=sl))
    qt, kt, vt = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        rep(lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True))
elif op in ("rms", "rms_bwd"):
    T, D = 16384, 4096
    x = torch.randn(T, D, device=dev, dtype=bf)
    w = torch.randn(D, device=dev, dtype=bf)
    if op == "rms":
        rep(lambda: flashc.ops.rms_norm_forward(x, w, 1e-6))
        rep(lambda: F.rms_norm(x, (D,), w, 1e-6))
        rep(lambda: x.clone())
    else:
        dy = torch.randn_like(x)
        rep(lambda: flashc.ops.rms_norm_backward(dy, x, w, 1e-6))
elif op in ("fwd", "bwd"):
    S = int(os.environ.get("S", 4096))
    d = int(os.environ.get("D", 128))
    causal = os.environ.get("CAUSAL", "0") == "1"
    H = 2048 // d
    B = 16384 // S
    q = torch.randn(B, S, H, d, device=dev, dtype=bf, requires_grad=(op == "bwd"))
    k = torch.randn_like(q, requires_grad=(op == "bwd"))
    v = torch.randn_like(q, requires_grad=(op == "bwd"))
    qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_(op == "bwd") for t in (q, k, v))
    if op == "fwd":
        rep(lambda: flashc.flash_attn_func(q, k, v, causal=causal))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            rep(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal))
    else:
        o = flashc.flash_attn_func(q, k, v, causal=causal)
        do = torch.randn_like(o)
        rep(lambda: torch.autograd.grad(o, (q, k, v), do, retain_graph=True))
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            ot = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            rep(lambda: torch.autograd.grad(ot, (qt, kt, vt), do.transpose(1, 2), retain_graph=True))
else:
    sys.exit(f"unknown op {op}")
print("done", op)
