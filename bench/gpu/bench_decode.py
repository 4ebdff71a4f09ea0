#!/usr/bin/env python3
"""Decode (one query row per sequence) against a KV cache: flashc_attn_kvcache_fwd on a
contiguous cache and on paged caches (page 16 and 64, pages shuffled within each sequence),
against PyTorch SDPA (flash and cuDNN backends) on the same K/V memory, bf16, d 128.

Figure: GB/s of K + V, i.e. 2 * B * ctx * Hkv * d * 2 bytes / time: what a decode step must read
(q, o and the tables are noise), and its % of the copy ceiling measured in the same run
(torch copy_ of 1 GiB, read + write counted). Times are medians of triton.testing.do_bench
(CUDA events, L2 flushed between calls, warm-up first). Every flashc layout is checked against
SDPA flash's output on the same inputs before it is timed (the shuffled page table permutes
keys inside each sequence only, which attention does not see).

SDPA gets q (B, Hq, 1, d) and the cache as the (B, Hkv, ctx, d) view of the (B, ctx, Hkv, d)
buffer, with enable_gqa=True (no expanded copy); a backend that refuses it is reported as such.

Variants (issue 13, helpers decode2..decode5): --variants v1,v2,pdl,v4,lean+fill
times every flashc layout once per value of FLASHC_DECODE_MERGE (v1, v2, v3, v4, pdl, auto), of
FLASHC_DECODE_KERNEL (split = base, lean, lean3, lean5, wide, autow) or of FLASHC_DECODE_SPLITS (fa2,
fill, deep),
or "+"-joined combinations, which
src/cuda/attn_decode.cu reads at each call (v1 keeps the historical keys), each checked against
SDPA first; --sweep 8,16,32 also times the contiguous call at
those explicit num_splits for the --sweep-variants, at the --sweep-batches (default B = 1).
Each shape's line ("Hq/Hkv .. B .. ctx ..: GB/s name value [sN], ..") carries the split count
used, so a run cut short still leaves its finished shapes to read.
--shapes 1x4096,16x32768 replaces the batches x ctx product by a list. --ratio-to auto ends
with every other variant / that one, per shape and layout, with TB/s (decode12).
--clean-shapes 1x32768,.. also times SDPA cuDNN and each variant's contiguous call at those
shapes with the L2 emptied by a 256 MB read instead of triton's 256 MB zero_ (which leaves the
L2 full of dirty lines that a K/V stream must write back inside its own time; decode6), and
prints both side by side last. --ncu-drive only runs the variants at the first shape, three
calls each after a zero_, for `ncu --cache-control none` (decode6 / decode7's profiles, in
bench/RESULTS.md). --kv-layout bhsd times the caches as views of (B, Hkv, ctx, d) buffers
(every KV head's keys contiguous; contiguous calls only), SDPA on the same memory; with
--ncu-drive, "sdpa_cudnn" among the variants drives SDPA's cuDNN backend too (decode9).

usage: bench_decode.py --lib build/libflashc.so [--out decode.json] [--batches 1,4,16,64]
                       [--ctx 4096,32768,131072] [--heads 32/8,16/8] [--rep-ms 40] [--graph]
                       [--shapes BxCTX,..] [--variants v1,v2,pdl,v4] [--sweep 8,16,..]
                       [--sweep-variants pdl,v4] [--sweep-batches 1]
                       [--clean-shapes BxCTX,..] [--ncu-drive] [--kv-layout bshd|bhsd]
"""
import argparse
import ctypes
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import triton.testing

FLASHC_F32, FLASHC_F16, FLASHC_BF16, FLASHC_I32 = 0, 1, 2, 3
FLASHC_DEVICE_CUDA = 1


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


class KVCache(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("k_cache", ctypes.c_void_p),
                ("v_cache", ctypes.c_void_p), ("cache_seqlens", ctypes.c_void_p),
                ("block_table", ctypes.c_void_p), ("cache_batch_idx", ctypes.c_void_p),
                ("k_new", ctypes.c_void_p), ("v_new", ctypes.c_void_p)]


