#!/usr/bin/env python3
"""bench/py_call_overhead.py — what one call through the Python binding costs at a tiny shape,
where the library's own work is a few microseconds: flash_attn_func, flash_attn_backward and
flash_attn_with_kvcache (decode, one query row) on CPU tensors (torch if installed, else numpy),
each timed alone: one warm-up of 200 calls, then the median of --calls timed calls.

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/py_call_overhead.py

Pins itself to cores 0 .. threads-1 (--threads, default 2).
"""
import argparse
import os
import statistics
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--calls", type=int, default=3000)
ap.add_argument("--n", type=int, default=16)
ap.add_argument("--numpy", action="store_true", help="numpy arrays even where torch is installed")
args = ap.parse_args()
try:
    os.sched_setaffinity(0, set(range(args.threads)))
except (AttributeError, OSError):
    pass

import numpy as np  # noqa: E402

import flashc  # noqa: E402
from flashc import attention  # noqa: E402

torch = None
if not args.numpy:
    try:
        import torch  # noqa: E402

        torch.set_num_threads(args.threads)
    except ImportError:
        torch = None
flashc.set_num_threads(args.threads)


def median_us(fn):
    for _ in range(200):
        fn()
    ts = []
    for _ in range(args.calls):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts) * 1e6


rng = np.random.default_rng(0)
n, H, d = args.n, 8, 64
x = [rng.standard_normal((1, n, H, d), dtype=np.float32) for _ in range(4)]
kc = rng.standard_normal((1, 256, H, d), dtype=np.float32)
if torch is not None:
    x = [torch.from_numpy(a).to(torch.bfloat16) for a in x]
    kc = torch.from_numpy(kc).to(torch.bfloat16)
    seqlens = torch.tensor([200], dtype=torch.int32)
else:
    seqlens = np.array([200], dtype=np.int32)
q, k, v, do = x
out, lse = attention.attention_forward(q, k, v, causal=True)
q1 = q[:, :1]
rows = [
    ("flash_attn_func", lambda: attention.flash_attn_func(q, k, v, causal=True)),
    ("flash_attn_backward", lambda: attention.flash_attn_backward(do, q, k, v, out, lse,
                                                                  causal=True)),
    ("flash_attn_with_kvcache", lambda: attention.flash_attn_with_kvcache(
        q1, kc, kc, cache_seqlens=seqlens, causal=True)),
]
kind = f"torch {torch.__version__} bf16" if torch is not None else "numpy float32"
print(f"# flashc {flashc.build_info()}; {kind}; threads {args.threads}; n {n}, 8 heads, d 64")
print("| call | median us |")
print("|---|--:|")
for name, fn in rows:
    print(f"| {name} | {median_us(fn):.1f} |", flush=True)
