#!/usr/bin/env python3
"""flashc's CUDA backward against PyTorch SDPA, in two tables.

1. The seeds' sdpa_bench.py (course module 07): forward + backward of causal attention at
   B = 4, H = 16, d = 64, bf16, T = 1k ... 16k: median time and peak GPU memory (measured by
   torch.cuda.max_memory_allocated after a reset: inputs, outputs, gradients and every
   workspace, flashc's included since the binding takes it from torch's allocator) for flashc
   (Python binding, torch autograd; fast and deterministic) and SDPA math, flash, mem_eff,
   cuDNN. A backend that runs out of memory is reported as OOM. The seeds use out.sum(); here
   dout is random (a constant dout is a degenerate input), which costs the same.
2. Backward alone, TFLOP/s at d = 128, 16 heads, batch * seqlen = 16384 (bench_sdpa.py's
   convention; bwd FLOPs = 2.5 x 4 B H S^2 d, halved when causal): flashc_attn_bwd called
   through ctypes with its workspace allocated once (fast and deterministic) vs the backward of
   SDPA flash (FlashAttention-2) and cuDNN through autograd (retain_graph).
3. (--part 3) the tile ladder: the backward alone with the non-default tiles the library has
   (params.block_q / block_k) beside the default, d = 128 and 64, hidden 2048, vs SDPA flash.
Every flashc configuration is checked against SDPA flash's gradients before it is timed (max
abs diff < 5e-2 relative to the gradient's max), else it is reported WRONG and not timed.
Times: CUDA events around each call after warm-up, median of >= 5 calls.

usage: bench_bwd.py --lib build/libflashc.so [--out bwd.json] [--part 1,2] [--seqlens ...]
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


def view(t):
    dt = {torch.bfloat16: FLASHC_BF16, torch.float16: FLASHC_F16, torch.float32: 0}[t.dtype]
    v = Tensor(t.data_ptr(), dt, FLASHC_DEVICE_CUDA, t.dim())
    for i in range(t.dim()):
        v.shape[i], v.stride[i] = t.shape[i], t.stride(i)
    return v


def median_ms(fn, min_calls=5, budget_ms=400.0, warmup=2):
    """Median of CUDA-event times of fn() (each call timed alone), after warm-up."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    while len(times) < min_calls or (sum(times) < budget_ms and len(times) < 50):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


