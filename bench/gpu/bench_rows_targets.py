#!/usr/bin/env python3
"""Issue 14's four targets in one process, beside their same-run peers (helper rows7):

  RMSNorm forward  bf16 T x D   flashc_rmsnorm (default)      >= 3.9 TB/s and >= 1.2x F.rms_norm
  RMSNorm backward              flashc_rmsnorm_bwd (default)  >= 3.4 TB/s   (torch autograd shown)
  SwiGLU forward   T x 2I -> I  flashc_swiglu                 >= 90% of the copy of its bytes
  RoPE in place    q (1, T, 32, 128), k (1, T, 8, 128) bf16, cos/sin (T, 64) float32, GPT-NeoX
                   and GPT-J: the default and the FLASHC_CUDA_ROPE (v2:U,H,L, v3:M,H,L) settings of --rope
                                                               >= 85% of the copy of its bytes

Bytes are each op's least traffic: RMSNorm x read + y written + w read; backward x, dy read, dx
written, w read, dw written; SwiGLU gate|up read, out written; RoPE q and k read and written in
place, cos and sin read once. "copy" = torch's dst.copy_(src) of half those bytes (a cudaMemcpy
device to device: read + written = the op's bytes), so "of copy" is the copy's time over the
op's. Timing: CUDA events around a batch of --calls back-to-back calls (ctypes straight into
libflashc, no tensor allocation a call); every row once a round, in turn, --reps rounds after a
warm-up round; the median of the rounds. Every flashc row is checked against torch first.

--cjson FILE adds `flashc bench --device cuda --calls N --format json`'s figures (same
machine, the project's own tool) to the closing table of the targets.

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/gpu/bench_rows_targets.py \
      --cjson cbench.json --out targets.json
"""

import argparse
import ctypes
import json
import sys

import torch
import torch.nn.functional as F

from flashc import _arrays, _lib

from rows_bench_common import Rounds, relerr, setvar, sync

# RoPE settings (FLASHC_CUDA_ROPE, rope.cu rope_env). v2:U,H,L: U heads a thread; H 0 .cs hints,
# 1 plain ld / st, 2 ld.nc / plain st; L PDL. v3:M,H,L (rope_v3, a block on a few tokens): M rows
# a thread, H and L as v2's; "v3" = v3:5,0,0. None = unset (the default, v2:1,0,0).
ROPE = [None, "v2:4,2,1", "v3", "v3:2,0,0", "v3:4,0,0", "v3:8,0,0", "v3:5,2,0", "v3:5,0,1"]


