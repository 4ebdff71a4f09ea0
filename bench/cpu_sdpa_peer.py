#!/usr/bin/env python3
"""bench/cpu_sdpa_peer.py — flashc's CPU forward against PyTorch's CPU scaled_dot_product_attention
on the same inputs, in the same process and run, plus a bf16 matmul ceiling (torch.mm).

  taskset is done here: the process pins itself to cores 0 .. threads-1 before torch or flashc
  start a thread, and both get `threads` threads (OMP_NUM_THREADS, torch.set_num_threads,
  flashc.set_num_threads).

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/cpu_sdpa_peer.py \\
      --threads 2 --d 64,128 --n 512,1024,2048,4096,8192 --causal 0,1

Inputs are (batch, heads, seqlen, d) torch tensors (torch's layout); flashc reads the same memory
as (batch, seqlen, heads, d) strided views and writes its output into such a view. Every shape is
timed in interleaved rounds (torch, flashc, torch, flashc ...) after one warm-up call of each; the
table gives medians. GFLOP/s counts 4 d flops per visible (query, key) pair. `err` is the max
|O - O_ref| of each against float32 SDPA on the first two heads (float64 would be slow here).
--flashc-only skips torch (for FLASHC_ISA comparisons in separate processes: the table is chosen
once per process); --tiles BQxBK,... sweeps flashc's block sizes on every shape; --dtype f32 times
float32 inputs. torch must be installed (its own venv on a dev machine; the GPU host has it).
"""
import argparse
import json
import os
import statistics
import sys
import time


def parse():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--d", default="64,128")
    ap.add_argument("--n", default="512,1024,2048,4096,8192")
    ap.add_argument("--causal", default="0,1")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f32"])
    ap.add_argument("--tiles", default="0x0", help="flashc block_q x block_k list (0: library default)")
    ap.add_argument("--flashc-only", action="store_true")
    ap.add_argument("--no-check", action="store_true", help="skip the float32 reference check")
    ap.add_argument("--ceiling-n", type=int, default=4096, help="bf16 matmul ceiling size (0: skip)")
    ap.add_argument("--ceiling-each", action="store_true",
                    help="time the ceiling's torch.mm in every round of every shape too (interleaved "
                         "with flashc and torch): each row's flashc/ceiling is then against the median "
                         "of its own rounds, so a neighbour's load hits both alike")
    ap.add_argument("--json", default="", help="append one JSON line per row to this file")
    ap.add_argument("--label", default="", help="a tag for the rows (e.g. the FLASHC_ISA)")
    ap.add_argument("--cores", default="",
                    help="pin to these cores, e.g. 8,9 (default: 0 .. threads-1)")
    return ap.parse_args()


args = parse()
# Pin and size the thread pools before anything starts one.
os.environ["OMP_NUM_THREADS"] = str(args.threads)
try:
    os.sched_setaffinity(0, {int(c) for c in args.cores.split(",")} if args.cores
                         else set(range(args.threads)))
except (AttributeError, OSError) as e:  # not Linux, or fewer cores than threads
    print(f"# affinity not set: {e}", file=sys.stderr)

import ctypes  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import flashc  # noqa: E402
from flashc import _arrays, _lib  # noqa: E402

torch.set_num_threads(args.threads)
flashc.set_num_threads(args.threads)
LIB = _lib.library()


def flashc_fwd(q, k, v, o, causal, bq, bk):
    """flashc_attn_fwd on (B, H, S, D) tensors through (B, S, H, D) views, into o."""
    p = _lib.new_attn_params() if hasattr(_lib, "new_attn_params") else _lib.AttnParams()
    p.causal = 1 if causal else 0
    p.block_q, p.block_k = bq, bk
    views = [_arrays.view(n, x.transpose(1, 2)) for n, x in (("q", q), ("k", k), ("v", v), ("o", o))]
    st = LIB.flashc_attn_fwd(ctypes.byref(p), views[0].ref, views[1].ref, views[2].ref, views[3].ref, None, None)
    _lib.check(st)


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def pairs(n, causal):
    return n * (n + 1) // 2 if causal else n * n


def ceiling(n, dtype):
    """Median time of torch.mm on n x n x n in dtype: the practical matmul peak of the cores."""
    a = torch.randn(n, n, dtype=dtype)
    b = torch.randn(n, n, dtype=dtype)
    torch.mm(a, b)
    ts = [timed(lambda: torch.mm(a, b)) for _ in range(args.rounds)]
    return 2.0 * n**3 / statistics.median(ts) / 1e9


