#!/usr/bin/env python3
"""Issue 11, helper fwd25: two knobs of the sm90 forward (read by the library on every call),
each off by default, against today's default and SDPA cuDNN, in one process.

  FLASHC_CUDA_SM90_HGEVEN=1  the causal tile order's head groups (block_coords) sized so that the
      last is not a small remainder (attn.cu, sm90_even_head_group: at the bench's shapes the
      largest power of two <= head_group, e.g. 16 instead of 20 at d 128 2k). Why: the dynamic
      scheduler ends well only if the last tiles it hands out are short; a remainder group of a
      few heads starts its full-length tiles when every multiprocessor is near the end, and those
      few run alone. A list-scheduling count ((blocks + 1) per tile, 132 multiprocessors) gives
      +2.7 / +4.7 / +5.5 % at d 128 causal 2k / 4k / 8k, +1.0 / 1.6 / 1.6 / 1.8 % at d 64 causal
      2k / 4k / 8k / 16k (d 128 16k: 16 pairs in groups of 2, unchanged: a control).
  FLASHC_CUDA_SM90_SKIPDEAD=1  on v7's shape (d 64, BM 192) a consumer warpgroup whose rows are
      all past Sq (or all < 0 in the first end-aligned causal tile) issues no product. Why: at
      d 64 non-causal 2k / 4k the last Q tile of every head has 128 / 64 live rows of 192 (3 % of
      the rows computed are never stored); the count above gives 1.4-3 % at 2k and 4k.

Cells: bf16, B x S = 16384, H = 2048 // d (bench_fwd11.py's convention): d 128 causal 2k, 4k,
8k, 16k (16 pairs in groups of 2: no remainder, the knob changes nothing, a control); d 64
causal 2k, 4k, 8k, 16k (count: +1.8 % at 16k); d 64 non-causal 2k, 4k. Settings, each on the
same inputs and the dispatcher's default kernel: off (both knobs 0: today's default), even, skip, both; cudnn (SDPA
cuDNN); SDPA flash is the reference of the check only (not timed). Every flashc setting is
checked first against SDPA flash (max |diff| < 2e-2, NaN fails) and against off (the knobs move
no value: max |diff| must be 0, since a tile's arithmetic does not depend on where or when it
runs, and a dead consumer's rows are never stored). Times: CUDA events around back-to-back calls
(~rep-ms of work), the median of --rounds interleaved rounds (off, even, skip, both, cudnn in
turn). The table: TFLOP/s (4 B H S^2 d, halved under the mask), each setting / off (off's time
over its own: > 1 is a gain), x cuDNN (cuDNN's time over its own).

usage: bench_fwd25.py --lib build/libflashc.so [--rounds 7] [--rep-ms 20] [--out fwd25.json]
"""
import argparse
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
from bench_sdpa import Flashc  # noqa: E402

SETTINGS = {"off": ("0", "0"), "even": ("1", "0"), "skip": ("0", "1"), "both": ("1", "1")}
CELLS = [(128, True, 2048), (128, True, 4096), (128, True, 8192), (128, True, 16384),
         (64, True, 2048), (64, True, 4096), (64, True, 8192), (64, True, 16384),
         (64, False, 2048), (64, False, 4096)]


