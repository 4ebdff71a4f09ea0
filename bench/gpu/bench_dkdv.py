#!/usr/bin/env python3
"""Issue 11, helper fwd20: dense Dk != Dv (MLA's prefill, q/k 192, v/o 128) on the sm90 kernels
(FLASHC_CUDA_SM90_DKDV=1: the d 192 default, sm90v6hw, with the V and O tensor maps 128 wide)
against the route before it (=0: the sm80 kernel's mods instance of d 192, the narrower side
zero-padded in shared memory) and SDPA's backends that take Dk != Dv, on the same inputs.

Cells: bf16, D/Dv 192/128, 16 heads (MHA, as MLA's prefill), seqlen 2k and 8k (B = 16384 / S),
causal and not. The library reads FLASHC_CUDA_SM90_DKDV on every call, so both flashc routes
run in this one process (each call sets it). Each flashc route is checked against the first
SDPA backend that serves the shape (max |o - SDPA| < 2e-2, twice; NaN fails), and the tiles it
reports must be its kernel's (sm90v6hw: 128 x 80; sm80: 128 x 64). Times: triton's do_bench
(256 MB L2 flush before each call; median) in --rounds interleaved rounds (median of the
rounds), and the CUPTI kernel time of 10 back-to-back calls (bench_fwd11.add_trace, which also
names the kernel launched). TFLOP/s count 2 B H Sq Sk (D + Dv) (halved under the mask).

usage: bench_dkdv.py --lib build/libflashc.so [--rep-ms 20] [--rounds 3] [--out dkdv.json]
"""
import argparse
import ctypes
import json
import math
import os
import sys

import torch
from torch.nn.attention import SDPBackend
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sdpa import Flashc, Stats, params, view  # noqa: E402
from bench_fwd11 import add_trace, sdpa_fn  # noqa: E402

H, D, DV = 16, 192, 128
TILES = {"flashc_sm90": (128, 80), "flashc_sm80": (128, 64)}  # what each route reports
ENV = {"flashc_sm90": "1", "flashc_sm80": "0"}  # FLASHC_CUDA_SM90_DKDV
SDPA = (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION),
        ("efficient", SDPBackend.EFFICIENT_ATTENTION))


def flashc_fn(fc, name, q, k, v, o, lse, causal):
    """flashc's forward with FLASHC_CUDA_SM90_DKDV set for this route at each call; the stats
    of the last call stay in run.stats."""
    p = params(causal, None)
    args = [ctypes.byref(x) for x in (p, view(q), view(k), view(v), view(o), view(lse))]
    stats = Stats()
    stats.struct_size = ctypes.sizeof(Stats)
    fwd = fc.lib.flashc_attn_fwd

    def run():
        os.environ["FLASHC_CUDA_SM90_DKDV"] = ENV[name]
        p.cuda_stream = torch.cuda.current_stream().cuda_stream
        st = fwd(*args, ctypes.byref(stats))
        if st != 0:
            raise RuntimeError(f"flashc_attn_fwd: {st}: {fc.lib.flashc_last_error().decode()}")
    run.stats = stats
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rep-ms", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seqlens", default="2048,8192")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.pop("FLASHC_CUDA_KERNEL", None)  # the dispatcher's choice
    fc = Flashc(a.lib)
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; flashc {fc.lib.flashc_build_info().decode()}",
          flush=True)
    torch.manual_seed(0)
    rows, ok_all = [], True
    for S in (int(s) for s in a.seqlens.split(",")):
        for causal in (False, True):
            B = 16384 // S
            q = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16)
            k = torch.randn(B, S, H, D, device="cuda", dtype=torch.bfloat16)
            v = torch.randn(B, S, H, DV, device="cuda", dtype=torch.bfloat16)
            o = torch.empty(B, S, H, DV, device="cuda", dtype=torch.bfloat16)
            lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
            cell = f"S={S} B={B}{' causal' if causal else ''}"
            fns, ref = {}, None
            for n, be in SDPA:  # the backends that take Dk != Dv; the first is the reference
                f = sdpa_fn(be, q, k, v, causal)
                try:
                    out = f()
                    torch.cuda.synchronize()
                except RuntimeError as e:
                    print(f"{cell}: SDPA {n} left out: {str(e).splitlines()[0][:140]}",
                          flush=True)
                    continue
                fns[n] = f
                if ref is None:
                    ref = out.transpose(1, 2).float()
            r = {"Sq": S, "Sk": S, "B": B, "H": H, "D": D, "Dv": DV, "causal": causal,
                 "flops": 2.0 * B * H * S * S * (D + DV) / (2 if causal else 1)}
            for n in ENV:
                f = flashc_fn(fc, n, q, k, v, o, lse, causal)
                diffs = []
                for _ in range(2):
                    o.fill_(float("nan"))
                    f()
                    torch.cuda.synchronize()
                    diffs.append((o.float() - ref).abs().max().item() if ref is not None
                                 else (0.0 if torch.isfinite(o).all() else float("nan")))
                tiles = (f.stats.block_q, f.stats.block_k)
                good = all(math.isfinite(x) and x < 2e-2 for x in diffs) and tiles == TILES[n]
                r[n] = {"maxdiff": max(diffs), "tiles": list(tiles)}
                if not good:
                    print(f"{cell}: {n} WRONG (max |o - SDPA| {max(diffs):.3g}, tiles "
                          f"{tiles[0]}x{tiles[1]}, want {TILES[n][0]}x{TILES[n][1]})",
                          flush=True)
                    ok_all = False
                    continue
                fns[n] = f
            per = {n: [] for n in fns}
            for _ in range(a.rounds):  # interleaved, so that drift hits all alike
                for n, f in fns.items():
                    per[n].append(triton.testing.do_bench(f, warmup=5, rep=a.rep_ms,
                                                          return_mode="median"))
            for n in fns:
                t = sorted(per[n])
                r.setdefault(n, {})["flush"] = (t[(len(t) - 1) // 2] + t[len(t) // 2]) / 2
            add_trace(r, fns, 10)
            os.environ.pop("FLASHC_CUDA_SM90_DKDV", None)
            rows.append(r)
            print(f"{cell}: " + "  ".join(
                f"{n} {r[n]['flush'] * 1e3:.1f}us"
                + (f"/{r[n]['kern_us']:.1f}us" if "kern_us" in r[n] else "") for n in fns),
                flush=True)
            for n in fns:
                if "main" in r[n]:
                    print(f"    {n}: {r[n]['main']} | {r[n]['launch']}", flush=True)
            del q, k, v, o, lse, ref, fns
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": dev.name, "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "rows": rows}, fh, indent=1)
    report(rows)
    return 0 if ok_all else 1


