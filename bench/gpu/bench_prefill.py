#!/usr/bin/env python3
"""Prefill with masks / ragged batches on CUDA: flashc's prefill kernel (the sm80 mods instance,
attn_fwd_sm80.cu; the default route) against its old route (FLASHC_CUDA_PREFILL_MODS=0: the
KV-cache kernel of attn_decode.cu) and against PyTorch SDPA where it can do the same work,
bf16, d 128, Hq 32 / Hkv 8 (GQA 4), on the same torch-allocated inputs.

Cases:
  varlen   8 causal sequences of ragged lengths (16,384 tokens in all) through
           flashc_attn_varlen_fwd. SDPA has no varlen entry: its peer is a loop of one causal
           SDPA call per sequence (flash and cuDNN backends), labelled "loop"; it does the same
           work plus per-call launch overhead.
  window   dense causal B = 1, S = 8192 with a sliding window of 1024 keys (window_left = 1024)
           through flashc_attn_fwd. SDPA's flash and cuDNN backends take no window: the peers
           are SDPA mem-efficient with the window as an explicit boolean mask (same result, it
           reads the mask), and SDPA flash on the full causal problem (more work: its TFLOP/s
           count its own unmasked work).
  dkdv     dense causal B = 1, S = 8192, 16 heads, q/k head dim 192, v/o 128 (MLA-style
           prefill) through flashc_attn_fwd: the prefill kernel's instance of max(D, Dv) = 192
           against the old route and every SDPA backend that takes Dk != Dv. TFLOP/s here count
           2 * H * (D + Dv) per pair.

--set mods (issue 11, helper fwd21): dense masks and modifiers on the sm90 kernel's mods instances
(FLASHC_CUDA_SM90_MODS=force, attn_fwd_sm90.cu) against the sm80 mods instance (=0, today's route)
and SDPA where it can do the same work, bf16, Hq 32 / Hkv 8, B = 16384 / S, at d 128 and 64
(--dims: 192 and 256 too, whose sm90 instances take 80- / 64-key blocks), S 2048 and 8192,
causal, three modifiers:
  window   window_left = 1024 (Mistral's sliding window, bottom-right): SDPA cuDNN and
           mem-efficient with the window as a boolean mask (K/V expanded to 32 heads outside the
           timing; a backend that refuses the mask is reported so);
  softcap  30 (Gemma 2): no SDPA backend caps scores; sm90 against sm80 only;
  alibi    slopes 2^(-8 (h + 1) / 32): SDPA cuDNN and mem-efficient with the bias (and the
           causal mask) as a bf16 mask (timed; not a reference: the bias rounded to bf16 moves
           far keys' weights by up to e^0.25, so the two flashc routes are checked against each
           other).
Each cell also times SDPA cuDNN on the plain causal problem (no modifier; "plain cuDNN", the
ceiling the modified kernels are read against, not a peer doing the same work). Each flashc
route is checked against SDPA's output (softcap: against the other route) and must report its
kernel's tiles (sm90 mods: 128 x 128; sm80: 128 x 64 at d 128, 128 x 128 at d 64, where the
sm90 route is told apart by FLASHC_CUDA_SM90_MODS=force: a problem it does not take is refused).
At d 128 the sm90 alternatives (FLASHC_CUDA_SM90_MODS=v6, v9, v9np; the default there is v6
without ping-pong at bf16) are timed too; the table's "best sm90" is the fastest of the four.

--set varlen (issue 11, helper fwd22): varlen on the sm90 kernel (FLASHC_CUDA_SM90_VARLEN=force: the
sm90vl instances, v6d's kernel over the packed rows, attn_fwd_sm90.cu) against the sm80 mods
instance (=0, today's route), bf16, Hq 32 / Hkv 8, 16 sequences of ragged lengths 512-4096
(VL_LENS, 35,008 tokens), self-attention (Sq = Sk per sequence), cells d 128 causal, d 64 causal,
d 128 without the mask. Peers: SDPA cuDNN on the batch padded to 16 x 4096 (the padded rows and
keys computed too: its TFLOP/s count the ragged problem's pairs, as flashc's; causal top-left on
a padded square sequence is the ragged problem's mask for the valid rows), and a loop of one
SDPA cuDNN call per sequence. Each flashc route is checked against the loop's output.

TFLOP/s = 4 * Hq * d * (unmasked (row, key) pairs) / time: only the scores a row may see count.
Times are medians of triton.testing.do_bench (CUDA events, L2 flushed, warm-up first). Each
flashc route is checked against the loop / masked SDPA output before it is timed, and the
kernel that ran is read from flashc_attn_stats (block_q 128: prefill kernel, 16: KV-cache).
The environment variable is read by the library on every call, so both routes run in one
process.

usage: bench_prefill.py --lib build/libflashc.so [--set prefill|mods|varlen] [--dims 128,64]
                        [--out prefill.json]
                        [--rep-ms 60]
"""
import argparse
import ctypes
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import triton.testing

