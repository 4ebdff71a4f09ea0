#!/usr/bin/env python3
"""bench/cpu_bwd_peer.py — the CPU backward in the same run: flashc bf16 with each value of
FLASHC_CPU_BWD_MM in --mm (set around its calls: 1 the matrix units' schedule, 2 the same with P
and dS rounded once, 3 dS alone rounded once, :BRxBC tiles; a trailing +s sets
FLASHC_CPU_BWD_SPLIT=1, the unit's split_cvt (the library's default since 2026-12-04), no +s sets
FLASHC_CPU_BWD_SPLIT=0, the scalar split), flashc bf16 with the variable unset (the library's choice),
flashc float32 on the same values, and PyTorch's CPU SDPA backward (bf16, autograd) on the same
inputs; interleaved rounds after one warm-up each, medians. One row per flashc bf16 run.

  FLASHC_LIBRARY=build/libflashc.so PYTHONPATH=python python3 bench/cpu_bwd_peer.py \\
      --threads 2 --d 128 --n 1024,2048 --causal 0,1

The process pins itself to cores 0 .. threads-1 first (or --cores, e.g. 10,11). Tensors are
(batch, seqlen, heads, d) for flashc (flash_attn_backward from the forward's lse); torch gets
(batch, heads, seqlen, d) transposed views of the same memory. GFLOP/s counts 2.5 x the
forward's 4 d flops per visible (query, key) pair. `err` is the max |dq| error of flashc bf16 (mm,
default) against flashc float32 relative to max |dq| (a sanity check, not the 2x rule: the tests
hold that). "per round": the float32 time over the bf16 run's in each round (they ran next to
each other), median [min, max]: the spread of the ratio on a busy machine. Without torch only
the float32 row runs (numpy inputs), as a smoke test.
"""
import argparse
import json
import os
import statistics
import sys
import time

ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
ap.add_argument("--threads", type=int, default=2)
ap.add_argument("--d", default="128")
ap.add_argument("--n", default="1024,2048")
ap.add_argument("--causal", default="0,1")
ap.add_argument("--heads", type=int, default=8)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--json", default="")
ap.add_argument("--label", default="")
ap.add_argument("--cores", default="", help="comma-separated cores to pin to")
ap.add_argument("--no-default", action="store_true", help="skip flashc bf16 on the default path")
ap.add_argument("--no-torch", action="store_true", help="skip torch's backward")
ap.add_argument("--mm", default="1",
                help="FLASHC_CPU_BWD_MM values, one flashc bf16 run each, interleaved (e.g. 1,2,1:128x64,1+s)")
args = ap.parse_args()
os.environ["OMP_NUM_THREADS"] = str(args.threads)
os.environ.pop("FLASHC_CPU_BWD_MM", None)  # "default" is the library's own choice
os.environ.pop("FLASHC_CPU_BWD_SPLIT", None)
try:
    os.sched_setaffinity(0, set(int(c) for c in args.cores.split(",")) if args.cores
                         else set(range(args.threads)))
except (AttributeError, OSError) as e:
    print(f"# affinity not set: {e}", file=sys.stderr)

import numpy as np  # noqa: E402

import flashc  # noqa: E402
from flashc import attention  # noqa: E402

try:
    import torch  # noqa: E402
    import torch.nn.functional as F  # noqa: E402

    torch.set_num_threads(args.threads)
except ImportError:
    torch = None
flashc.set_num_threads(args.threads)


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def flashc_case(q, k, v, dout, causal, mm=None):
    out, lse = attention.attention_forward(q, k, v, causal=causal)
    if mm is None:
        return lambda: attention.flash_attn_backward(dout, q, k, v, out, lse, causal=causal)

    split = mm.endswith("+s")

    def run():  # FLASHC_CPU_BWD_MM and _SPLIT are read at every call
        os.environ["FLASHC_CPU_BWD_MM"] = mm[:-2] if split else mm
        os.environ["FLASHC_CPU_BWD_SPLIT"] = "1" if split else "0"
        try:
            return attention.flash_attn_backward(dout, q, k, v, out, lse, causal=causal)
        finally:
            os.environ.pop("FLASHC_CPU_BWD_MM", None)
            os.environ.pop("FLASHC_CPU_BWD_SPLIT", None)
    return run