class Stats(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("tile_pairs", ctypes.c_int64),
                ("tile_pairs_total", ctypes.c_int64), ("block_q", ctypes.c_int64),
                ("block_k", ctypes.c_int64), ("num_splits", ctypes.c_int64),
                ("workspace_bytes", ctypes.c_int64)]


def view(t, shape=None):
    dt = {torch.bfloat16: FLASHC_BF16, torch.float16: FLASHC_F16, torch.float32: FLASHC_F32,
          torch.int32: FLASHC_I32}[t.dtype]
    v = Tensor(t.data_ptr(), dt, FLASHC_DEVICE_CUDA, t.dim())
    for i in range(t.dim()):
        v.shape[i], v.stride[i] = t.shape[i], t.stride(i)
    return v


class Decode:
    """One flashc_attn_kvcache_fwd call with its views and workspace built once (as a serving
    loop would: the call itself then allocates nothing)."""

    def __init__(self, lib, q, kc, vc, o, lse, seqlens, table=None, num_splits=0):
        self.lib = lib
        self.keep = [view(q), view(kc), view(vc), view(o), view(lse), view(seqlens)]
        if table is not None:
            self.keep.append(view(table))
        self.p = Params()
        self.p.struct_size = ctypes.sizeof(Params)
        self.p.window_left = self.p.window_right = -1
        self.p.num_splits = num_splits
        self.p.cuda_stream = torch.cuda.current_stream().cuda_stream
        c = KVCache()
        c.struct_size = ctypes.sizeof(KVCache)
        c.k_cache = ctypes.addressof(self.keep[1])
        c.v_cache = ctypes.addressof(self.keep[2])
        c.cache_seqlens = ctypes.addressof(self.keep[5])
        c.block_table = ctypes.addressof(self.keep[6]) if table is not None else None
        self.c = c
        self.stats = Stats()
        self.stats.struct_size = ctypes.sizeof(Stats)
        nbytes = ctypes.c_size_t(0)
        args = (ctypes.byref(self.p), ctypes.byref(c), ctypes.byref(self.keep[0]),
                ctypes.byref(self.keep[3]), ctypes.byref(self.keep[4]))
        st = lib.flashc_attn_kvcache_fwd_workspace_size(*args, ctypes.byref(nbytes))
        if st != 0:
            raise RuntimeError(lib.flashc_last_error().decode())
        self.ws = torch.empty(max(nbytes.value, 1), dtype=torch.uint8, device="cuda")
        self.p.workspace, self.p.workspace_bytes = self.ws.data_ptr(), nbytes.value
        self.args = args + (ctypes.byref(self.stats),)

    def __call__(self):
        st = self.lib.flashc_attn_kvcache_fwd(*self.args)
        if st != 0:
            raise RuntimeError(f"flashc_attn_kvcache_fwd: {st}: "
                               f"{self.lib.flashc_last_error().decode()}")


def graph_ms(lib, q, kc, vc, o, lse, seqlens, rep_ms):
    """The contiguous call captured once in a CUDA graph (workspace given, so nothing is
    allocated) and replayed: the kernels' time without the host's per-call work (validation,
    pointer queries, launches), which an eager call at small B x ctx may not hide."""
    try:
        s = torch.cuda.Stream()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.stream(s):
            fn = Decode(lib, q, kc, vc, o, lse, seqlens)
            fn()
            torch.cuda.synchronize()
            with torch.cuda.graph(g, stream=s, capture_error_mode="thread_local"):
                fn()
        torch.cuda.synchronize()
        return bench(g.replay, rep_ms)
    except Exception as e:  # reported, not fatal
        print(f"  graph capture failed: {e}", flush=True)
        return None


def set_variant(v):
    """A variant is a merge (FLASHC_DECODE_MERGE: v1, v2, v3, v4, pdl, auto), a
    loader (FLASHC_DECODE_KERNEL: split, base, lean, lean3, lean5, wide, autow) or a split rule
    (FLASHC_DECODE_SPLITS: fa2, fill, deep), or several joined by "+" (base+fa2+pdl); what a
    variant does not name is the library's default; None: every default. All are read by the
    library at every call."""
    for k in ("FLASHC_DECODE_MERGE", "FLASHC_DECODE_KERNEL", "FLASHC_DECODE_SPLITS"):
        os.environ.pop(k, None)
    if v is None:
        return
    for part in v.split("+"):  # "lean+v4": a loader and a merge; "lean+fill": + split rule
        if part in ("split", "base", "wide", "autow") or part.startswith("lean"):
            os.environ["FLASHC_DECODE_KERNEL"] = part
        elif part in ("fill", "fa2", "deep"):
            os.environ["FLASHC_DECODE_SPLITS"] = part
        else:
            os.environ["FLASHC_DECODE_MERGE"] = part


