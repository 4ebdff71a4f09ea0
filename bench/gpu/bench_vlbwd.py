#!/usr/bin/env python3
"""flashc's CUDA varlen backward against its dense backward at the same total work.

Varlen: 8 ragged sequences (16384 tokens in all), bf16, d = 128, 16 heads (hidden 2048),
causal, through the Python binding (flash_attn_varlen_func with torch autograd for fwd + bwd;
flash_attn_varlen_backward for the backward alone, fast and deterministic). Peers in the same
run: the dense flashc backward at B = 3, S = 4096 (B S^2 within 4% of the varlen sum of
S_b^2: the same work), and B = 8, S = 2048 (the same tokens). TFLOP/s count the unmasked work:
fwd 4 H d sum(S_b^2) / 2 (causal), bwd 2.5 x that (bench_bwd.py's convention). Each flashc
configuration is checked first (finite gradients, zero gradients on the rows of no sequence).
Times: CUDA events around each call after warm-up, median of 15 calls.

usage: FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python bench_vlbwd.py [--out vlbwd.json]
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import flashc  # noqa: E402
from flashc import attention  # noqa: E402

LENS = [4096, 512, 3000, 1024, 2500, 128, 3500, 1624]  # 16384 tokens
H, D = 16, 128


def median_ms(fn, reps=15, warm=4):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    ts.sort()
    return ts[len(ts) // 2]


def tflops(flop, ms):
    return flop / (ms * 1e-3) / 1e12


def varlen_rows(det_too=True):
    g = torch.Generator(device="cuda").manual_seed(0)
    total = sum(LENS) + 8  # 8 rows of no sequence at the end
    mk = lambda n: torch.randn(n, H, D, device="cuda", dtype=torch.bfloat16, generator=g)  # noqa: E731
    q, k, v, dout = mk(total), mk(total), mk(total), mk(total)
    cu = torch.tensor([0] + list(torch.tensor(LENS).cumsum(0)), dtype=torch.int32, device="cuda")
    mx = max(LENS)
    fwd_flop = sum(4 * H * D * s * s / 2 for s in LENS)
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

    def fwd_bwd():
        qg.grad = kg.grad = vg.grad = None
        flashc.flash_attn_varlen_func(qg, kg, vg, cu, cu, mx, mx, causal=True).backward(dout)

    fwd_bwd()
    torch.cuda.synchronize()
    for t in (qg, kg, vg):
        assert torch.isfinite(t.grad).all(), "non-finite varlen gradient"
        assert (t.grad[sum(LENS):] == 0).all(), "rows of no sequence not zero"
    out, lse = attention.varlen_forward(q, k, v, cu, cu, mx, mx, None, True)
    rows = [("varlen fwd+bwd", fwd_flop * 3.5, median_ms(fwd_bwd))]
    for det in ([False, True] if det_too else [False]):
        bwd = lambda: attention.flash_attn_varlen_backward(  # noqa: E731
            dout, q, k, v, out, lse, cu, cu, mx, mx, causal=True, deterministic=det)
        rows.append(("varlen bwd" + (" det" if det else ""), fwd_flop * 2.5, median_ms(bwd)))
    return rows


def dense_rows(B, S):
    g = torch.Generator(device="cuda").manual_seed(1)
    mk = lambda: torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16, generator=g)  # noqa: E731
    q, k, v, dout = mk(), mk(), mk(), mk()
    fwd_flop = 4 * B * H * D * S * S / 2
    qg, kg, vg = (t.clone().requires_grad_() for t in (q, k, v))

    def fwd_bwd():
        qg.grad = kg.grad = vg.grad = None
        flashc.flash_attn_func(qg, kg, vg, causal=True).backward(dout)

    out, lse = attention.attention_forward(q, k, v, None, True)
    bwd = lambda: attention.flash_attn_backward(dout, q, k, v, out, lse, causal=True)  # noqa: E731
    tag = f"dense {B}x{S}"
    return [(tag + " fwd+bwd", fwd_flop * 3.5, median_ms(fwd_bwd)),
            (tag + " bwd", fwd_flop * 2.5, median_ms(bwd))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    print(f"# {torch.cuda.get_device_name()}, {flashc.build_info()}")
    print(f"# varlen lengths {LENS} (sum {sum(LENS)}), H = {H}, d = {D}, bf16, causal")
    rows = varlen_rows() + dense_rows(3, 4096) + dense_rows(8, 2048)
    peer = {r[0]: r for r in rows}
    res = []
    print(f"{'variant':<28} {'ms':>8} {'TFLOP/s':>8}  ratio")
    for name, flop, ms in rows:
        kind = "fwd+bwd" if "fwd+bwd" in name else "bwd"
        ref = peer["dense 3x4096 " + kind]
        ratio = tflops(flop, ms) / tflops(ref[1], ref[2])
        print(f"{name:<28} {ms:8.3f} {tflops(flop, ms):8.1f}  {ratio:.2f}x dense 3x4096 {kind}")
        res.append({"variant": name, "ms": ms, "tflops": tflops(flop, ms), "ratio_dense_same_work": ratio})
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