def main():
    print(f"# flashc {flashc.build_info()}; torch {torch.__version__ if torch else 'absent'}; "
          f"threads {args.threads}")
    print("| label | flashc bf16 run | d | n | causal | ms | f32 ms | torch bf16 ms | GFLOP/s "
          "| speed / f32 | per round [min, max] | speed / torch | rel err dq |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for d in [int(x) for x in args.d.split(",")]:
        for n in [int(x) for x in args.n.split(",")]:
            for causal in [bool(int(x)) for x in args.causal.split(",")]:
                H = args.heads
                rng = np.random.default_rng(0)
                x = [rng.standard_normal((1, n, H, d), dtype=np.float32) for _ in range(4)]
                runs = {}
                if torch is not None:
                    tb = [torch.from_numpy(a).to(torch.bfloat16) for a in x]
                    tf = [t.float().contiguous() for t in tb]  # the same (bf16) values
                    for v in args.mm.split(","):
                        runs["mm" + v] = flashc_case(tb[0], tb[1], tb[2], tb[3], causal, mm=v)
                    if not args.no_default:  # FLASHC_CPU_BWD_MM unset: the library's choice
                        runs["default"] = flashc_case(tb[0], tb[1], tb[2], tb[3], causal)
                    runs["f32"] = flashc_case(tf[0], tf[1], tf[2], tf[3], causal)
                    qt, kt, vt = (t.transpose(1, 2).detach().requires_grad_() for t in tb[:3])
                    dot = tb[3].transpose(1, 2)

                    def torch_bwd():
                        qt.grad = kt.grad = vt.grad = None
                        o = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                        o.backward(dot)

                    if not args.no_torch:
                        runs["torch"] = torch_bwd
                else:
                    runs["f32"] = flashc_case(x[0], x[1], x[2], x[3], causal)
                res = {name: fn() for name, fn in runs.items()}  # warm-up (and the gradients)
                ts = {name: [] for name in runs}
                for _ in range(args.rounds):
                    for name, fn in runs.items():
                        ts[name].append(timed(fn))
                med = {name: statistics.median(t) for name, t in ts.items()}
                pairs = n * (n + 1) // 2 if causal else n * n
                flops = 2.5 * 4.0 * d * H * pairs
                # torch's timing includes its forward (autograd needs it): the forward's share
                # is about 1/3.5 of the FLOPs; reported as measured
                def err(name):
                    if name not in res:
                        return float("nan")
                    dqb = res[name][0].float().numpy()
                    dqf = res["f32"][0].numpy()
                    return float(np.abs(dqb - dqf).max() / max(np.abs(dqf).max(), 1e-30))

                nan = float("nan")
                mf, mt = med["f32"], med.get("torch", nan)
                for name in runs:
                    if name in ("f32", "torch"):
                        continue
                    m = med[name]
                    # f32 / this run of the same round (they ran next to each other)
                    pr = sorted(a / b for a, b in zip(ts["f32"], ts[name]))
                    row = dict(label=args.label, variant=name, threads=args.threads, d=d, n=n,
                               causal=int(causal), ms=m * 1e3, f32_ms=mf * 1e3,
                               torch_ms=mt * 1e3, gflops=flops / m / 1e9,
                               speed_over_f32=mf / m, paired_over_f32=pr,
                               speed_over_torch=mt / m,
                               rel_err_dq=err(name), build=flashc.build_info())
                    rows.append(row)
                    print(f"| {args.label} | {name} | {d} | {n} | {int(causal)} | {m*1e3:.1f} | "
                          f"{mf*1e3:.1f} | {mt*1e3:.1f} | {flops/m/1e9:.0f} | {mf/m:.2f} | "
                          f"{statistics.median(pr):.2f} [{pr[0]:.2f}, {pr[-1]:.2f}] | "
                          f"{mt/m:.2f} | {err(name):.2g} |", flush=True)

    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    main()