def bench(fn, rep_ms):
    return triton.testing.do_bench(fn, warmup=max(5, rep_ms // 4), rep=rep_ms,
                                   return_mode="median")


_clean_buf = None


def bench_clean(fn, rep_ms):
    """As bench, but the L2 is emptied by READING 256 MB before each call instead of
    triton's zero_() of 256 MB: do_bench leaves the L2 full of dirty lines (~50 MB on the
    H200), and a call that streams K/V into L2 then pays their write-back to HBM inside its
    own time; here the L2 holds clean lines, as in a serving loop whose previous kernels wrote
    little (decode5/decode6's question: how much of the fixed cost at B = 1 is that)."""
    global _clean_buf
    if _clean_buf is None:
        _clean_buf = torch.ones(64 << 20, dtype=torch.float32, device="cuda")
    sink = torch.empty((), dtype=torch.float32, device="cuda")

    def one(n):
        st = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        en = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for i in range(n):
            torch.sum(_clean_buf, dim=0, out=sink)
            st[i].record()
            fn()
            en[i].record()
        torch.cuda.synchronize()
        return sorted(a.elapsed_time(b) for a, b in zip(st, en))
    est = one(5)[2]
    n = max(10, min(1000, int(rep_ms / max(est + 0.08, 1e-3))))
    t = one(n)
    return t[len(t) // 2]


def decode_inputs(B, ctx, Hq, Hkv, d, dt, kv_layout="bshd"):
    """Random K/V caches (B, ctx, Hkv, d), full: every sequence ctx long; q (B, 1, Hq, d); o
    and lse to be written; cache_seqlens (int32 on the device). kv_layout "bhsd": the caches
    are (B, ctx, Hkv, d) views of (B, Hkv, ctx, d) buffers, so each KV head's keys are one
    contiguous run (decode9: does the split kernel's stream rate at large B depend on reading
    256-byte pieces of the (b, key) rows, 2 KB apart, that other blocks read the rest of?)."""
    if kv_layout == "bhsd":
        kc = torch.randn(B, Hkv, ctx, d, dtype=dt, device="cuda").transpose(1, 2)
        vc = torch.randn(B, Hkv, ctx, d, dtype=dt, device="cuda").transpose(1, 2)
    else:
        kc = torch.randn(B, ctx, Hkv, d, dtype=dt, device="cuda")
        vc = torch.randn(B, ctx, Hkv, d, dtype=dt, device="cuda")
    q = torch.randn(B, 1, Hq, d, dtype=dt, device="cuda")
    o = torch.empty(B, 1, Hq, d, dtype=dt, device="cuda")
    lse = torch.empty(B, Hq, 1, dtype=torch.float32, device="cuda")
    seqlens = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
    return kc, vc, q, o, lse, seqlens


def ncu_drive(lib, variants, B, ctx, Hq, Hkv, d=128, kv_layout="bshd"):
    """Three calls of each variant at B x ctx (contiguous), each after triton's 256 MB zero_
    (the dirty L2 of the bench), synchronised, for ncu --cache-control none to profile. A variant
    "NAME/sN" runs NAME with num_splits = N (else the library's count); "sdpa_cudnn" SDPA's
    cuDNN backend on the same cache (the peer's kernels, for the same metrics)."""
    kc, vc, q, o, lse, seqlens = decode_inputs(B, ctx, Hq, Hkv, d, torch.bfloat16, kv_layout)
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    for v in variants:
        if v == "sdpa_cudnn":
            qs, ks, vs = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)

            def fn():
                with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                    F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True)
            splits = "-"
        else:
            name, _, ns = v.partition("/s")
            set_variant(name)
            fn = Decode(lib, q, kc, vc, o, lse, seqlens, num_splits=int(ns) if ns else 0)
        for _ in range(3):
            flush.zero_()
            torch.cuda.synchronize()
            fn()
            torch.cuda.synchronize()
        if v != "sdpa_cudnn":
            splits = fn.stats.num_splits
        print(f"ncu-drive {v}: splits {splits}", flush=True)
    set_variant(None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--batches", default="1,4,16,64")
    ap.add_argument("--ctx", default="4096,32768,131072")
    ap.add_argument("--heads", default="32/8,16/8")
    ap.add_argument("--pages", default="16,64")
    ap.add_argument("--kv-layout", default="bshd", choices=("bshd", "bhsd"),
                    help="bhsd: the caches as views of (B, Hkv, ctx, d) buffers (contiguous "
                         "only: --pages is ignored)")
    ap.add_argument("--rep-ms", type=int, default=40)
    ap.add_argument("--graph", action="store_true",
                    help="also time the contiguous call replayed from a CUDA graph")
    ap.add_argument("--shapes", default="",
                    help="B x ctx list (e.g. 1x4096,16x32768) instead of --batches x --ctx")
    ap.add_argument("--variants", default="v1",
                    help="FLASHC_DECODE_MERGE values to time (v1 = today's default)")
    ap.add_argument("--sweep", default="", help="explicit num_splits to time at B = 1")
    ap.add_argument("--sweep-variants", default="pdl,v4")
    ap.add_argument("--sweep-batches", default="1", help="batch sizes the --sweep runs at")
    ap.add_argument("--ratio-to", default="",
                    help="a variant of --variants: a last table of every other variant / it, "
                         "per shape and layout, with TB/s and x SDPA cuDNN (decode12)")
    ap.add_argument("--clean-shapes", default="",
                    help="B x ctx list: also time SDPA cuDNN and each variant's contiguous call "
                         "there with the L2 emptied by a read (bench_clean), not triton's zero_")
    ap.add_argument("--ncu-drive", action="store_true",
                    help="only drive the --variants at the first --shapes / --heads entry for "
                         "ncu (ncu_drive), no timing")
    a = ap.parse_args()
    variants = [v for v in a.variants.split(",") if v]

    lib = ctypes.CDLL(a.lib)
    lib.flashc_last_error.restype = ctypes.c_char_p
    lib.flashc_build_info.restype = ctypes.c_char_p
    if a.ncu_drive:
        B, ctx = (int(x) for x in (a.shapes or "1x32768").split(",")[0].split("x"))
        Hq, Hkv = (int(x) for x in a.heads.split(",")[0].split("/"))
        ncu_drive(lib, variants, B, ctx, Hq, Hkv, kv_layout=a.kv_layout)
        return 0
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}; "
          f"flashc {lib.flashc_build_info().decode()}", flush=True)

    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy_ms = bench(lambda: dst.copy_(src), 100)
    copy_gbs = 2 * src.numel() / (copy_ms * 1e-3) / 1e9
    del src, dst
    print(f"copy ceiling: {copy_gbs:.0f} GB/s (1 GiB torch copy_, read + write)", flush=True)

    d, dt = 128, torch.bfloat16
    rows = []
    heads = [tuple(int(x) for x in h.split("/")) for h in a.heads.split(",")]
    if a.shapes:
        shapes = [tuple(int(x) for x in sh.split("x")) for sh in a.shapes.split(",")]
    else:
        shapes = [(B, ctx) for ctx in [int(x) for x in a.ctx.split(",")]
                  for B in [int(x) for x in a.batches.split(",")]]
    clean = {tuple(int(x) for x in sh.split("x")) for sh in a.clean_shapes.split(",") if sh}
    for Hq, Hkv in heads:
        for B, ctx in shapes:
            torch.manual_seed(B * 7 + ctx)
            kc, vc, q, o, lse, seqlens = decode_inputs(B, ctx, Hq, Hkv, d, dt, a.kv_layout)
            kv_gb = 2 * kc.numel() * kc.element_size() / 1e9
            row = {"B": B, "ctx": ctx, "Hq": Hq, "Hkv": Hkv, "d": d, "kv_gb": kv_gb,
                   "kv_layout": a.kv_layout}

            qs, ks, vs = q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2)
            ref = None
            if (B, ctx) in clean:
                try:
                    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                        row["clean_sdpa_cudnn_ms"] = bench_clean(
                            lambda: F.scaled_dot_product_attention(qs, ks, vs, enable_gqa=True),
                            a.rep_ms)
                except Exception:  # reported by the dirty run below
                    pass
            for name, be in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                             ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel([be]):
                        fn = lambda: F.scaled_dot_product_attention(qs, ks, vs,
                                                                    enable_gqa=True)
                        out = fn()
                        torch.cuda.synchronize()
                        if ref is None:
                            ref = out.transpose(1, 2).float()
                        row[name + "_ms"] = bench(fn, a.rep_ms)
                except Exception as e:  # a backend that does not take this problem
                    row[name + "_ms"] = None
                    row[name + "_why"] = str(e).splitlines()[0][:120]

            layouts = [("contig", None)] + [(f"page{p}", p) for p in
                                             [int(x) for x in a.pages.split(",") if x]
                                             if a.kv_layout == "bshd"]
            runs = [(lay, page, v, 0) for v in variants for lay, page in layouts]
            if a.sweep and B in [int(x) for x in a.sweep_batches.split(",") if x]:
                runs += [("contig", None, v, int(n)) for v in a.sweep_variants.split(",")
                         if v for n in a.sweep.split(",") if n]
            for lay, page, variant, nsplit in runs:
                # v1 keeps the historical keys (contig, page16, ..)
                name = lay if variant == "v1" else f"{lay}@{variant}"
                if nsplit:
                    name += f"/s{nsplit}"
                set_variant(variant)
                if page is None:
                    kv, vv, table = kc, vc, None
                else:
                    if ctx % page:
                        continue
                    npg = ctx // page
                    kv = kc.view(B * npg, page, Hkv, d)
                    vv = vc.view(B * npg, page, Hkv, d)
                    # sequence b keeps its own pages, in shuffled order
                    perm = torch.stack([torch.randperm(npg, device="cuda") for _ in range(B)])
                    table = (perm + torch.arange(B, device="cuda")[:, None] * npg).to(
                        torch.int32).contiguous()
                fn = Decode(lib, q, kv, vv, o, lse, seqlens, table, nsplit)
                o.fill_(float("nan"))
                fn()
                torch.cuda.synchronize()
                if ref is not None:
                    err = (o.float() - ref).abs().max().item()
                    tol = 2e-2 * ref.abs().max().item() + 1e-4  # a few bf16 ulps of o
                    row[name + "_err"] = err
                    if not err <= tol:
                        print(f"  {name} B={B} ctx={ctx}: max |o - sdpa| = {err}: WRONG",
                              flush=True)
                        row[name + "_ms"] = None
                        continue
                row[name + "_ms"] = bench(fn, a.rep_ms)
                row[name + "_splits"] = fn.stats.num_splits
                if (B, ctx) in clean and lay == "contig" and not nsplit:
                    row["clean_" + name + "_ms"] = bench_clean(fn, a.rep_ms)
                if name == "contig" and a.graph:
                    row["graph_ms"] = graph_ms(lib, q, kv, vv, o, lse, seqlens, a.rep_ms)
            set_variant(None)
            del kc, vc, q, o, lse
            torch.cuda.empty_cache()
            parts = []
            for k in [k[:-3] for k in list(row) if k.endswith("_ms")]:
                ms = row.get(k + "_ms")
                if ms:
                    row[k + "_gbs"] = kv_gb / (ms * 1e-3)
                    sp = row.get(k + "_splits")  # the split count used (not in a sweep's key)
                    parts.append(f"{k} {row[k + '_gbs']:.0f}" +
                                 (f" s{sp}" if sp and "/s" not in k else ""))
            print(f"Hq/Hkv {Hq}/{Hkv} B {B:3d} ctx {ctx:6d}: GB/s " + ", ".join(parts),
                  flush=True)
            rows.append(row)

    print()
    print(f"decode bf16, d {d}: GB/s of K+V (% of the {copy_gbs:.0f} GB/s copy ceiling); "
          f"x = flashc contiguous / SDPA cuDNN")
    print("| Hq/Hkv | B x ctx | splits | flashc contig | graph | page 16 | page 64 | SDPA flash | "
          "SDPA cuDNN | x cuDNN |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")

    def cell(r, k):
        g = r.get(k + "_gbs")
        return f"{g:.0f} ({100 * g / copy_gbs:.0f}%)" if g else "-"
    for r in rows:
        x = (f"{r['contig_gbs'] / r['sdpa_cudnn_gbs']:.2f}"
             if r.get("contig_gbs") and r.get("sdpa_cudnn_gbs") else "-")
        print(f"| {r['Hq']}/{r['Hkv']} | {r['B']} x {r['ctx'] // 1024}k | "
              f"{r.get('contig_splits', '-')} | {cell(r, 'contig')} | {cell(r, 'graph')} | "
              f"{cell(r, 'page16')} | "
              f"{cell(r, 'page64')} | {cell(r, 'sdpa_flash')} | {cell(r, 'sdpa_cudnn')} | {x} |")
    for r in rows:
        for k in ("sdpa_flash", "sdpa_cudnn"):
            if r.get(k + "_why"):
                print(f"- {k} at B {r['B']} ctx {r['ctx']}: {r[k + '_why']}")
    if len(variants) > 1 or a.sweep:
        variant_tables(rows, variants, [lay for lay, _ in layouts], copy_gbs)
    if clean:
        clean_table(rows, variants)
    if a.ratio_to:
        ratio_table(rows, variants, [lay for lay, _ in layouts], a.ratio_to)
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": dev.name, "copy_gbs": copy_gbs, "torch": torch.__version__,
                       "flashc": lib.flashc_build_info().decode(), "rows": rows}, fh, indent=1)
    bad = [r for r in rows for k in list(r)
           if k.endswith("_err") and r.get(k[:-4] + "_ms") is None]
    return 1 if bad else 0