SDPA = {"math": SDPBackend.MATH, "flash": SDPBackend.FLASH_ATTENTION,
        "mem_eff": SDPBackend.EFFICIENT_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def part1(seqlens, rows):
    import flashc

    B, H, d = 4, 16, 64
    print(f"\n== fwd+bwd, causal, B={B} H={H} d={d} bf16 (seeds' sdpa_bench convention)", flush=True)
    for T in seqlens:
        torch.manual_seed(T)
        # (B, H, T, d) storage as in the seeds; flashc gets (B, T, H, d) views of it
        q, k, v = (torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        dout = torch.randn(B, H, T, d, device="cuda", dtype=torch.bfloat16)
        ref = None
        with sdpa_kernel(SDPA["flash"]):
            F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dout)
        ref = [t.grad.clone() for t in (q, k, v)]
        for t in (q, k, v):
            t.grad = None

        def flashc_run(det):
            def run():
                o = flashc.flash_attn_func(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           causal=True, deterministic=det)
                o.backward(dout.transpose(1, 2))
            return run

        def sdpa_run(backend):
            def run():
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True).backward(dout)
            return run

        cands = [("flashc", flashc_run(False)), ("flashc_det", flashc_run(True))] + \
                [(n, sdpa_run(b)) for n, b in SDPA.items()]
        line = []
        for name, fn in cands:
            r = {"part": 1, "T": T, "B": B, "H": H, "d": d, "causal": True, "impl": name}
            try:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                fn()
                torch.cuda.synchronize()
                r["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
                if name.startswith("flashc"):
                    diff = max(((t.grad.float() - w.float()).abs().max() / w.float().abs().max()).item()
                               for t, w in zip((q, k, v), ref))
                    r["rel_diff_vs_sdpa_flash"] = diff
                    if not (math.isfinite(diff) and diff < 5e-2):
                        r["status"] = "WRONG"
                        raise ValueError(f"flashc gradients differ from SDPA flash by {diff:.3g}")
                for t in (q, k, v):
                    t.grad = None

                def timed():
                    fn()
                    for t in (q, k, v):
                        t.grad = None
                r["ms"] = median_ms(timed, budget_ms=300.0)
                r["status"] = "ok"
                line.append(f"{name} {r['ms']:7.2f} ms {r['peak_gib']:5.2f} GiB")
            except torch.OutOfMemoryError:
                r["status"] = "OOM"
                line.append(f"{name}     OOM")
            except (RuntimeError, ValueError, NotImplementedError) as e:
                r.setdefault("status", "error")
                r["error"] = str(e)[:200]
                line.append(f"{name} {r['status']}")
            for t in (q, k, v):
                t.grad = None
            rows.append(r)
        print(f"T={T:5d} | " + " | ".join(line), flush=True)
        del q, k, v, dout, ref
        torch.cuda.empty_cache()


# flashc configurations of the backward-alone tables: name -> (block_q, block_k, deterministic)
# name: (block_q, block_k, deterministic[, FLASHC_CUDA_BWD_KERNEL family preferred])
FLASHC_CONFIGS = {"flashc": (0, 0, False), "flashc_det": (0, 0, True),
                  "flashc_sm80": (0, 0, False, "sm80"), "flashc_sm80_det": (0, 0, True, "sm80")}


BUDGET_MS = 300.0  # per configuration of parts 2 and 3 (--budget-ms)
CAUSALS = (False, True)  # the masks of parts 2 and 3 (bench_bwd4.py's --causal)


def family_env(cfg):
    """Sets FLASHC_CUDA_BWD_KERNEL (cfg[3], "" or absent: the dispatcher's choice),
    FLASHC_CUDA_BWD_DET_PLANES (cfg[4]), FLASHC_CUDA_BWD_DET_FREE (cfg[5]) and
    FLASHC_CUDA_BWD_DET_FENCE (cfg[6]), FLASHC_CUDA_BWD_ORDER (cfg[7]) and
    FLASHC_CUDA_BWD_NO_DQ (cfg[8]; "" or absent: unset) for a configuration (the library reads
    them at every call)."""
    for i, var in ((3, "FLASHC_CUDA_BWD_KERNEL"), (4, "FLASHC_CUDA_BWD_DET_PLANES"),
                   (5, "FLASHC_CUDA_BWD_DET_FREE"), (6, "FLASHC_CUDA_BWD_DET_FENCE"),
                   (7, "FLASHC_CUDA_BWD_ORDER"), (8, "FLASHC_CUDA_BWD_NO_DQ")):
        if len(cfg) > i and cfg[i] != "":
            os.environ[var] = str(cfg[i])
        else:
            os.environ.pop(var, None)


def part2(lib, seqlens, rows, d=128, configs=("flashc", "flashc_det"), peers=("flash", "cudnn"),
          part=2):
    H = 2048 // d if part == 3 else 16
    print(f"\n== bwd alone, d={d} H={H} batch*seqlen=16384 bf16: TFLOP/s", flush=True)
    fwd, bwd, wss = lib.flashc_attn_fwd, lib.flashc_attn_bwd, lib.flashc_attn_bwd_workspace_size
    for causal in CAUSALS:
        for S in seqlens:
            B = max(1, 16384 // S)
            torch.manual_seed(S + causal)
            q, k, v, dout = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16)
                             for _ in range(4))
            o = torch.empty_like(q)
            lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
            dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
            stream = torch.cuda.current_stream().cuda_stream
            p = params(causal, stream)
            vs = [view(x) for x in (q, k, v, o, dout, lse, dq, dk, dv)]
            refs = [ctypes.byref(x) for x in vs]
            st = fwd(ctypes.byref(p), refs[0], refs[1], refs[2], refs[3], refs[5], None)
            assert st == 0, lib.flashc_last_error()
            n = ctypes.c_size_t(0)
            for name in configs:  # the largest workspace of the configurations
                bq, bk, det = FLASHC_CONFIGS[name][:3]
                family_env(FLASHC_CONFIGS[name])
                pq = params(causal, stream, det)
                pq.block_q, pq.block_k = bq, bk
                m = ctypes.c_size_t(0)
                st = wss(ctypes.byref(pq), *refs, ctypes.byref(m))
                assert st == 0, lib.flashc_last_error()
                n.value = max(n.value, m.value)
            ws = torch.empty(n.value, dtype=torch.uint8, device="cuda")
            flops = 2.5 * 4.0 * B * H * S * S * d / (2 if causal else 1)

            # SDPA's gradients on the same q, k, v, dout: the check for flashc
            qt, kt, vt = (x.transpose(1, 2).detach().requires_grad_() for x in (q, k, v))
            outs = {}
            for name in peers:
                with sdpa_kernel(SDPA[name]):
                    outs[name] = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            outs["flash"].backward(dout.transpose(1, 2), retain_graph=True)
            ref = [x.grad.transpose(1, 2).clone() for x in (qt, kt, vt)]

            line = []
            for name in tuple(configs) + tuple(peers):
                r = {"part": part, "S": S, "B": B, "H": H, "d": d, "causal": causal, "impl": name}
                try:
                    if name.startswith("flashc"):
                        bq, bk, det = FLASHC_CONFIGS[name][:3]
                        family_env(FLASHC_CONFIGS[name])
                        pb = params(causal, stream, det, ws.data_ptr(), n.value)
                        pb.block_q, pb.block_k = bq, bk

                        def fn(pb=pb):
                            s = bwd(ctypes.byref(pb), *refs, None)
                            if s != 0:
                                raise RuntimeError(lib.flashc_last_error().decode())
                        dq.fill_(float("nan"))
                        fn()
                        torch.cuda.synchronize()
                        # FLASHC_CUDA_BWD_NO_DQ (cfg[8], a diagnostic) leaves dQ zero: dK, dV
                        # checked alone
                        cfg = FLASHC_CONFIGS[name]
                        nodq = len(cfg) > 8 and cfg[8] != ""
                        pairs = list(zip((dq, dk, dv), ref))[1 if nodq else 0:]
                        diff = max(((g.float() - w.float()).abs().max() / w.float().abs().max()).item()
                                   for g, w in pairs)
                        r["rel_diff_vs_sdpa_flash"] = diff
                        if not (math.isfinite(diff) and diff < 5e-2):
                            r["status"] = "WRONG"
                            raise ValueError(f"differs from SDPA flash by {diff:.3g}")
                    else:
                        out = outs[name]

                        def fn(out=out):
                            for x in (qt, kt, vt):
                                x.grad = None
                            out.backward(dout.transpose(1, 2), retain_graph=True)
                    r["ms"] = median_ms(fn, min_calls=10, budget_ms=BUDGET_MS, warmup=5)
                    r["tflops"] = flops / (r["ms"] * 1e-3) / 1e12
                    r["status"] = "ok"
                    line.append(f"{name} {r['tflops']:6.1f}")
                except (RuntimeError, ValueError) as e:
                    r.setdefault("status", "error")
                    r["error"] = str(e)[:200]
                    line.append(f"{name} {r['status']}")
                rows.append(r)
            family_env(())
            print(f"causal={int(causal)} S={S:5d} B={B:2d} | " + " | ".join(line), flush=True)
            del q, k, v, dout, o, lse, dq, dk, dv, ws, qt, kt, vt, outs, ref
            torch.cuda.empty_cache()


