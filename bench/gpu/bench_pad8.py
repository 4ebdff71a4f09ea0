#!/usr/bin/env python3
"""Issue 11: head dims D % 8 != 0 on the sm90 forward (rows pitched to 16 bytes, the copy engine's
zeros past D; attn_fwd_sm90.cu, "Padded head dims"), against the sm80 kernel they went to before.

Cells: bf16, D 111 (into the d 128 kernels) and 250 (d 256), S 2048 and 8192, B = 16384 / S,
H = 2048 // D, causal and not. Inputs are views of (B, S, H, P) buffers, P = D rounded up to 8
(what flash_attn_func's binding hands the library for such D). Implementations, each on the same
inputs in this one process:
  flashc      the dispatcher's choice (sm90 padded on an H200 since this change);
  flashc80    a second library instance with FLASHC_CUDA_KERNEL=sm80 (the route before);
  fa2pad      SDPA flash (FA2) on copies zero-padded to P columns (what a user without flashc
              does; the copy is not timed, only the attention call);
  cudnnpad    SDPA cuDNN on the same padded copies.
Each flashc instance is checked first against SDPA's float32 math on the views (max |diff| < 2e-2,
NaN fails). Times: CUDA events over back-to-back calls (~rep-ms of work), the median of --rounds
interleaved rounds. The table gives TFLOP/s (4 B H S^2 D, halved under the mask) and the ratio
of flashc80's time to flashc's ("90/80") and of the peers' to flashc's.

usage: bench_pad8.py --lib build/libflashc.so [--rounds 3] [--rep-ms 25] [--out pad8.json]
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_fwd11 import flashc_fn  # noqa: E402
from bench_sdpa import Flashc, Stats  # noqa: E402


def time_ms(fn, rep_ms):
    """ms per call: CUDA events around n back-to-back calls, n sized to ~rep_ms."""
    fn()
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn()
    b.record()
    torch.cuda.synchronize()
    n = max(3, min(200, int(rep_ms / max(a.elapsed_time(b), 1e-3))))
    a.record()
    for _ in range(n):
        fn()
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rep-ms", type=float, default=25)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    libs = {"flashc": Flashc(a.lib), "flashc80": Flashc(a.lib, kernel="sm80")}
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"flashc {libs['flashc'].lib.flashc_build_info().decode()}", flush=True)
    rows, bad = [], 0
    for d in (111, 250):
        for S in (2048, 8192):
            for causal in (False, True):
                B, H, P = 16384 // S, 2048 // d, (d + 7) // 8 * 8
                torch.manual_seed(d * 7 + S + causal)
                base = [torch.randn(B, S, H, P, device="cuda", dtype=torch.bfloat16)
                        for _ in range(3)]
                for t in base:
                    t[..., d:] = float("nan")  # the pitch's padding: must never be read
                q, k, v = (t[..., :d] for t in base)
                obuf = torch.full((B, S, H, P), float("nan"), device="cuda", dtype=torch.bfloat16)
                o = obuf[..., :d]
                lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
                padded = [torch.nn.functional.pad(x, (0, P - d)).contiguous() for x in (q, k, v)]
                ref = F.scaled_dot_product_attention(
                    *(x.transpose(1, 2).float() for x in (q, k, v)), is_causal=causal,
                    scale=1.0 / math.sqrt(d)).transpose(1, 2)
                stats = {n: Stats() for n in libs}
                for s in stats.values():
                    s.struct_size = ctypes.sizeof(Stats)
                fns = {n: flashc_fn(fc, q, k, v, o, lse, causal, stats[n])
                       for n, fc in libs.items()}
                # SDPA on the padded copies: its default scale would be 1/sqrt(P); pass 1/sqrt(d)
                qp, kp, vp = (x.transpose(1, 2) for x in padded)

                def peer(backend):
                    def run():
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(qp, kp, vp, is_causal=causal,
                                                                  scale=1.0 / math.sqrt(d))
                    return run
                fns["fa2pad"], fns["cudnnpad"] = (peer(SDPBackend.FLASH_ATTENTION),
                                                  peer(SDPBackend.CUDNN_ATTENTION))
                diffs = {}
                for n in libs:
                    o.fill_(float("nan"))
                    fns[n]()
                    torch.cuda.synchronize()
                    diffs[n] = (o.float() - ref).abs().max().item()
                for n in ("fa2pad", "cudnnpad"):
                    try:
                        out = fns[n]().transpose(1, 2)[..., :d]
                        diffs[n] = (out.float() - ref).abs().max().item()
                    except RuntimeError as e:  # a backend that refuses the shape
                        diffs[n] = None
                        fns.pop(n)
                        print(f"  {n}: {str(e)[:120]}", flush=True)
                wrong = [n for n in libs if not (math.isfinite(diffs[n]) and diffs[n] < 2e-2)]
                pad_written = torch.isnan(obuf[..., d:]).logical_not().sum().item() if P > d else 0
                if wrong or pad_written:
                    bad += 1
                    print(f"d {d} S {S} causal {int(causal)}: WRONG {wrong} {diffs}; "
                          f"{pad_written} padding elements written", flush=True)
                times = {n: [] for n in fns}
                for _ in range(a.rounds):
                    for n, fn in fns.items():
                        times[n].append(time_ms(fn, a.rep_ms))
                ms = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
                flops = 4.0 * B * H * S * S * d / (2 if causal else 1)
                r = {"d": d, "S": S, "B": B, "H": H, "causal": causal, "flops": flops,
                     "ms": ms, "maxdiff": diffs,
                     "tiles": {n: f"{stats[n].block_q}x{stats[n].block_k}" for n in libs}}
                rows.append(r)
                tf = {n: flops / m / 1e9 for n, m in ms.items()}
                print(f"d {d:3} S {S:5} causal {int(causal)}: " +
                      ", ".join(f"{n} {tf[n]:.0f}" for n in ms) +
                      f" TFLOP/s; tiles {r['tiles']}; maxdiff " +
                      ", ".join(f"{n} {x:.1e}" for n, x in diffs.items() if x is not None),
                      flush=True)
    print("\n| d | causal | S | flashc | flashc80 | FA2 padded | cuDNN padded | 90/80 | "
          "x FA2 | x cuDNN | tiles (flashc / sm80) |")
    print("|---|---|---|--:|--:|--:|--:|--:|--:|--:|---|")
    for r in rows:
        ms, f = r["ms"], r["flops"]
        tf = lambda n: f"{f / ms[n] / 1e9:.0f}" if n in ms else "-"  # noqa: E731
        ra = lambda n: f"{ms[n] / ms['flashc']:.2f}" if n in ms else "-"  # noqa: E731
        print(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['S']} | {tf('flashc')} | "
              f"{tf('flashc80')} | {tf('fa2pad')} | {tf('cudnnpad')} | {ra('flashc80')} | "
              f"{ra('fa2pad')} | {ra('cudnnpad')} | {r['tiles']['flashc']} / "
              f"{r['tiles']['flashc80']} |")
    print(f"(bf16, B x S = 16384, H = 2048 // d, rows pitched to d rounded up to 8; TFLOP/s; "
          f"ratios of time; {dev})")
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