def variant_tables(rows, variants, layouts, copy_gbs):
    """The short tables last: each (variant, layout) at every shape, GB/s and x cuDNN; then the
    split sweep at B = 1."""
    def fmt(r, k):
        g, c = r.get(k + "_gbs"), r.get("sdpa_cudnn_gbs")
        if not g:
            return "WRONG" if (k + "_err") in r else "-"
        sp = f" s{r[k + '_splits']}" if (k + "_splits") in r and "/s" not in k else ""
        return (f"{g:.0f} ({g / c:.2f}x){sp}" if c else f"{g:.0f}{sp}")
    shapes = [f"{r['Hq']}/{r['Hkv']} {r['B']}x{r['ctx'] // 1024}k" for r in rows]
    print()
    print(f"merge variants (FLASHC_DECODE_MERGE / _KERNEL / _SPLITS): GB/s of K+V (x SDPA "
          f"cuDNN) sN = splits used, copy ceiling {copy_gbs:.0f} GB/s")
    print("| variant | layout | " + " | ".join(shapes) + " |")
    print("|---|---|" + "--:|" * len(shapes))
    for k, lab in (("sdpa_cudnn", "SDPA cuDNN"), ("sdpa_flash", "SDPA flash")):
        print(f"| {lab} | - | " + " | ".join(fmt(r, k) for r in rows) + " |")
    for v in variants:
        for lay in layouts:
            k = lay if v == "v1" else f"{lay}@{v}"
            print(f"| {v} | {lay} | " + " | ".join(fmt(r, k) for r in rows) + " |")
    sweep = sorted({k[:-3] for r in rows for k in r if "/s" in k and k.endswith("_ms")},
                   key=lambda k: (k.split("/")[0], int(k.split("/s")[1])))
    if sweep:
        ones = [r for r in rows if any(k.startswith(sweep[0] + "_") for k in r)]
        print()
        print("split sweep (contiguous, explicit num_splits): GB/s (x SDPA cuDNN); "
              "auto = the library's count")
        print("| variant / splits | " + " | ".join(
            f"{r['Hq']}/{r['Hkv']} {r['B']}x{r['ctx'] // 1024}k "
            f"(auto {r.get('contig_splits', '-')})" for r in ones) + " |")
        print("|---|" + "--:|" * len(ones))
        for k in sweep:
            print(f"| {k.split('@')[1]} | " + " | ".join(fmt(r, k) for r in ones) + " |")