def rope_ref(x, cos, sin, gptj):
    """flash-attn's rotary formula in float32 (x (B, S, H, D), cos/sin (S, rd/2))."""
    h = cos.shape[-1]
    c, s = cos[None, :, None, :], sin[None, :, None, :]
    y = x.float().clone()
    if gptj:
        x0, x1 = y[..., 0:2 * h:2].clone(), y[..., 1:2 * h:2].clone()
        y[..., 0:2 * h:2], y[..., 1:2 * h:2] = x0 * c - x1 * s, x1 * c + x0 * s
    else:
        x0, x1 = y[..., :h].clone(), y[..., h:2 * h].clone()
        y[..., :h], y[..., h:2 * h] = x0 * c - x1 * s, x1 * c + x0 * s
    return y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--inter", type=int, default=4096)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rope", default=None, help="RoPE settings, ';'-separated ('-': unset)")
    ap.add_argument("--cjson", default=None, help="flashc bench --device cuda --calls N --format json output")
    ap.add_argument("--out", default=None)
    ap.add_argument("--device", default="cuda", help="cpu: a dry run of the script on the host (small shapes)")
    a = ap.parse_args()
    rope_list = ROPE if a.rope is None else [None if v.strip() in ("-", "") else v.strip() for v in a.rope.split(";")]
    torch.manual_seed(0)
    lib = _lib.library()
    dev, bf = a.device, torch.bfloat16
    cuda = dev == "cuda"
    T, D, I = a.tokens, a.hidden, a.inter
    eps = 1e-6
    fe = ctypes.c_float(eps)
    R = Rounds(a.calls, a.reps, cuda, env_name="FLASHC_CUDA_ROPE")
    failed = []

    def copy_row(key, nbytes):
        n = nbytes // 2 // 2  # bf16 elements of the source: half the bytes read, half written
        src = torch.randn(n, device=dev, dtype=bf)
        dst = torch.empty_like(src)
        R.add(key, lambda: dst.copy_(src), 2 * n * 2)

    # RMSNorm forward and backward
    x = torch.randn(T, D, device=dev, dtype=bf)
    w = torch.rand(D, device=dev, dtype=bf) + 0.5
    dy = torch.randn(T, D, device=dev, dtype=bf)
    y, dx, dw = torch.empty_like(x), torch.empty_like(x), torch.empty_like(w)
    vx, vw, vy, vdy, vdx, vdw = (_arrays.view(n, t) for n, t in
                                 (("x", x), ("w", w), ("y", y), ("dy", dy), ("dx", dx), ("dw", dw)))
    nb_f = 2 * T * D * 2 + D * 2
    nb_b = 3 * T * D * 2 + 2 * D * 2
    yt = F.rms_norm(x, (D,), w, eps=eps)
    _lib.check(lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref))
    sync(cuda)
    e = relerr(y, yt)
    if e < 2e-2:
        R.add("rms_fwd", lambda: lib.flashc_rmsnorm(vx.ref, vw.ref, fe, vy.ref), nb_f, note=f"err {e:.1e}")
    else:
        failed.append(f"rmsnorm forward: max_err vs torch {e}")
    R.add("rms_fwd_torch", lambda: F.rms_norm(x, (D,), w, eps=eps), nb_f)
    copy_row("copy_rms_fwd", nb_f)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    yg = F.rms_norm(xg, (D,), wg, eps=eps)
    dxt, dwt = torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True)
    _lib.check(lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref))
    sync(cuda)
    ex, ew = relerr(dx, dxt), relerr(dw, dwt)
    if ex < 5e-2 and ew < 5e-2:
        R.add("rms_bwd", lambda: lib.flashc_rmsnorm_bwd(vx.ref, vw.ref, vdy.ref, None, fe, vdx.ref, vdw.ref), nb_b,
              note=f"err dx {ex:.1e} dw {ew:.1e}")
    else:
        failed.append(f"rmsnorm backward: max_err vs torch dx {ex} dw {ew}")
    R.add("rms_bwd_torch", lambda: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True), nb_b)
    copy_row("copy_rms_bwd", nb_b)

    # SwiGLU forward
    gu = torch.randn(T, 2 * I, device=dev, dtype=bf) * 2
    out = torch.empty(T, I, device=dev, dtype=bf)
    vgu, vout = _arrays.view("gu", gu), _arrays.view("out", out)
    nb_s = 3 * T * I * 2
    _lib.check(lib.flashc_swiglu(vgu.ref, vout.ref))
    sync(cuda)
    g, u = gu.chunk(2, -1)
    e = relerr(out, F.silu(g.float()) * u.float())
    if e < 2e-2:
        R.add("swiglu", lambda: lib.flashc_swiglu(vgu.ref, vout.ref), nb_s, note=f"err {e:.1e}")
    else:
        failed.append(f"swiglu: max_err vs torch {e}")
    R.add("swiglu_torch", lambda: F.silu(g) * u, nb_s)
    copy_row("copy_swiglu", nb_s)

    # RoPE, in place on q and k, both styles, every setting
    Hq, Hk, Dh = 32, 8, 128
    q = torch.randn(1, T, Hq, Dh, device=dev, dtype=bf)
    k = torch.randn(1, T, Hk, Dh, device=dev, dtype=bf)
    ang = torch.arange(T, device=dev, dtype=torch.float64)[:, None] * (
        500000.0 ** (-torch.arange(0, Dh, 2, device=dev, dtype=torch.float64) / Dh))
    cos, sin = ang.cos().float().contiguous(), ang.sin().float().contiguous()
    vq, vk, vc, vs = (_arrays.view(n, t) for n, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin)))
    nb_r = 2 * (q.numel() + k.numel()) * 2 + 2 * cos.numel() * 4
    params = {}
    for gptj in (0, 1):
        p = _lib.new_rope_params()
        p.style = _lib.ROPE_GPTJ if gptj else _lib.ROPE_NEOX
        p.rotary_dim = Dh
        params[gptj] = p
    q0, k0 = q.clone(), k.clone()
    want = {gj: (rope_ref(q0, cos, sin, gj), rope_ref(k0, cos, sin, gj)) for gj in (0, 1)}
    for v in rope_list:
        for gptj in (0, 1):
            style = "gptj" if gptj else "neox"
            key = f"rope_{style}_{v or 'default'}"
            setvar("FLASHC_CUDA_ROPE", v)
            q.copy_(q0), k.copy_(k0)
            try:
                _lib.check(lib.flashc_rope(ctypes.byref(params[gptj]), vq.ref, vk.ref, vc.ref, vs.ref))
                sync(cuda)
                e = max(relerr(q, want[gptj][0]), relerr(k, want[gptj][1]))
                if not e < 2e-2:
                    raise RuntimeError(f"max_err vs the formula {e}")
            except Exception as ex_:  # report, time the others
                failed.append(f"{key}: {ex_}")
                continue
            pp = params[gptj]
            R.add(key, lambda pp=pp: lib.flashc_rope(ctypes.byref(pp), vq.ref, vk.ref, vc.ref, vs.ref), nb_r,
                  env=v, note=f"err {e:.1e}")
    setvar("FLASHC_CUDA_ROPE", None)
    copy_row("copy_rope", nb_r)

    res = R.run()
    dev_name = torch.cuda.get_device_name() if cuda else "host CPU (dry run)"
    print(f"\nrows7 targets bench, {dev_name}, torch {torch.__version__}: CUDA events around {a.calls} calls, "
          f"median of {a.reps} interleaved rounds")
    for f_ in failed:
        print(f"FAILED: {f_}")
    print("| row | us | min us | TB/s | of copy (same bytes) | vs torch | note |")
    print("|---|--:|--:|--:|--:|--:|---|")
    copy_of = {"rms_fwd": "copy_rms_fwd", "rms_fwd_torch": "copy_rms_fwd", "rms_bwd": "copy_rms_bwd",
               "rms_bwd_torch": "copy_rms_bwd", "swiglu": "copy_swiglu", "swiglu_torch": "copy_swiglu"}
    peer = {"rms_fwd": "rms_fwd_torch", "rms_bwd": "rms_bwd_torch", "swiglu": "swiglu_torch"}
    for key, r in res.items():
        cp = res.get(copy_of.get(key, "copy_rope" if key.startswith("rope_") else ""))
        r["of_copy"] = r["tbps"] / cp["tbps"] if cp and not key.startswith("copy") else None
        pr = res.get(peer.get(key, ""))
        r["vs_torch"] = r["tbps"] / pr["tbps"] if pr else None
        oc = f"{100 * r['of_copy']:.1f}%" if r["of_copy"] else ""
        vt = f"{r['vs_torch']:.3f}x" if r["vs_torch"] else ""
        print(f"| {key} | {r['ms'] * 1e3:.1f} | {r['min_ms'] * 1e3:.1f} | {r['tbps']:.3f} | {oc} | {vt} | {r['note']} |")

    # the closing table: the four targets, this process and (--cjson) the C bench
    cb = {}
    if a.cjson:
        try:
            with open(a.cjson) as fh:
                for x_ in json.load(fh)["results"]:
                    if "error" in x_:
                        continue
                    name = x_["op"] + ("_gptj" if "gptj" in x_["shape"] else "_neox" if x_["op"] == "rope" else "")
                    if x_["impl"] == "fused":
                        cb[name] = x_
        except (OSError, ValueError, KeyError) as ex_:
            print(f"C bench json not read: {ex_}")

    def mark(ok):
        return "**met**" if ok else "NOT MET"

    def fmt_c(name, what):
        x_ = cb.get(name)
        if not x_:
            return "-"
        return f"{x_['gbps'] / 1e3:.3f} TB/s" if what == "tbps" else f"{100 * x_.get('of_copy', 0):.1f}%"

    print("\nIssue 14's targets, bf16, this run: this process (py) and flashc bench --device cuda --calls (C)")
    print("| target | py | C | met (py) | met (C) |")
    print("|---|--:|--:|---|---|")
    rf, rb, sw = res.get("rms_fwd"), res.get("rms_bwd"), res.get("swiglu")
    if rf:
        print(f"| RMSNorm {T}x{D} fwd >= 3.9 TB/s | {rf['tbps']:.3f} | {fmt_c('rmsnorm', 'tbps')} | "
              f"{mark(rf['tbps'] >= 3.9)} | {mark(cb['rmsnorm']['gbps'] >= 3900) if 'rmsnorm' in cb else '-'} |")
        print(f"| RMSNorm fwd >= 1.2x F.rms_norm | {rf['vs_torch']:.3f}x | - | {mark(rf['vs_torch'] >= 1.2)} | - |")
    if rb:
        print(f"| RMSNorm bwd >= 3.4 TB/s | {rb['tbps']:.3f} | {fmt_c('rmsnorm_bwd', 'tbps')} | "
              f"{mark(rb['tbps'] >= 3.4)} | {mark(cb['rmsnorm_bwd']['gbps'] >= 3400) if 'rmsnorm_bwd' in cb else '-'} |")
    if sw:
        cs_ = cb.get("swiglu", {}).get("of_copy")
        print(f"| SwiGLU >= 90% of copy | {100 * sw['of_copy']:.1f}% | {fmt_c('swiglu', 'of')} | "
              f"{mark(sw['of_copy'] >= 0.90)} | {mark(cs_ >= 0.90) if cs_ else '-'} |")
    for style in ("neox", "gptj"):
        d_ = res.get(f"rope_{style}_default")
        cs_ = cb.get(f"rope_{style}", {}).get("of_copy")
        if d_:
            print(f"| RoPE {style} >= 85% of copy (default) | {100 * d_['of_copy']:.1f}% | {fmt_c('rope_' + style, 'of')} | "
                  f"{mark(d_['of_copy'] >= 0.85)} | {mark(cs_ >= 0.85) if cs_ else '-'} |")
        best = max((r for kk, r in res.items() if kk.startswith(f"rope_{style}_") and not kk.endswith("_default")),
                   key=lambda r: r["tbps"], default=None)
        if best:
            bk = [kk for kk, r in res.items() if r is best][0]
            print(f"| RoPE {style}, best setting: {bk.split('_', 2)[2]} | {100 * best['of_copy']:.1f}% | - | "
                  f"{mark(best['of_copy'] >= 0.85)} | - |")
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": dev_name, "torch": torch.__version__, "T": T, "D": D, "I": I, "calls": a.calls,
                       "reps": a.reps, "rows": res, "failed": failed, "cbench": cb}, fh, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
