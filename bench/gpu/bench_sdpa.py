#!/usr/bin/env python3
"""flashc's CUDA attention forward against PyTorch SDPA (flash = FlashAttention-2, and cuDNN),
on the same torch-allocated inputs, in the FlashAttention benchmark convention (../shared/PERF.md):
batch * seqlen = 16384, hidden 2048 (heads = 2048 / d), bf16,
TFLOP/s = 4 B H S^2 d / t, halved when causal.

flashc is called through ctypes on libflashc.so (no Python binding needed) on torch's current
stream; every config is checked against SDPA's flash output before it is timed. Times are medians
of triton.testing.do_bench (CUDA events, L2 flushed between calls, warm-up first).

--kernels sm80,sm90 times each CUDA kernel family of flashc side by side: the library is loaded
once per family from its own copy (FLASHC_CUDA_KERNEL is read once per library instance, at its
first call), each checked before it is timed; "default" in the list is the dispatcher's choice
("flashc"), which is also what runs without --kernels.
A family that does not serve a config (a forced sm90 family at d = 256, say) shows "n/s" there.

--llama-seqlens 4096,16384 adds the Llama-3.1 shape beside the convention: B = 1, 64 query heads,
8 KV heads (GQA), d = 128, causal and not, at those seqlens. SDPA gets enable_gqa=True; where a
backend refuses that, it gets K/V expanded to 64 heads (made once, outside the timing), and the
row says so.

usage: bench_sdpa.py --lib build/libflashc.so [--out results.json] [--seqlens 512,1024,...]
                     [--dims 64,128,256] [--kernels sm80,sm90] [--llama-seqlens 16384]
"""
import argparse
import ctypes
import json
import math
import os
import shutil
import sys
import tempfile

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import triton.testing

FLASHC_F16, FLASHC_BF16 = 1, 2
FLASHC_DEVICE_CUDA = 1


class Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("device", ctypes.c_int),
                ("ndim", ctypes.c_int32), ("shape", ctypes.c_int64 * 4),
                ("stride", ctypes.c_int64 * 4)]


class Params(ctypes.Structure):
    """flashc_attn_params (v2, sized); build with params()."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("has_softmax_scale", ctypes.c_int),
                ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int),
                ("window_left", ctypes.c_int64), ("window_right", ctypes.c_int64),
                ("softcap", ctypes.c_float), ("alibi_slopes", ctypes.c_void_p),
                ("block_q", ctypes.c_int64), ("block_k", ctypes.c_int64),
                ("num_threads", ctypes.c_int), ("num_splits", ctypes.c_int),
                ("deterministic", ctypes.c_int), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_size_t), ("cuda_stream", ctypes.c_void_p)]


def params(causal, stream, deterministic=0, workspace=None, workspace_bytes=0):
    """The library's defaults (window -1, -1; default scale) with these fields set."""
    p = Params()
    p.struct_size = ctypes.sizeof(Params)
    p.window_left = p.window_right = -1
    p.causal, p.cuda_stream, p.deterministic = int(causal), stream, int(deterministic)
    p.workspace, p.workspace_bytes = workspace, workspace_bytes
    return p


class Stats(ctypes.Structure):
    """flashc_attn_stats (sized: struct_size must be set, FLASHC_ATTN_STATS_INIT)."""
    _fields_ = [("struct_size", ctypes.c_size_t), ("tile_pairs", ctypes.c_int64),
                ("tile_pairs_total", ctypes.c_int64), ("block_q", ctypes.c_int64),
                ("block_k", ctypes.c_int64), ("num_splits", ctypes.c_int64),
                ("workspace_bytes", ctypes.c_int64)]


def view(t):
    """A torch CUDA tensor as a flashc_tensor (shape and strides in elements)."""
    dt = {torch.bfloat16: FLASHC_BF16, torch.float16: FLASHC_F16, torch.float32: 0}[t.dtype]
    v = Tensor(t.data_ptr(), dt, FLASHC_DEVICE_CUDA, t.dim())
    for i in range(t.dim()):
        v.shape[i], v.stride[i] = t.shape[i], t.stride(i)
    return v