def ratio_table(rows, variants, layouts, ref):
    """The deciding table (decode12): per shape and layout, SDPA cuDNN's TB/s, the reference
    variant's TB/s (x cuDNN, splits used), and each other variant as x the reference (its
    splits); then per variant the geometric mean, minimum and maximum of those ratios."""
    others = [v for v in variants if v != ref]

    def key(v, lay):
        return lay if v == "v1" else f"{lay}@{v}"
    print()
    print(f"ratios to {ref} (same process): TB/s of K+V; x = variant / {ref}; WRONG = failed "
          f"the check against SDPA")
    print(f"| Hq/Hkv | B x ctx | layout | cuDNN TB/s | {ref} TB/s (x cuDNN) | " +
          " | ".join(f"{v} / {ref}" for v in others) + " |")
    print("|---|---|---|--:|--:|" + "--:|" * len(others))
    agg = {v: [] for v in others}
    xc = {v: [] for v in others}  # each variant's x SDPA cuDNN (decode13)
    for r in rows:
        c = r.get("sdpa_cudnn_gbs")
        for lay in layouts:
            g0 = r.get(key(ref, lay) + "_gbs")
            if g0 is None and key(ref, lay) + "_err" not in r:
                continue
            cells = []
            for v in others:
                g = r.get(key(v, lay) + "_gbs")
                if g and g0:
                    agg[v].append(g / g0)
                    if c:
                        xc[v].append(g / c)
                    cells.append(f"{g / g0:.3f} s{r.get(key(v, lay) + '_splits', '-')}")
                else:
                    cells.append("WRONG" if key(v, lay) + "_err" in r and not g else "-")
            c0 = (f"{g0 / 1e3:.2f} ({g0 / c:.3f}x) s{r.get(key(ref, lay) + '_splits', '-')}"
                  if g0 and c else (f"{g0 / 1e3:.2f}" if g0 else "WRONG"))
            print(f"| {r['Hq']}/{r['Hkv']} | {r['B']} x {r['ctx'] // 1024}k | {lay} | "
                  f"{f'{c / 1e3:.2f}' if c else '-'} | {c0} | " + " | ".join(cells) + " |")
    for v in others:
        x = agg[v]
        if x:
            gm = math.exp(sum(math.log(t) for t in x) / len(x))
            print(f"- {v} / {ref}: geomean {gm:.3f}, min {min(x):.3f}, max {max(x):.3f} "
                  f"over {len(x)} cells" + (f"; {v} x cuDNN {min(xc[v]):.3f}-{max(xc[v]):.3f}"
                                            if xc[v] else ""))