def use(name):
    even, skip = SETTINGS[name]
    os.environ["FLASHC_CUDA_SM90_HGEVEN"] = even
    os.environ["FLASHC_CUDA_SM90_SKIPDEAD"] = skip


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rep-ms", type=float, default=20)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    os.environ.pop("FLASHC_CUDA_KERNEL", None)  # the dispatcher's default (read once)
    fc = Flashc(a.lib)
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}; "
          f"flashc {fc.lib.flashc_build_info().decode()}", flush=True)
    rows, bad = [], 0
    for d, causal, S in CELLS:
        B = 16384 // S
        torch.manual_seed(d * 7 + S + causal)
        q, k, v, o, lse, H = make_case(d, S, S, B, causal)
        fns = {n: flashc_fn(fc, q, k, v, o, lse, causal) for n in SETTINGS}
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def peer(backend):
            def call():
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
            return call
        ref = peer(SDPBackend.FLASH_ATTENTION)().transpose(1, 2).float()
        outs, diffs = {}, {}
        for n in SETTINGS:
            use(n)
            o.fill_(float("nan"))
            fns[n]()
            torch.cuda.synchronize()
            outs[n] = o.clone()
            diffs[n] = (o.float() - ref).abs().max().item()
        for n in ("even", "skip", "both"):
            diffs[n + "-off"] = (outs[n].float() - outs["off"].float()).abs().max().item()
        fns["cudnn"] = peer(SDPBackend.CUDNN_ATTENTION)
        try:
            diffs["cudnn"] = (fns["cudnn"]().transpose(1, 2).float() - ref).abs().max().item()
        except RuntimeError as e:  # a backend that refuses the shape: not timed
            fns.pop("cudnn")
            print(f"  cudnn: {str(e)[:120]}", flush=True)
        wrong = [n for n in SETTINGS if not (math.isfinite(diffs[n]) and diffs[n] < 2e-2)]
        wrong += [n + "-off" for n in ("even", "skip", "both") if diffs[n + "-off"] != 0.0]
        if wrong:
            bad += 1
            print(f"d {d} S {S} causal {causal}: WRONG {wrong} {diffs}", flush=True)
        times = {n: [] for n in fns}
        for _ in range(a.rounds):
            for n, fn in fns.items():
                if n in SETTINGS:
                    use(n)
                times[n].append(time_ms(fn, a.rep_ms))
        for var in ("FLASHC_CUDA_SM90_HGEVEN", "FLASHC_CUDA_SM90_SKIPDEAD"):
            os.environ.pop(var, None)
        ms = {n: sorted(t)[len(t) // 2] for n, t in times.items()}
        flops = 4.0 * B * H * S * S * d / (2 if causal else 1)
        r = {"d": d, "S": S, "B": B, "H": H, "causal": causal, "flops": flops, "ms": ms,
             "ms_all": times, "maxdiff": diffs}
        rows.append(r)
        tf = {n: flops / m / 1e9 for n, m in ms.items()}
        print(f"d {d:3} S {S:5} causal {int(causal)}: " +
              ", ".join(f"{n} {tf[n]:.0f}" for n in ms) + " TFLOP/s; /off " +
              ", ".join(f"{n} {ms['off'] / ms[n]:.3f}" for n in ("even", "skip", "both")) +
              "; maxdiff " + ", ".join(f"{n} {x:.1e}" for n, x in diffs.items()), flush=True)
        del q, k, v, o, lse, qt, kt, vt, ref, outs, fns
        torch.cuda.empty_cache()
    print("\n| d | causal | S | off TF | even TF | skip TF | both TF | cuDNN TF | even/off | "
          "skip/off | both/off | off x cuDNN | both x cuDNN |")
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for r in rows:
        ms, f = r["ms"], r["flops"]
        tf = lambda n: f"{f / ms[n] / 1e9:.0f}" if n in ms else "-"  # noqa: E731
        xc = lambda n: f"{ms['cudnn'] / ms[n]:.3f}" if "cudnn" in ms else "-"  # noqa: E731
        print(f"| {r['d']} | {'yes' if r['causal'] else 'no'} | {r['S']} | {tf('off')} | "
              f"{tf('even')} | {tf('skip')} | {tf('both')} | {tf('cudnn')} | "
              f"{ms['off'] / ms['even']:.3f} | {ms['off'] / ms['skip']:.3f} | "
              f"{ms['off'] / ms['both']:.3f} | {xc('off')} | {xc('both')} |")
    print(f"(bf16, B x S = 16384, H = 2048 // d; TFLOP/s; ratios of time, median of {a.rounds} "
          f"interleaved rounds; {dev})")
    if a.out:
        json.dump(rows, open(a.out, "w"), indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