class Flashc:
    def __init__(self, path, kernel=None):
        """kernel: a FLASHC_CUDA_KERNEL family, or None for the dispatcher's choice. The library
        reads the variable once, at its first attention call, which happens here."""
        if kernel:
            copy = os.path.join(tempfile.mkdtemp(), f"libflashc_{kernel}.so")
            shutil.copy(path, copy)
            path = copy
        old = os.environ.get("FLASHC_CUDA_KERNEL")
        if kernel:
            os.environ["FLASHC_CUDA_KERNEL"] = kernel
        self.lib = ctypes.CDLL(path)
        self.lib.flashc_attn_fwd.restype = ctypes.c_int
        self.lib.flashc_last_error.restype = ctypes.c_char_p
        self.lib.flashc_build_info.restype = ctypes.c_char_p
        # The first call reads FLASHC_CUDA_KERNEL. Host memory marked as device memory: refused
        # after the read, before any launch (so a broken kernel cannot hang the set-up).
        q = torch.zeros(1, 8, 1, 64, dtype=torch.bfloat16)
        self.fwd_fn(q, q, q, torch.empty_like(q), torch.empty(1, 1, 8), False, check=False)()
        if old is None:
            os.environ.pop("FLASHC_CUDA_KERNEL", None)
        else:
            os.environ["FLASHC_CUDA_KERNEL"] = old

    def fwd_fn(self, q, k, v, o, lse, causal, check=True):
        """A closure that launches the forward on torch's current stream (views built once)."""
        p = params(causal, torch.cuda.current_stream().cuda_stream)
        args = [ctypes.byref(x) for x in (p, view(q), view(k), view(v), view(o), view(lse))]
        stats = Stats()
        stats.struct_size = ctypes.sizeof(Stats)
        fwd = self.lib.flashc_attn_fwd

        def run():
            st = fwd(*args, ctypes.byref(stats))
            if st != 0 and check:
                raise RuntimeError(f"flashc_attn_fwd: {st}: {self.lib.flashc_last_error().decode()}")
        return run