def main():
    dt = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(0)
    info = flashc.build_info()
    print(f"# flashc {info}; torch {torch.__version__}; threads {args.threads}; "
          f"affinity {sorted(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}")
    ceil = 0.0
    ca = cb = None
    if args.ceiling_n and not args.flashc_only:
        ceil = ceiling(args.ceiling_n, dt)
        print(f"# torch.mm {args.dtype} {args.ceiling_n}^3: {ceil:.0f} GFLOP/s (the ceiling)"
              + ("; per row: the median of its own rounds (--ceiling-each)" if args.ceiling_each else ""))
        if args.ceiling_each:
            ca = torch.randn(args.ceiling_n, args.ceiling_n, dtype=dt)
            cb = torch.randn(args.ceiling_n, args.ceiling_n, dtype=dt)
    tiles = [tuple(int(x) for x in t.split("x")) for t in args.tiles.split(",")]
    hdr = "| label | thr | dtype | d | n | causal | tiles | flashc ms | torch ms | flashc GFLOP/s | torch GFLOP/s | flashc/torch | flashc/ceiling | err flashc | err torch | ceiling GFLOP/s |"
    print(hdr)
    print("|" + "---|" * (hdr.count("|") - 1))
    rows = []
    for d in [int(x) for x in args.d.split(",")]:
        for n in [int(x) for x in args.n.split(",")]:
            for causal in [bool(int(x)) for x in args.causal.split(",")]:
                B, H = args.batch, args.heads
                q = torch.randn(B, H, n, d, dtype=dt)
                k = torch.randn(B, H, n, d, dtype=dt)
                v = torch.randn(B, H, n, d, dtype=dt)
                o = torch.empty(B, H, n, d, dtype=dt)
                flops = 4.0 * d * B * H * pairs(n, causal)
                ref = None
                if not args.no_check:
                    h2 = min(2, H)
                    ref = F.scaled_dot_product_attention(q[:, :h2].float(), k[:, :h2].float(),
                                                         v[:, :h2].float(), is_causal=causal)
                for bq, bk in tiles:
                    run_f = lambda: flashc_fwd(q, k, v, o, causal, bq, bk)  # noqa: E731
                    out_t = [None]

                    def run_t():
                        out_t[0] = F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                    run_f()
                    if not args.flashc_only:
                        run_t()
                    tf, tt, tc = [], [], []
                    for _ in range(args.rounds):
                        if ca is not None:
                            tc.append(timed(lambda: torch.mm(ca, cb)))
                        if not args.flashc_only:
                            tt.append(timed(run_t))
                        tf.append(timed(run_f))
                    ceil_row = 2.0 * args.ceiling_n**3 / statistics.median(tc) / 1e9 if tc else ceil
                    mf = statistics.median(tf)
                    mt = statistics.median(tt) if tt else float("nan")
                    ef = et = float("nan")
                    if ref is not None:
                        h2 = ref.shape[1]
                        ef = (o[:, :h2].float() - ref).abs().max().item()
                        if out_t[0] is not None:
                            et = (out_t[0][:, :h2].float() - ref).abs().max().item()
                    gf, gt = flops / mf / 1e9, flops / mt / 1e9
                    row = dict(label=args.label, threads=args.threads, dtype=args.dtype, d=d, n=n,
                               causal=int(causal), block_q=bq, block_k=bk, flashc_ms=mf * 1e3,
                               torch_ms=mt * 1e3, flashc_gflops=gf, torch_gflops=gt,
                               ratio=mt / mf, of_ceiling=gf / ceil_row if ceil_row else float("nan"),
                               ceiling_gflops=ceil_row, err_flashc=ef, err_torch=et, build=info)
                    rows.append(row)
                    print(f"| {args.label} | {args.threads} | {args.dtype} | {d} | {n} | {int(causal)} | "
                          f"{bq}x{bk} | {mf*1e3:.2f} | {mt*1e3:.2f} | {gf:.0f} | {gt:.0f} | "
                          f"{mt/mf:.2f} | {row['of_ceiling']:.2f} | {ef:.2g} | {et:.2g} | {ceil_row:.0f} |", flush=True)
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