FLASHC_F16, FLASHC_BF16, FLASHC_I32 = 1, 2, 3
FLASHC_DEVICE_CUDA = 1
HQ, HKV, D = 32, 8, 128
LENS = [4096, 512, 3001, 1024, 2500, 777, 2048, 2426]  # 16,384 tokens
S_WIN, WINDOW = 8192, 1024
S_DKDV, H_DKDV, D_QK, D_V = 8192, 16, 192, 128  # the dkdv case (MHA, as MLA's prefill)


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("device", ctypes.c_int),
                ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 4),
                ("stride", ctypes.c_int64 * 4)]


class Params(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("has_softmax_scale", ctypes.c_int),
                ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int),
                ("window_left", ctypes.c_int64), ("window_right", ctypes.c_int64),
                ("softcap", ctypes.c_float), ("alibi_slopes", ctypes.c_void_p),
                ("block_q", ctypes.c_int64), ("block_k", ctypes.c_int64),
                ("num_threads", ctypes.c_int), ("num_splits", ctypes.c_int),
                ("deterministic", ctypes.c_int), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t), ("cuda_stream", ctypes.c_void_p)]


class Varlen(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("cu_seqlens_q", ctypes.c_void_p),
                ("cu_seqlens_k", ctypes.c_void_p), ("max_seqlen_q", ctypes.c_int64),
                ("max_seqlen_k", ctypes.c_int64)]


class Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("tile_pairs", ctypes.c_int64),
                ("tile_pairs_total", ctypes.c_int64), ("block_q", ctypes.c_int64),
                ("block_k", ctypes.c_int64), ("num_splits", ctypes.c_int64),
                ("workspace_bytes", ctypes.c_int64)]


def view(t):
    dt = {torch.bfloat16: FLASHC_BF16, torch.float16: FLASHC_F16, torch.float32: 0,
          torch.int32: FLASHC_I32}[t.dtype]
    v = Tensor(t.data_ptr(), dt, FLASHC_DEVICE_CUDA, t.dim())
    for i in range(t.dim()):
        v.shape[i], v.stride[i] = t.shape[i], t.stride(i)
    return v


def params(causal, window_left=-1):
    p = Params()
    p.struct_size = ctypes.sizeof(Params)
    p.window_left, p.window_right = window_left, -1
    p.causal = int(causal)
    p.cuda_stream = torch.cuda.current_stream().cuda_stream
    return p


def call(lib, name, args, keep):
    """A closure launching lib.name(*args) (views built once, kept alive in keep); it raises on
    a non-OK status and leaves the stats in keep['stats']."""
    fn = getattr(lib, name)
    stats = Stats()
    stats.struct_size = ctypes.sizeof(Stats)
    keep["stats"] = stats
    refs = [ctypes.byref(a) for a in args] + [ctypes.byref(stats)]

    def run():
        st = fn(*refs)
        if st != 0:
            raise RuntimeError(f"{name}: {st}: {lib.flashc_last_error().decode()}")
    return run


def setenv(env):
    """Sets the library's routing variables (read on every call): None unsets one."""
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


# the prefill set's two routes: the prefill kernel (default), the old KV-cache route
PREFILL_ROUTES = (("flashc prefill kernel", {"FLASHC_CUDA_PREFILL_MODS": None}, None),
                  ("flashc old route (KV-cache)", {"FLASHC_CUDA_PREFILL_MODS": "0"}, None))