def tflops(B, H, S, d, causal, ms):
    f = 4.0 * B * H * S * S * d / (2 if causal else 1)
    return f / (ms * 1e-3) / 1e12


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--seqlens", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--rep-ms", type=int, default=300)
    ap.add_argument("--backends", default="flashc,sdpa_flash,sdpa_cudnn",
                    help="which to time (flashc is always checked against sdpa_flash)")
    ap.add_argument("--kernels", default="",
                    help="comma list of FLASHC_CUDA_KERNEL families to time side by side")
    ap.add_argument("--llama-seqlens", default="",
                    help="seqlens of the Llama-3.1 shape (B 1, 64 q / 8 kv heads, d 128)")
    a = ap.parse_args()

    kernels = [k for k in a.kernels.split(",") if k]
    fc = Flashc(a.lib)
    # name -> library: "flashc" (the dispatcher's choice) or "flashc_<family>" per forced family
    # "default" in --kernels: the dispatcher's choice, timed beside the forced families
    libs = ({("flashc" if k == "default" else f"flashc_{k}"):
             (fc if k == "default" else Flashc(a.lib, k)) for k in kernels}
            if kernels else {"flashc": fc})
    names = list(libs) + [n for n in ("sdpa_flash", "sdpa_cudnn") if n in a.backends.split(",")]
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; flashc {fc.lib.flashc_build_info().decode()}",
          flush=True)
    rows = []
    torch.manual_seed(0)
    print("timing: " + ", ".join(names), flush=True)
    # (shape, d, causal, seqlen, batch, q heads, kv heads)
    configs = [("conv", d, causal, S, 16384 // S, 2048 // d, 2048 // d)
               for d in [int(x) for x in a.dims.split(",")] for causal in (False, True)
               for S in [int(x) for x in a.seqlens.split(",")]]
    configs += [("llama", 128, causal, S, 1, 64, 8) for causal in (False, True)
                for S in [int(x) for x in a.llama_seqlens.split(",") if x]]
    for shape, d, causal, S, B, H, Hkv in configs:
        # (B, S, H, d) storage, the flash-attn layout; SDPA gets (B, H, S, d) views of it
        q = torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16)
        k, v = (torch.randn(B, S, Hkv, d, device="cuda", dtype=torch.bfloat16)
                for _ in range(2))
        o = torch.empty_like(q)
        lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        notes = []

        def sdpa(backend, label):
            def run():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal,
                                                          enable_gqa=Hkv != H)
            if Hkv == H:
                return run
            try:
                run()
                return run
            except RuntimeError:
                ke, ve = (x.repeat_interleave(H // Hkv, dim=1) for x in (kt, vt))
                notes.append(f"{label}: K/V expanded (no enable_gqa)")

                def run_expanded():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(qt, ke, ve,
                                                              is_causal=causal)
                return run_expanded

        run_fa2 = sdpa(SDPBackend.FLASH_ATTENTION, "sdpa_flash")
        run_cudnn = sdpa(SDPBackend.CUDNN_ATTENTION, "sdpa_cudnn")
        ref = run_fa2().transpose(1, 2)
        r = {"shape": shape, "d": d, "causal": causal, "seqlen": S, "batch": B,
             "heads": H, "kv_heads": Hkv}
        fns = {"sdpa_flash": run_fa2, "sdpa_cudnn": run_cudnn}
        for name, lib in libs.items():
            # correctness guard before timing: flashc vs SDPA's FA2 on these inputs
            fns[name] = lib.fwd_fn(q, k, v, o, lse, causal)
            o.fill_(float("nan"))
            try:
                fns[name]()
                torch.cuda.synchronize()
                diff = (o.float() - ref.float()).abs().max().item()
            except RuntimeError as e:
                diff = float("nan")
                if "does not serve" in str(e):
                    r[f"not_served_{name}"] = True
                else:
                    notes.append(f"{name}: {e}")
            r[f"max_abs_diff_vs_fa2_{name}"] = diff
            if r.get(f"not_served_{name}"):
                fns[name] = None
            elif not (math.isfinite(diff) and diff < 2e-2):
                fns[name] = None
                notes.append(f"{name} WRONG (maxdiff {diff:.2e}): not timed")
        for name in names:
            if fns.get(name) is None:
                r[name] = None
                continue
            try:
                ms = triton.testing.do_bench(fns[name], warmup=50, rep=a.rep_ms,
                                             return_mode="median")
                r[name] = {"ms": ms, "tflops": tflops(B, H, S, d, causal, ms)}
            except RuntimeError as e:
                r[name] = None
                notes.append(f"{name}: {e}")
        rows.append(r)
        f = lambda n: (f"{r[n]['tflops']:7.1f}" if r.get(n) else
                       "    n/s" if r.get(f"not_served_{n}") else "      -")
        print(f"{shape} d={d:3d} causal={int(causal)} S={S:5d}: "
              + "  ".join(f"{n} {f(n)}" for n in names)
              + ("  " + "; ".join(notes) if notes else ""), flush=True)
        del q, k, v, o, lse, ref
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": dev.name, "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(),
                       "flashc": fc.lib.flashc_build_info().decode(), "rows": rows}, fh, indent=1)

    lib_names = list(libs)
    print("\nbf16 fwd TFLOP/s (median), same inputs, same run; ratios to SDPA cuDNN")
    print("| shape | d | causal | seqlen | " + " | ".join(names) + " | "
          + " | ".join(f"{n}/cuDNN" for n in lib_names) + " |")
    print("|---" * (4 + len(names) + len(lib_names)) + "|")
    worst = None
    for r in rows:
        t = lambda n: r[n]["tflops"] if r.get(n) else float("nan")
        ratios = [t(n) / t("sdpa_cudnn") for n in lib_names]
        fa2 = t(lib_names[0]) / t("sdpa_flash")
        if r["seqlen"] >= 1024 and not math.isnan(fa2):
            worst = fa2 if worst is None else min(worst, fa2)
        print(f"| {r['shape']} | {r['d']} | {'yes' if r['causal'] else 'no'} | {r['seqlen']} | "
              + " | ".join(f"{t(n):.0f}" for n in names) + " | "
              + " | ".join(f"{x:.2f}" for x in ratios) + " |")
    print(f"worst {lib_names[0]}/FA2 ratio at seqlen >= 1k: "
          f"{worst if worst is None else round(worst, 3)}")
    bad = [r for r in rows if any(r.get(n) is None and not r.get(f"not_served_{n}")
                                  for n in lib_names)]
    return 1 if bad else 0

if __name__ == "__main__":
    sys.exit(main())
