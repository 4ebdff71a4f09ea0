#!/usr/bin/env python3
"""Issue 11, helper fwd24: the sm90 forward's causal Q tiles aligned to the sequence's end
(attn_fwd_sm90.cu, q_shift; FLASHC_CUDA_SM90_CSHIFT, read by the library on every call) against
the tiles at row 0, on the dispatcher's default kernel, in one process.

Why: with the tiles at row 0 the partial tile (Sq % BM rows) is the last one, which under the
bottom-right causal mask walks every key block; aligned to the end it is the first, which walks
the fewest. At d 64 (v7, BM 192, 128-key blocks) that is 96 instead of 101 block pairs a head at
2k, 363 instead of 384 at 4k (-5 %), about -1.5 % at 8k / 16k. At d 128 (BM 128) and at d 64 1k
(v5, BM 128) every S here is a multiple of BM: nothing moves, the cells are controls.

Cells: bf16, causal, d 64 and 128, S 1024 / 2048 / 4096 / 8192 / 16384, B = 16384 / S,
H = 2048 // d (bench_fwd11.py's convention). Implementations, each on the same inputs:
  off    flashc's default with FLASHC_CUDA_SM90_CSHIFT=0 (tiles at row 0)
  on     the same library with FLASHC_CUDA_SM90_CSHIFT=1
  cudnn  SDPA cuDNN;  flash: SDPA flash (FA2), the reference of the check
Each flashc setting is checked first against SDPA flash (max |diff| < 2e-2, NaN fails) and on
against off. Times: CUDA events around back-to-back calls (~rep-ms of work), the median of
--rounds interleaved rounds (off, on, cudnn, flash in turn). The table: TFLOP/s (4 B H S^2 d / 2),
on/off (off's time / on's: > 1 is a gain), each flashc setting x cuDNN (cuDNN's time / its own),
and the (Q tile, K block) pairs each setting reports (flashc_attn_stats.tile_pairs).

usage: bench_cshift.py --lib build/libflashc.so [--rounds 5] [--rep-ms 25] [--out cshift.json]
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
from bench_fwd11 import flashc_fn, make_case  # noqa: E402
from bench_pad8 import time_ms  # noqa: E402
from bench_sdpa import Flashc, Stats  # noqa: E402

VAR = "FLASHC_CUDA_SM90_CSHIFT"
SETTINGS = {"off": "0", "on": "1"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rep-ms", type=float, default=25)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.pop("FLASHC_CUDA_KERNEL", None)  # the dispatcher's default (read once)
    fc = Flashc(a.lib)
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"flashc {fc.lib.flashc_build_info().decode()}", flush=True)
    rows, bad = [], 0
    for d in (64, 128):
        for S in (1024, 2048, 4096, 8192, 16384):
            B = 16384 // S
            torch.manual_seed(d * 7 + S)
            q, k, v, o, lse, H = make_case(d, S, S, B, True)
            stats = {n: Stats() for n in SETTINGS}
            for s in stats.values():
                s.struct_size = ctypes.sizeof(Stats)
            # one call each; the variable is set before a setting's calls (read per call)
            fns = {n: flashc_fn(fc, q, k, v, o, lse, True, stats[n]) for n in SETTINGS}
            qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

            def peer(backend):
                def call():
                    with sdpa_kernel(backend):
                        return F.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
                return call
            fns["cudnn"], fns["flash"] = (peer(SDPBackend.CUDNN_ATTENTION),
                                          peer(SDPBackend.FLASH_ATTENTION))
            ref = fns["flash"]().transpose(1, 2).float()
            outs, diffs = {}, {}
            for n, val in SETTINGS.items():
                os.environ[VAR] = val
                o.fill_(float("nan"))
                fns[n]()
                torch.cuda.synchronize()
                outs[n] = o.clone()
                diffs[n] = (o.float() - ref).abs().max().item()
            diffs["on-off"] = (outs["on"].float() - outs["off"].float()).abs().max().item()
            try:
                diffs["cudnn"] = (fns["cudnn"]().transpose(1, 2).float() - ref).abs().max().item()
            except RuntimeError as e:  # a backend that refuses the shape: not timed
                fns.pop("cudnn")
                print(f"  cudnn: {str(e)[:120]}", flush=True)
            wrong = [n for n in ("off", "on", "on-off")
                     if not (math.isfinite(diffs[n]) and diffs[n] < 2e-2)]
            if wrong:
                bad += 1
                print(f"d {d} S {S}: WRONG {wrong} {diffs}", flush=True)
            times = {n: [] for n in fns}
            for _ in range(a.rounds):
                for n, fn in fns.items():
                    if n in SETTINGS:
                        os.environ[VAR] = SETTINGS[n]
                    times[n].append(time_ms(fn, a.rep_ms))
            os.environ.pop(VAR, None)
            ms = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
            flops = 4.0 * B * H * S * S * d / 2
            r = {"d": d, "S": S, "B": B, "H": H, "causal": True, "flops": flops, "ms": ms,
                 "ms_all": times, "maxdiff": diffs,
                 "tiles": {n: f"{stats[n].block_q}x{stats[n].block_k}" for n in SETTINGS},
                 "tile_pairs": {n: stats[n].tile_pairs for n in SETTINGS}}
            rows.append(r)
            tf = {n: flops / m / 1e9 for n, m in ms.items()}
            print(f"d {d:3} S {S:5}: " + ", ".join(f"{n} {tf[n]:.0f}" for n in ms) +
                  f" TFLOP/s; on/off {ms['off'] / ms['on']:.3f}; tiles {r['tiles']['on']}; "
                  f"pairs off {r['tile_pairs']['off']} on {r['tile_pairs']['on']}; maxdiff " +
                  ", ".join(f"{n} {x:.1e}" for n, x in diffs.items()), flush=True)
            del q, k, v, o, lse, qt, kt, vt, ref, outs, fns
            torch.cuda.empty_cache()
    print("\n| d | S | off TF | on TF | cuDNN TF | on/off | off x cuDNN | on x cuDNN | tiles | "
          "pairs off / on |")
    print("|---|--:|--:|--:|--:|--:|--:|--:|---|--:|")
    for r in rows:
        ms, f = r["ms"], r["flops"]
        tf = lambda n: f"{f / ms[n] / 1e9:.0f}" if n in ms else "-"  # noqa: E731
        xc = lambda n: f"{ms['cudnn'] / ms[n]:.3f}" if "cudnn" in ms else "-"  # noqa: E731
        print(f"| {r['d']} | {r['S']} | {tf('off')} | {tf('on')} | {tf('cudnn')} | "
              f"{ms['off'] / ms['on']:.3f} | {xc('off')} | {xc('on')} | {r['tiles']['on']} | "
              f"{r['tile_pairs']['off']} / {r['tile_pairs']['on']} |")
    print(f"(bf16, causal, B x S = 16384, H = 2048 // d; TFLOP/s; ratios of time, median of "
          f"{a.rounds} interleaved rounds; {dev})")
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