def clean_table(rows, variants):
    """The contiguous calls timed after a clean L2 flush (bench_clean), beside the same calls
    after triton's dirty one: GB/s (x SDPA cuDNN under the same flush)."""
    cr = [r for r in rows if r.get("clean_sdpa_cudnn_gbs") or any(
        r.get(f"clean_contig@{v}_gbs") for v in variants)]
    if not cr:
        return
    print()
    print("clean L2 flush (256 MB read before each call) vs triton's dirty one (256 MB zero_): "
          "GB/s of K+V, contiguous (x SDPA cuDNN under the same flush)")
    print("| variant | flush | " + " | ".join(
        f"{r['Hq']}/{r['Hkv']} {r['B']}x{r['ctx'] // 1024}k" for r in cr) + " |")
    print("|---|---|" + "--:|" * len(cr))
    for v in ["sdpa_cudnn"] + variants:
        k = v if v == "sdpa_cudnn" else ("contig" if v == "v1" else f"contig@{v}")
        for fl, pre in (("dirty", ""), ("clean", "clean_")):
            cells = []
            for r in cr:
                g, c = r.get(pre + k + "_gbs"), r.get(pre + "sdpa_cudnn_gbs")
                cells.append(f"{g:.0f} ({g / c:.2f}x)" if g and c else (f"{g:.0f}" if g else "-"))
            print(f"| {'SDPA cuDNN' if v == 'sdpa_cudnn' else v} | {fl} | " + " | ".join(cells)
                  + " |")


if __name__ == "__main__":
    sys.exit(main())
