#!/usr/bin/env python3
"""The fused row ops on the GPU against PyTorch, in one run (issue 14's targets):

  RMSNorm bf16 T x D forward   flashc.rms_norm            vs F.rms_norm          (TB/s, ratio)
  RMSNorm backward             flashc.rms_norm_backward   vs autograd of F.rms_norm
  SwiGLU forward               flashc.swiglu              vs F.silu(g) * u       (% of copy)
  RoPE (in place, NeoX)        flashc.apply_rotary_emb    vs the eager formula   (% of copy)
  copy ceiling                 dst.copy_(src), 1 GiB

Bytes counted are the fewest each op must move (inputs read once, outputs written once); the
copy counts read + write. Times: CUDA events around a batch of `--calls` back-to-back calls
(so the Python/ctypes call cost overlaps the GPU work), median of `--reps` batches after a
warm-up batch. Every flashc output is checked against the torch result before timing.

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/gpu/bench_rows.py --out rows.json
"""

import argparse
import json
import sys

import torch
import torch.nn.functional as F

import flashc

from rows_bench_common import timed  # batches of calls between CUDA events (shared)


def rope_torch(x, cos, sin):
    """The eager NeoX formula (flash-attn's apply_rotary_emb_torch), in place like flashc's."""
    h = cos.shape[-1]
    c = cos[None, :, None, :].to(x.dtype)
    s = sin[None, :, None, :].to(x.dtype)
    x0, x1 = x[..., :h].clone(), x[..., h:2 * h]
    x[..., :h] = x0 * c - x1 * s
    x[..., h:2 * h] = x1 * c + x0 * s
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--inter", type=int, default=4096)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    dev = "cuda"
    torch.manual_seed(0)
    T, D, I = a.tokens, a.hidden, a.inter
    rows = []

    def row(op, impl, ms, nbytes, note=""):
        r = {"op": op, "impl": impl, "ms": ms, "tbps": nbytes / (ms * 1e-3) / 1e12, "note": note}
        rows.append(r)
        print(f"  {op:12s} {impl:22s} {ms * 1e3:9.1f} us  {r['tbps']:5.2f} TB/s {note}", flush=True)
        return r

    # copy ceiling
    src = torch.randn(1 << 29, device=dev, dtype=torch.bfloat16)  # 1 GiB
    dst = torch.empty_like(src)
    cp = row("copy", "torch copy_ 1 GiB", timed(lambda: dst.copy_(src), a.calls, a.reps), 2 * src.numel() * 2)
    del src, dst

    # RMSNorm forward
    x = torch.randn(T, D, device=dev, dtype=torch.bfloat16)
    w = torch.randn(D, device=dev, dtype=torch.bfloat16)
    yf = flashc.rms_norm(x, w, eps=1e-6)
    yt = F.rms_norm(x, (D,), w, eps=1e-6)
    err = ((yf.float() - yt.float()).abs() / (1 + yt.float().abs())).max().item()
    assert err < 2e-2, f"rms_norm differs from F.rms_norm: {err}"
    nb = 2 * T * D * 2 + D * 2
    f = row("rmsnorm", "flashc", timed(lambda: flashc.rms_norm(x, w, eps=1e-6), a.calls, a.reps), nb, f"max_err vs torch {err:.2e}")
    t = row("rmsnorm", "torch F.rms_norm", timed(lambda: F.rms_norm(x, (D,), w, eps=1e-6), a.calls, a.reps), nb)
    f["vs_torch"] = f["tbps"] / t["tbps"]

    # RMSNorm backward: flashc's against autograd of F.rms_norm (dx and dw)
    dy = torch.randn(T, D, device=dev, dtype=torch.bfloat16)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    yg = F.rms_norm(xg, (D,), wg, eps=1e-6)
    dxt, dwt = torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True)
    dxf, dwf = flashc.rms_norm_backward(dy, x, w, 1e-6)
    ex = ((dxf.float() - dxt.float()).abs() / (1 + dxt.float().abs())).max().item()
    ew = ((dwf.float() - dwt.float()).abs() / (1 + dwt.float().abs())).max().item()
    assert ex < 5e-2 and ew < 5e-2, f"rms_norm_backward differs: dx {ex} dw {ew}"
    nb = 3 * T * D * 2 + 2 * D * 2
    f = row("rmsnorm_bwd", "flashc", timed(lambda: flashc.rms_norm_backward(dy, x, w, 1e-6), a.calls, a.reps), nb,
            f"max_err vs torch dx {ex:.2e} dw {ew:.2e}")
    t = row("rmsnorm_bwd", "torch autograd", timed(lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True), a.calls, a.reps), nb)
    f["vs_torch"] = f["tbps"] / t["tbps"]
    del xg, wg, yg, dxt, dwt, dxf, dwf, dy, yf, yt

    # SwiGLU forward
    gu = torch.randn(T, 2 * I, device=dev, dtype=torch.bfloat16)
    of = flashc.swiglu(gu)
    g, u = gu.chunk(2, -1)
    ot = F.silu(g) * u
    err = ((of.float() - ot.float()).abs() / (1 + ot.float().abs())).max().item()
    assert err < 2e-2, f"swiglu differs: {err}"
    nb = 3 * T * I * 2
    f = row("swiglu", "flashc", timed(lambda: flashc.swiglu(gu), a.calls, a.reps), nb, f"max_err vs torch {err:.2e}")
    t = row("swiglu", "torch silu(g) * u", timed(lambda: F.silu(g) * u, a.calls, a.reps), nb)
    f["vs_torch"] = f["tbps"] / t["tbps"]
    del gu, of, ot, g, u

    # RoPE: q (1, T, 32, 128) in place, NeoX, cos/sin (T, 64) float32
    q = torch.randn(1, T, 32, 128, device=dev, dtype=torch.bfloat16)
    ang = torch.arange(T, device=dev, dtype=torch.float64)[:, None] * (10000.0 ** (-torch.arange(0, 128, 2, device=dev, dtype=torch.float64) / 128))
    cos, sin = ang.cos().float(), ang.sin().float()
    qf = flashc.apply_rotary_emb(q, cos, sin)
    qt = rope_torch(q.clone(), cos, sin)
    err = ((qf.float() - qt.float()).abs() / (1 + qt.float().abs())).max().item()
    assert err < 2e-2, f"rope differs: {err}"
    nb = 2 * q.numel() * 2
    qw = q.clone()
    f = row("rope", "flashc (in place)", timed(lambda: flashc.apply_rotary_emb(qw, cos, sin, inplace=True), a.calls, a.reps), nb,
            f"max_err vs torch {err:.2e}")
    t = row("rope", "torch eager", timed(lambda: rope_torch(qw, cos, sin), a.calls, a.reps), nb)
    f["vs_torch"] = f["tbps"] / t["tbps"]

    for r in rows:
        r["of_copy"] = r["tbps"] / cp["tbps"]
    print("\n| op | impl | us | TB/s | of copy | vs torch |")
    print("|---|---|--:|--:|--:|--:|")
    for r in rows:
        vs = f"{r['vs_torch']:.2f}x" if "vs_torch" in r else ""
        print(f"| {r['op']} | {r['impl']} | {r['ms'] * 1e3:.1f} | {r['tbps']:.2f} | {100 * r['of_copy']:.0f}% | {vs} |")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "T": T, "D": D, "I": I, "rows": rows}, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