def tables(rows):
    p1 = [r for r in rows if r["part"] == 1]
    if p1:
        impls = ["flashc", "flashc_det", "math", "flash", "mem_eff", "cudnn"]
        print("\nfwd+bwd causal B=4 H=16 d=64 bf16: median ms / peak GiB (torch.cuda.max_memory_allocated)")
        print("| T | " + " | ".join(impls) + " |")
        print("|---|" + "---|" * len(impls))
        for T in sorted({r["T"] for r in p1}):
            cells = []
            for i in impls:
                r = next((x for x in p1 if x["T"] == T and x["impl"] == i), None)
                if r is None:
                    cells.append("-")
                elif r["status"] == "ok":
                    cells.append(f"{r['ms']:.2f} / {r['peak_gib']:.2f}")
                else:
                    cells.append(r["status"])
            print(f"| {T} | " + " | ".join(cells) + " |")
    p3 = [r for r in rows if r["part"] == 3]
    if p3:
        print("\nladder: bwd alone, batch*seqlen=16k, hidden 2048, bf16: TFLOP/s by tiles (block_q x block_k)")
        impls = sorted({r["impl"] for r in p3}, key=lambda n: (not n.startswith("flashc"), n))
        print("| d | causal | S | " + " | ".join(impls) + " |")
        print("|---|---|---|" + "---|" * len(impls))
        for key in sorted({(r["d"], r["causal"], r["S"]) for r in p3}):
            get = {r["impl"]: r for r in p3 if (r["d"], r["causal"], r["S"]) == key}
            print(f"| {key[0]} | {'yes' if key[1] else 'no'} | {key[2]} | " +
                  " | ".join(f"{get[i]['tflops']:.0f}" if i in get and "tflops" in get[i]
                             else get.get(i, {}).get("status", "-") for i in impls) + " |")
    p2 = [r for r in rows if r["part"] == 2]
    if p2:
        impls = [i for i in ["flashc", "flashc_det", "flashc_sm80", "flashc_sm80_det", "flash", "cudnn"]
                 if any(r["impl"] == i for r in p2)]
        print("\nbwd alone H=16 B*S=16k bf16: TFLOP/s (median); flashc = the dispatcher's choice "
              "(sm90 at d 128 on an H200); ratios flashc / SDPA flash, flashc / cuDNN, det / fast")
        print("| d | causal | S | " + " | ".join(impls) + " | /flash | /cuDNN | det/fast |")
        print("|---|---|---|" + "---|" * (len(impls) + 3))
        for d in sorted({r["d"] for r in p2}, reverse=True):
            for causal in (False, True):
                for S in sorted({r["S"] for r in p2}):
                    get = {r["impl"]: r for r in p2 if r["S"] == S and r["causal"] == causal and r["d"] == d}
                    if not get:
                        continue
                    t = {i: get[i].get("tflops", float("nan")) if i in get else float("nan") for i in impls}
                    print(f"| {d} | {'yes' if causal else 'no'} | {S} | " +
                          " | ".join(f"{t[i]:.0f}" if not math.isnan(t[i]) else get.get(i, {}).get("status", "-")
                                     for i in impls) +
                          f" | {t['flashc'] / t['flash']:.2f} | {t['flashc'] / t['cudnn']:.2f} |"
                          f" {t.get('flashc_det', float('nan')) / t['flashc']:.2f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--part", default="1,2", help="1 fwd+bwd (seeds), 2 bwd TFLOP/s, 3 tile ladder")
    ap.add_argument("--seqlens1", default="1024,2048,4096,8192,16384")
    ap.add_argument("--seqlens2", default="1024,2048,4096,8192,16384")
    ap.add_argument("--seqlens3", default="2048,16384", help="the tile ladder (part 3)")
    ap.add_argument("--dims2", default="128", help="head dims of part 2")
    ap.add_argument("--configs2", default="flashc,flashc_det,flashc_sm80,flashc_sm80_det",
                    help="flashc configurations of part 2 (FLASHC_CONFIGS); at d != 128 the sm80 "
                         "ones are left out (the dispatcher's choice is sm80 there)")
    ap.add_argument("--budget-ms", type=float, default=300.0,
                    help="parts 2 and 3: time per configuration (>= 10 calls, at most 50)")
    a = ap.parse_args()
    global BUDGET_MS
    BUDGET_MS = a.budget_ms
    os.environ["FLASHC_LIBRARY"] = os.path.abspath(a.lib)
    lib = ctypes.CDLL(a.lib)
    lib.flashc_last_error.restype = ctypes.c_char_p
    lib.flashc_build_info.restype = ctypes.c_char_p
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; flashc {lib.flashc_build_info().decode()}",
          flush=True)
    rows = []
    parts = a.part.split(",")
    try:
        if "1" in parts:
            part1([int(x) for x in a.seqlens1.split(",")], rows)
        if "2" in parts:
            configs = tuple(a.configs2.split(","))
            for d in (int(x) for x in a.dims2.split(",")):
                part2(lib, [int(x) for x in a.seqlens2.split(",")], rows, d=d,
                      configs=configs if d == 128 else tuple(c for c in configs if "sm80" not in c))
        if "3" in parts:
            FLASHC_CONFIGS.update({"flashc_64x64": (64, 64, False), "flashc_128x128": (128, 128, False)})
            seq3 = [int(x) for x in a.seqlens3.split(",")]
            part2(lib, seq3, rows, d=128, configs=("flashc", "flashc_64x64"), peers=("flash",), part=3)
            part2(lib, seq3, rows, d=64, configs=("flashc", "flashc_128x128"), peers=("flash",), part=3)
    finally:
        if a.out:
            with open(a.out, "w") as fh:
                json.dump({"device": dev.name, "torch": torch.__version__,
                           "cudnn": torch.backends.cudnn.version(),
                           "flashc": lib.flashc_build_info().decode(), "rows": rows}, fh, indent=1)
        tables(rows)
    return 1 if any(r.get("status") == "WRONG" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