def report(rows):
    """Per cell and implementation: TFLOP/s under the flush and in kernel time; sm90/sm80 (the
    sm80 route's time / the sm90 route's: > 1, the sm90 route is faster) and each flashc route
    against cuDNN (cuDNN's time / its own). Then the rule's verdict."""
    g = lambda r, n, k: r.get(n, {}).get(k)
    tf = lambda r, ms: r["flops"] / (ms * 1e-3) / 1e12 if ms else float("nan")
    q = lambda x, y: x / y if x and y else float("nan")
    print("\n| S | causal | impl | flush TF | kernel TF | sm80/sm90 flush | kernel "
          "| /cuDNN flush | /cuDNN kernel |")
    print("|---" * 9 + "|")
    worst = float("inf")
    for r in rows:
        for n in ("flashc_sm90", "flashc_sm80", "cudnn", "flash", "efficient"):
            if g(r, n, "flush") is None:
                continue
            fl, ke = g(r, n, "flush"), g(r, n, "kern_us")
            own, s9 = n.startswith("flashc"), n == "flashc_sm90"
            rf, rk = q(g(r, "flashc_sm80", "flush"), fl), q(g(r, "flashc_sm80", "kern_us"), ke)
            if s9:
                worst = min(worst, rf, rk) if math.isfinite(rf) and math.isfinite(rk) else -1.0
            cf, ck = q(g(r, "cudnn", "flush"), fl), q(g(r, "cudnn", "kern_us"), ke)
            vs80 = f"{rf:.3f} | {rk:.3f}" if s9 else " | "
            vscu = f"{cf:.3f} | {ck:.3f}" if own else " | "
            print(f"| {r['Sq']} | {int(r['causal'])} | {n} | {tf(r, fl):.0f} | "
                  f"{tf(r, ke / 1e3 if ke else None):.0f} | {vs80} | {vscu} |")
    cells = sum(1 for r in rows if g(r, "flashc_sm90", "flush"))
    verdict = ("sm90 route by default (SM90_DKDV_DEFAULT = 1)"
               if cells == 4 and worst >= 1.03 else "keep it opt-in")
    print(f"\nrule: sm90 >= 1.03x sm80 (flush and kernel) in every cell of 4: "
          f"{cells} cells measured, worst {worst:.3f} -> {verdict}")


if __name__ == "__main__":
    sys.exit(main())