def bench(fn, rep_ms):
    return triton.testing.do_bench(fn, warmup=max(10, rep_ms // 4), rep=rep_ms,
                                   return_mode="median")


def time_routes(rows, case, run, o, keep, ref, flop, rep_ms, routes=PREFILL_ROUTES):
    """The flashc routes of one case (name, environment, the (block_q, block_k) it must report
    or None), by default the prefill kernel, then the old KV-cache route: each checked against
    ref (SDPA's output; None: against the first route's, or for finite values alone) before it
    is timed; rows gain (case, variant, ms, TFLOP/s, note)."""
    first = None
    for name, env, tiles in routes:
        setenv(env)
        o.fill_(float("nan"))
        try:
            run()
            torch.cuda.synchronize()
        except RuntimeError as ex:
            rows.append((case, name, None, None, f"error: {str(ex)[:70]}"))
            continue
        st = keep["stats"]
        note = f"block_q {st.block_q}" if tiles is None else f"tiles {st.block_q}x{st.block_k}"
        if tiles is not None and (st.block_q, st.block_k) != tiles:
            rows.append((case, name, None, None, f"WRONG KERNEL: {note}, want {tiles}"))
            continue
        against, what = (ref, "SDPA") if ref is not None else (first, "the other route")
        if against is not None:
            err = (o.float() - against.float()).abs().max().item()
            note += f", max |o - {what}| {err:.3g}"
            if not err < 0.05:
                rows.append((case, name, None, None, "WRONG: " + note))
                continue
        elif not torch.isfinite(o).all():
            rows.append((case, name, None, None, "WRONG: non-finite output"))
            continue
        if first is None:
            first = o.clone()
        ms = bench(run, rep_ms)
        rows.append((case, name, ms, flop / ms / 1e9, note))
    for env in (e for _, e, _ in routes):
        setenv({k: None for k in env})


# ---- --set mods: dense masks and modifiers, sm90 mods instances vs sm80 vs SDPA -------------
MODS_TOKENS, MODS_WINDOW, MODS_SOFTCAP = 16384, 1024, 30.0


def mods_routes(d):
    """The sm90 mods instance (forced: a problem it does not take is refused, not run on sm80),
    at d 128 also its alternatives (v6 with ping-pong, the default before 2026-12-04 evening
    when bf16 d 128 went to v6 without it; v9, v9 without ping-pong; bf16 d 128 only), then the
    sm80 mods instance, each with the tiles it must report."""
    alts = ("v6", "v9", "v9np") if d == 128 else ()
    bn = 80 if d > 128 and d <= 192 else 64 if d > 192 else 128  # the instance's key block
    return ((("flashc sm90 mods", {"FLASHC_CUDA_SM90_MODS": "force"}, (128, bn)),) +
            tuple((f"flashc sm90 mods {a}", {"FLASHC_CUDA_SM90_MODS": a}, (128, 128))
                  for a in alts) +
            (("flashc sm80 mods", {"FLASHC_CUDA_SM90_MODS": "0"}, (128, 128) if d <= 64
              else (128, 64) if d <= 128 else None),))


def mods_set(lib, rows, rep_ms, dims=(128, 64)):
    """The mods cells (module docstring); rows' case names are 'MOD d D S S'."""
    dev = torch.device("cuda")
    for d in dims:
        for S in (2048, 8192):
            B = MODS_TOKENS // S
            q = torch.randn(B, S, HQ, d, device=dev, dtype=torch.bfloat16)
            k = torch.randn(B, S, HKV, d, device=dev, dtype=torch.bfloat16)
            v = torch.randn(B, S, HKV, d, device=dev, dtype=torch.bfloat16)
            o = torch.empty_like(q)
            lse = torch.empty(B, HQ, S, device=dev, dtype=torch.float32)
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
            i = torch.arange(S, device=dev)
            causal = i[None, :] <= i[:, None]
            pairs_c = B * S * (S + 1) // 2
            tag = f"d {d} S {S}"
            # the ceiling: SDPA cuDNN on the plain causal problem
            try:
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    fn = lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=True,  # noqa
                                                                enable_gqa=True)
                    fn()
                    ms = bench(fn, rep_ms)
                rows.append((f"plain {tag}", "SDPA cuDNN, plain causal", ms,
                             4.0 * HQ * d * pairs_c / ms / 1e9, "no modifier"))
            except Exception as ex:
                rows.append((f"plain {tag}", "SDPA cuDNN, plain causal", None, None,
                             f"refused: {str(ex)[:60]}"))
            kx, vx = (x.repeat_interleave(HQ // HKV, dim=1) for x in (kt, vt))
            slopes = torch.tensor([2.0 ** (-8.0 * (h + 1) / HQ) for h in range(HQ)],
                                  device=dev, dtype=torch.float32)
            sl = slopes.expand(B, HQ).contiguous()
            for mod in ("window", "softcap", "alibi"):
                p = params(True, MODS_WINDOW if mod == "window" else -1)
                if mod == "softcap":
                    p.softcap = MODS_SOFTCAP
                args = [p, view(q), view(k), view(v), view(o), view(lse)]
                if mod == "alibi":
                    sv = view(sl)
                    p.alibi_slopes = ctypes.addressof(sv)
                    args.append(sv)  # kept alive with the closure's views
                keep = {}
                run = call(lib, "flashc_attn_fwd", args[:6], keep)
                pairs = (B * sum(min(r + 1, MODS_WINDOW + 1) for r in range(S))
                         if mod == "window" else pairs_c)
                flop = 4.0 * HQ * d * pairs
                case = f"{mod} {tag}"
                ref, mask = None, None
                if mod == "window":
                    mask = causal & (i[None, :] >= i[:, None] - MODS_WINDOW)
                elif mod == "alibi":
                    dist = (i[:, None] - i[None, :]).abs().to(torch.float32)
                    mask = (-slopes[:, None, None] * dist[None]).masked_fill(
                        ~causal[None], float("-inf")).to(torch.bfloat16)[None]
                    del dist
                fn = lambda: F.scaled_dot_product_attention(qt, kx, vx, attn_mask=mask)  # noqa
                # mem-efficient first: its window output is the reference
                for be, name in ((SDPBackend.EFFICIENT_ATTENTION, "SDPA mem-efficient, mask"),
                                 (SDPBackend.CUDNN_ATTENTION, "SDPA cuDNN, mask")):
                    if mask is None:
                        break
                    try:
                        with sdpa_kernel([be]):
                            out = fn().transpose(1, 2)
                            # the ALiBi bias in bf16 is off by up to 2^-8 of slope x distance
                            # (e.g. 0.25 at 32): not a reference; the routes are compared
                            if mod == "window" and ref is None:
                                ref = out
                            torch.cuda.synchronize()
                            ms = bench(fn, rep_ms)
                        rows.append((case, name, ms, flop / ms / 1e9, "K/V expanded to 32 heads"))
                    except Exception as ex:
                        rows.append((case, name, None, None, f"refused: {str(ex)[:60]}"))
                time_routes(rows, case, run, o, keep, ref, flop, rep_ms, mods_routes(d))
                del ref, mask
            del q, k, v, o, lse, qt, kt, vt, kx, vx
            torch.cuda.empty_cache()


def mods_table(rows):
    """The decision table of --set mods: per cell, the sm90 mods instance (the default: "dflt") and the fastest
    of its alternatives against sm80 (TFLOP/s and time ratios), the SDPA peer doing the same
    work and the plain cuDNN ceiling."""
    ms = {(c, n.split(",")[0]): m for c, n, m, _, _ in rows if m}
    tf = {(c, n.split(",")[0]): t for c, n, m, t, _ in rows if m}

    def flop_of(c, m):  # TFLOP/s of the row of case c that took m ms
        return next((t for (cc, n), t in tf.items() if cc == c and ms.get((cc, n)) == m), None)
    f = lambda x: f"{x:7.1f}" if x else f"{'-':>7}"  # noqa: E731
    r = lambda a, b: f"{b / a:7.3f}" if a and b else f"{'-':>7}"  # noqa: E731
    print(f"\n{'cell':22} {'sm90':>7} {'best sm90':>14} {'sm80':>7} {'90/80':>7} {'best/80':>7} "
          f"{'SDPA':>7} {'90/SDPA':>7} {'cuDNN0':>7}   (TFLOP/s; ratios of time)")
    for c in dict.fromkeys(c for c, *_ in rows):
        if c.startswith("plain"):
            continue
        s9, s8 = ms.get((c, "flashc sm90 mods")), ms.get((c, "flashc sm80 mods"))
        alts = [(m, n[len("flashc sm90 mods "):] or "dflt") for (cc, n), m in ms.items()
                if cc == c and n.startswith("flashc sm90 mods")]
        best = min(alts) if alts else (None, "-")
        sd = min((m for (cc, n), m in ms.items() if cc == c and n.startswith("SDPA")),
                 default=None)  # the fastest SDPA backend doing the same work
        plain = tf.get(("plain " + c.split(" ", 1)[1], "SDPA cuDNN"))
        best_name = "flashc sm90 mods" + ("" if best[1] == "dflt" else " " + best[1])
        best_tf = f"{best[1]} {tf.get((c, best_name), 0):.1f}" if best[0] else "-"
        print(f"{c:22} {f(tf.get((c, 'flashc sm90 mods')))} {best_tf:>14} "
              f"{f(tf.get((c, 'flashc sm80 mods')))} {r(s9, s8)} {r(best[0], s8)} "
              f"{f(flop_of(c, sd))} {r(s9, sd)} {f(plain)}")


# ---- --set varlen: ragged batches, the sm90vl instances vs sm80 vs SDPA ---------------------
VL_LENS = [4096, 512, 3001, 1024, 2500, 777, 2048, 2426, 3500, 640, 1800, 3900, 1333, 2900, 600,
           3951]  # 16 sequences, 512-4096


def varlen_routes(d):
    """The sm90vl instance (forced: a problem it does not take is refused, not run on sm80), then
    the sm80 mods instance, each with the tiles it must report."""
    return (("flashc sm90 varlen", {"FLASHC_CUDA_SM90_VARLEN": "force"}, (128, 128)),
            ("flashc sm80 mods", {"FLASHC_CUDA_SM90_VARLEN": "0"},
             (128, 128) if d <= 64 else (128, 64)))


def varlen_set(lib, rows, rep_ms):
    """The varlen cells (module docstring); rows' case names are 'varlen d D causal|full'."""
    dev = torch.device("cuda")
    total, B, smax = sum(VL_LENS), len(VL_LENS), max(VL_LENS)
    cu_h = [0]
    for n in VL_LENS:
        cu_h.append(cu_h[-1] + n)
    bounds = list(zip(cu_h[:-1], cu_h[1:]))
    cu = torch.tensor(cu_h, device=dev, dtype=torch.int32)
    for d, causal in ((128, True), (64, True), (128, False)):
        q = torch.randn(total, HQ, d, device=dev, dtype=torch.bfloat16)
        k = torch.randn(total, HKV, d, device=dev, dtype=torch.bfloat16)
        v = torch.randn(total, HKV, d, device=dev, dtype=torch.bfloat16)
        o = torch.empty_like(q)
        lse = torch.empty(HQ, total, device=dev, dtype=torch.float32)
        pairs = sum(n * (n + 1) // 2 if causal else n * n for n in VL_LENS)
        flop = 4.0 * HQ * d * pairs
        case = f"varlen d {d} {'causal' if causal else 'full'}"

        def loop():
            return [F.scaled_dot_product_attention(q[a:e].transpose(0, 1).unsqueeze(0),
                                                   k[a:e].transpose(0, 1).unsqueeze(0),
                                                   v[a:e].transpose(0, 1).unsqueeze(0),
                                                   is_causal=causal, enable_gqa=True)
                    for a, e in bounds]
        ref = None
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                ref = torch.cat([x.squeeze(0).transpose(0, 1) for x in loop()], 0)
                torch.cuda.synchronize()
                ms = bench(loop, rep_ms)
            rows.append((case, "SDPA cuDNN, loop per sequence", ms, flop / ms / 1e9,
                         f"{B} calls"))
        except Exception as ex:
            rows.append((case, "SDPA cuDNN, loop per sequence", None, None,
                         f"refused: {str(ex)[:60]}"))
        # the batch padded to B x smax (zeros past each sequence), outside the timing
        qp = torch.zeros(B, smax, HQ, d, device=dev, dtype=torch.bfloat16)
        kp = torch.zeros(B, smax, HKV, d, device=dev, dtype=torch.bfloat16)
        vp = torch.zeros(B, smax, HKV, d, device=dev, dtype=torch.bfloat16)
        for b, (a, e) in enumerate(bounds):
            qp[b, :e - a], kp[b, :e - a], vp[b, :e - a] = q[a:e], k[a:e], v[a:e]
        qt, kt, vt = (x.transpose(1, 2) for x in (qp, kp, vp))
        kx, vx = (x.repeat_interleave(HQ // HKV, dim=1) for x in (kt, vt))

        def padded():
            return F.scaled_dot_product_attention(qt, kx, vx, is_causal=causal)
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                out = padded().transpose(1, 2)
                err = max((out[b, :e - a].float() - ref[a:e].float()).abs().max().item()
                          for b, (a, e) in enumerate(bounds)) if ref is not None else 0.0
                ms = bench(padded, rep_ms)
            rows.append((case, "SDPA cuDNN, padded batch", ms, flop / ms / 1e9,
                         f"{B} x {smax}, K/V expanded, max |o - loop| {err:.3g}"))
            del out
        except Exception as ex:
            rows.append((case, "SDPA cuDNN, padded batch", None, None,
                         f"refused: {str(ex)[:60]}"))
        del qp, kp, vp, qt, kt, vt, kx, vx
        keep = {}
        cq, ck = view(cu), view(cu)
        vl = Varlen(ctypes.sizeof(Varlen), ctypes.addressof(cq), ctypes.addressof(ck), smax,
                    smax)
        run = call(lib, "flashc_attn_varlen_fwd",
                   [params(causal), vl, view(q), view(k), view(v), view(o), view(lse)], keep)
        keep["views"] = (cq, ck)
        time_routes(rows, case, run, o, keep, ref, flop, rep_ms, varlen_routes(d))
        del q, k, v, o, lse, ref
        torch.cuda.empty_cache()


def varlen_table(rows):
    """The decision table of --set varlen: per cell, sm90 varlen and sm80 (TFLOP/s, the ratio of
    their times) and the fastest SDPA peer."""
    ms = {(c, n.split(",")[0]): m for c, n, m, _, _ in rows if m}
    tf = {(c, n.split(",")[0]): t for c, n, m, t, _ in rows if m}
    f = lambda x: f"{x:7.1f}" if x else f"{'-':>7}"  # noqa: E731
    r = lambda a, b: f"{b / a:7.3f}" if a and b else f"{'-':>7}"  # noqa: E731
    print(f"\n{'cell':22} {'sm90vl':>7} {'sm80':>7} {'vl/80':>7} {'SDPA':>7} {'vl/SDPA':>7}"
          f"   (TFLOP/s of the ragged problem's pairs; ratios of time)")
    for c in dict.fromkeys(c for c, *_ in rows):
        s9, s8 = ms.get((c, "flashc sm90 varlen")), ms.get((c, "flashc sm80 mods"))
        sd = min((m for (cc, n), m in ms.items() if cc == c and n.startswith("SDPA")),
                 default=None)
        sd_tf = next((tf[(cc, n)] for (cc, n), m in ms.items() if cc == c and m == sd), None)
        print(f"{c:22} {f(tf.get((c, 'flashc sm90 varlen')))} {f(tf.get((c, 'flashc sm80 mods')))}"
              f" {r(s9, s8)} {f(sd_tf)} {r(s9, sd)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--rep-ms", type=int, default=60)
    ap.add_argument("--set", choices=("prefill", "mods", "varlen"), default="prefill")
    ap.add_argument("--dims", default="128,64", help="--set mods: head dims (192, 256 too)")
    args = ap.parse_args()
    lib = ctypes.CDLL(args.lib)
    lib.flashc_last_error.restype = ctypes.c_char_p
    torch.manual_seed(0)
    dev = torch.device("cuda")
    rows = []  # (case, variant, ms, TFLOP/s, note)
    if args.set in ("mods", "varlen"):
        if args.set == "mods":
            mods_set(lib, rows, args.rep_ms, tuple(int(x) for x in args.dims.split(",")))
        else:
            varlen_set(lib, rows, args.rep_ms)
        print(f"\n{'case':22} {'variant':30} {'ms':>8} {'TFLOP/s':>8}  note")
        for case, name, ms, tf, note in rows:
            print(f"{case:22} {name:30} {ms if ms else float('nan'):8.3f} "
                  f"{tf if tf else float('nan'):8.1f}  {note}")
        if args.set == "mods":
            mods_table(rows)
            print(f"(bf16, Hq/Hkv {HQ}/{HKV}, B x S = {MODS_TOKENS}, causal; window "
                  f"{MODS_WINDOW}, softcap {MODS_SOFTCAP}; TFLOP/s count unmasked pairs; "
                  f"{torch.cuda.get_device_name()})")
        else:
            varlen_table(rows)
            print(f"(bf16, Hq/Hkv {HQ}/{HKV}, {len(VL_LENS)} sequences of {min(VL_LENS)}-"
                  f"{max(VL_LENS)} rows, {sum(VL_LENS)} in all; TFLOP/s count unmasked pairs; "
                  f"{torch.cuda.get_device_name()})")
        if args.out:
            with open(args.out, "w") as f:
                json.dump([dict(zip(("case", "variant", "ms", "tflops", "note"), r))
                           for r in rows], f, indent=1)
        # a flashc route that failed or was refused (sm90 forced) fails the run too
        return 0 if all(not n.startswith(("WRONG", "error")) for *_, n in rows) else 1

    def flops(pairs):
        return 4.0 * HQ * D * pairs

    # ---- varlen --------------------------------------------------------------------------
    total = sum(LENS)
    q = torch.randn(total, HQ, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(total, HKV, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(total, HKV, D, device=dev, dtype=torch.bfloat16)
    cu_h = [0]
    for s in LENS:
        cu_h.append(cu_h[-1] + s)
    cu = torch.tensor(cu_h, device=dev, dtype=torch.int32)
    pairs = sum(s * (s + 1) // 2 for s in LENS)
    o = torch.empty_like(q)
    lse = torch.empty(HQ, total, device=dev, dtype=torch.float32)
    keep = {}
    cq, ck = view(cu), view(cu)
    vl = Varlen(ctypes.sizeof(Varlen), ctypes.addressof(cq), ctypes.addressof(ck), max(LENS),
                max(LENS))
    p = params(True)
    run_vl = call(lib, "flashc_attn_varlen_fwd", [p, vl, view(q), view(k), view(v), view(o),
                                                   view(lse)], keep)

    def sdpa_loop():
        outs = []
        for a, e in zip(cu_h[:-1], cu_h[1:]):
            qb = q[a:e].transpose(0, 1).unsqueeze(0)
            kb = k[a:e].transpose(0, 1).unsqueeze(0)
            vb = v[a:e].transpose(0, 1).unsqueeze(0)
            outs.append(F.scaled_dot_product_attention(qb, kb, vb, is_causal=True,
                                                       enable_gqa=True))
        return outs

    ref = torch.cat([x.squeeze(0).transpose(0, 1) for x in sdpa_loop()], 0)  # SDPA's choice
    bounds = list(zip(cu_h[:-1], cu_h[1:]))

    def sdpa_loop_fast():  # the same loop with the bounds on the host (no .item() syncs)
        for a, e in bounds:
            F.scaled_dot_product_attention(q[a:e].transpose(0, 1).unsqueeze(0),
                                           k[a:e].transpose(0, 1).unsqueeze(0),
                                           v[a:e].transpose(0, 1).unsqueeze(0),
                                           is_causal=True, enable_gqa=True)

    time_routes(rows, "varlen", run_vl, o, keep, ref, flops(pairs), args.rep_ms)
    for be, name in ((SDPBackend.FLASH_ATTENTION, "SDPA flash, loop per sequence"),
                     (SDPBackend.CUDNN_ATTENTION, "SDPA cuDNN, loop per sequence")):
        try:
            with sdpa_kernel([be]):
                sdpa_loop_fast()
                torch.cuda.synchronize()
                ms = bench(sdpa_loop_fast, args.rep_ms)
            rows.append(("varlen", name, ms, flops(pairs) / ms / 1e9, f"{len(LENS)} calls"))
        except Exception as ex:  # a backend that refuses the shape
            rows.append(("varlen", name, None, None, f"refused: {str(ex)[:60]}"))
    del q, k, v, o, lse, ref

    # ---- dense causal with a sliding window ---------------------------------------------
    S = S_WIN
    q = torch.randn(1, S, HQ, D, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, S, HKV, D, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, S, HKV, D, device=dev, dtype=torch.bfloat16)
    o = torch.empty_like(q)
    lse = torch.empty(1, HQ, S, device=dev, dtype=torch.float32)
    pairs_w = sum(min(i + 1, WINDOW + 1) for i in range(S))
    pairs_c = S * (S + 1) // 2
    keep = {}
    p = params(True, WINDOW)
    run_w = call(lib, "flashc_attn_fwd", [p, view(q), view(k), view(v), view(o), view(lse)], keep)
    i = torch.arange(S, device=dev)
    mask = (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - WINDOW)  # (S, S) keys seen
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    kx, vx = (x.repeat_interleave(HQ // HKV, dim=1) for x in (kt, vt))  # once, outside timing

    def sdpa_masked():
        return F.scaled_dot_product_attention(qt, kx, vx, attn_mask=mask)

    ref = None
    try:
        with sdpa_kernel([SDPBackend.EFFICIENT_ATTENTION]):
            ref = sdpa_masked().transpose(1, 2)
            torch.cuda.synchronize()
            ms = bench(sdpa_masked, args.rep_ms)
        rows.append(("window", "SDPA mem-efficient, bool mask", ms, flops(pairs_w) / ms / 1e9,
                     "K/V expanded to 32 heads"))
    except Exception as ex:
        rows.append(("window", "SDPA mem-efficient, bool mask", None, None,
                     f"refused: {str(ex)[:60]}"))
    time_routes(rows, "window", run_w, o, keep, ref, flops(pairs_w), args.rep_ms)

    def sdpa_full():
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True, enable_gqa=True)

    try:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            sdpa_full()
            ms = bench(sdpa_full, args.rep_ms)
        rows.append(("window", "SDPA flash, full causal (no window)", ms,
                     flops(pairs_c) / ms / 1e9, f"{pairs_c / pairs_w:.1f}x the work"))
    except Exception as ex:
        rows.append(("window", "SDPA flash, full causal (no window)", None, None,
                     f"refused: {str(ex)[:60]}"))

    del q, k, v, o, lse, kx, vx, mask, ref
    # ---- Dk != Dv (MLA-style prefill: q/k 192, v/o 128), dense causal ---------------------
    S = S_DKDV
    q = torch.randn(1, S, H_DKDV, D_QK, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, S, H_DKDV, D_QK, device=dev, dtype=torch.bfloat16)
    v = torch.randn(1, S, H_DKDV, D_V, device=dev, dtype=torch.bfloat16)
    o = torch.empty(1, S, H_DKDV, D_V, device=dev, dtype=torch.bfloat16)
    lse = torch.empty(1, H_DKDV, S, device=dev, dtype=torch.float32)
    fl_dkdv = 2.0 * H_DKDV * (D_QK + D_V) * (S * (S + 1) // 2)
    keep = {}
    run_d = call(lib, "flashc_attn_fwd", [params(True), view(q), view(k), view(v), view(o),
                                          view(lse)], keep)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def sdpa_dkdv():
        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)

    ref = None
    for be, name in ((SDPBackend.CUDNN_ATTENTION, "SDPA cuDNN"),
                     (SDPBackend.FLASH_ATTENTION, "SDPA flash"),
                     (SDPBackend.EFFICIENT_ATTENTION, "SDPA mem-efficient")):
        try:
            with sdpa_kernel([be]):
                out = sdpa_dkdv().transpose(1, 2)
                torch.cuda.synchronize()
                ms = bench(sdpa_dkdv, args.rep_ms)
            if ref is None:
                ref = out
            rows.append(("dkdv", name, ms, fl_dkdv / ms / 1e9, ""))
        except Exception as ex:  # a backend that refuses Dk != Dv
            rows.append(("dkdv", name, None, None, f"refused: {str(ex)[:60]}"))
    time_routes(rows, "dkdv", run_d, o, keep, ref, fl_dkdv, args.rep_ms)

    # ---- table ---------------------------------------------------------------------------
    # ratios: time of the peer / time of the row (> 1: the row is faster). "old": flashc's
    # old route; "torch": the fastest SDPA row that does the same work (the loop, the mask)
    old, best_torch = {}, {}
    for case, name, ms, tf, note in rows:
        if name.startswith("flashc old") and ms:
            old[case] = ms
        if name.startswith("SDPA") and "no window" not in name and ms:
            best_torch[case] = min(ms, best_torch.get(case, ms))
    print(f"\n{'case':7} {'variant':38} {'ms':>8} {'TFLOP/s':>8} {'vs old':>7} {'vs torch':>8}"
          f"  note")
    for case, name, ms, tf, note in rows:
        r_old = f"{old[case] / ms:.2f}x" if ms and old.get(case) else "-"
        r_t = f"{best_torch[case] / ms:.2f}x" if ms and best_torch.get(case) else "-"
        print(f"{case:7} {name:38} {ms if ms else float('nan'):8.3f} "
              f"{tf if tf else float('nan'):8.1f} {r_old:>7} {r_t:>8}  {note}")
    print(f"(TFLOP/s count unmasked pairs only; varlen lengths {LENS}; window {WINDOW} at "
          f"S {S_WIN}; bf16, d {D}, Hq/Hkv {HQ}/{HKV}; dkdv: S {S_DKDV}, H {H_DKDV}, "
          f"D/Dv {D_QK}/{D_V}; {torch.cuda.get_device_name()})")
    if args.out:
        with open(args.out, "w") as f:
            json.dump([dict(zip(("case", "variant", "ms", "tflops", "note"), r)) for r in rows],
                      f, indent=1)
    return 0 if all(not n.startswith("WRONG") for *_, n in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
