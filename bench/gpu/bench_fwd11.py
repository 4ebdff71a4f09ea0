#!/usr/bin/env python3
"""Issue 11, helper fwd11: where the sm90 forward's d 128 non-causal 2k-4k gap to cuDNN goes.

Hypotheses (bench/RESULTS.md "Issue 11: the per-call cost"), each with the figure that tells:
  host   the library's host work per call (tensor maps, attributes, the counter's allocation):
         "host us" = host time of one call while the GPU is busy (enqueue only), against the
         call's GPU time; and "graph" (the same calls replayed from a CUDA graph, no host work)
         against "b2b" (back-to-back calls between two events).
  gaps   work beside the kernel (the tile counter's memset, launch gaps): "b2b - kern" per call,
         kern = the sum of the call's GPU operations in a CUPTI trace (torch.profiler), main =
         the attention kernel alone, memset = the rest.
  call   a cost per launch inside the kernel (ramp-up, tail): the intercept of the kernel time
         against the batch at S 2048 (B 2..16, 256 tiles of 128 rows a batch), in us.
  tile   a cost per tile (the tile boundary): the intercept of the kernel time against Sk at
         Sq 2048 (B 8: 2048 tiles, Sk 1k..8k), in keys (intercept / slope).
  flush  the cold, dirty L2 of triton's do_bench (256 MB zeroed before every call): "flush"
         against "b2b".
  alt    --alt NAME:VAR=VALUE (repeatable): a second library instance (its own copy of the .so)
         that read VAR=VALUE at its first launch, timed beside the default: round A's
         flashc_pdl (FLASHC_CUDA_FWD_PDL=1), helper fwd12's flashc_tail (FLASHC_CUDA_FWD_TAIL=1,
         timed by bench/gpu/s9_fwd12.sh with a --set fwd12 of this script, both in git at
         188e3cf); both variables since removed, so such an instance now runs the default.
         A family works too: NAME:FLASHC_CUDA_KERNEL=sm90v9 (read once per instance), and
         several variables: NAME:VAR=VALUE,VAR2=VALUE2 (helper fwd15: NAME:FLASHC_CUDA_KERNEL=
         sm90abl,FLASHC_SM90_ABLATE=overlap).
--set cells (helper fwd14): the target cells only, d 128 at 2k / 4k / 16k and d 64 at 2k / 4k,
         causal and not; per implementation do_bench with its flush and the CUPTI kernel time,
         in --rounds interleaved rounds (median), no b2b / graph / host measures, no scans; the
         table gives each one's ratio to cuDNN and each alt instance's to flashc.
--set abl (helper fwd15): as cells, at d 128 without the mask, 2k and 16k only (the cells of
         the leave-one-out ladder, bench/gpu/s9_fwd15.sh).
--set np (helper fwd16): as cells, d 128 at 1k / 2k / 4k / 8k / 16k and d 64 at 1k / 2k / 4k /
         16k, causal and not (the defaults against sm90np, bench/gpu/s9_fwd16.sh, np_table.py).
--set pad (helper fwd17): as cells, d 96 and d 32 at 2k / 4k, causal and not (H = 21 / 64):
         the default (sm80 at these dims) against an alt with FLASHC_CUDA_SM90_PAD=1 (the sm90
         defaults padded; bench/gpu/s10_fwd17.sh, pad_table.py).
--set wide (helper fwd18): as cells, d 256 and d 192 at 1k / 2k / 4k / 8k / 16k, causal and
         not (H = 8 / 10): the default (sm80 at these dims) against alts forcing sm90v6h /
         sm90v6hnp / sm90v6hw (bench/gpu/s10_fwd18.sh, wide_table.py); the instances warm
         up at d 256.
--set c64 (lead, 2026-12-06): as cells, d 64 at 512 / 1k / 2k under the causal mask and 512 / 1k
         without it (H = 32), the short cells furthest below cuDNN (0.82x at causal 1k on the
         H100 that morning), for alts forcing other families (bench/gpu/s19_fwd64.sh).
--set padw (helper fwd19): as cells, d 160 and 224 at 1k / 2k / 8k, d 136 and 200 at 2k, and d 96
         and 112 at 1k / 8k, causal and not (H = 2048 // d): alts with FLASHC_CUDA_SM90_PAD=1 (d 160 / 224
         padded into the d 192 / 256 defaults, d 96 / 112 into the d 128 ones) and with
         FLASHC_CUDA_KERNEL=sm80 (bench/gpu/s11_fwd19.sh, padw_table.py).
Every implementation is timed on the same inputs in this one process: flashc (the dispatcher's
choice, through ctypes, bench_sdpa.Flashc), the alt instances, SDPA cuDNN, SDPA flash (FA2);
every flashc instance is checked against SDPA flash first (twice each).

usage: bench_fwd11.py --lib build/libflashc.so [--rep-ms 20] [--out fwd11.json] [--quick]
                      [--alt NAME:VAR=VALUE[,VAR=VALUE] ...] [--set fwd11|cells|abl|np|pad|wide|padw|c64]
                      [--rounds 2]
"""
import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
import triton.testing

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_sdpa import Flashc, Stats, params, view  # noqa: E402

IMPLS = ["flashc", "cudnn", "flash"]  # the alt instances go after flashc (main)


def load_alt(path, name, env, warm):
    """A second library instance (its own copy) with the variables of env (a dict) set only
    around its first launch (such variables are read once per instance, at the first launch
    that asks; warm(fc) makes that launch). The default instance must have launched before."""
    copy = os.path.join(tempfile.mkdtemp(), f"libflashc_{name}.so")
    shutil.copy(path, copy)
    os.environ.update(env)
    try:
        fc = Flashc(copy)
        warm(fc)
    finally:
        for var in env:
            os.environ.pop(var, None)
    return fc


def make_case(d, S, Sk, B, causal):
    """Inputs in flash-attn's (B, S, H, d) layout, hidden 2048 (H = 2048 / d)."""
    H = 2048 // d
    q = torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(B, Sk, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    return q, k, v, o, lse, H


def flashc_fn(fc, q, k, v, o, lse, causal, stats=None):
    """flashc's forward on the stream current at each call (bench_sdpa's fwd_fn takes the
    stream current when it is made, which a graph capture's side stream is not); stats: a
    Stats the calls fill (the tiles they ran), or None."""
    import ctypes
    p = params(causal, None)
    args = [ctypes.byref(x) for x in (p, view(q), view(k), view(v), view(o), view(lse))]
    if stats is None:
        stats = Stats()
    stats.struct_size = ctypes.sizeof(Stats)
    fwd = fc.lib.flashc_attn_fwd

    def run():
        p.cuda_stream = torch.cuda.current_stream().cuda_stream
        st = fwd(*args, ctypes.byref(stats))
        if st != 0:
            raise RuntimeError(f"flashc_attn_fwd: {st}: {fc.lib.flashc_last_error().decode()}")
    return run


def sdpa_fn(backend, q, k, v, causal):
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def run():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    return run


def per_call_events(fn, n, reps=3):
    """Median over reps of (event time of n back-to-back calls) / n, in ms."""
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(n):
            fn()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / n)
    return sorted(out)[len(out) // 2]


def per_call_graph(fn, n, reps=3):
    """The same n calls captured once into a CUDA graph, replayed reps times: ms per call."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()  # warm on the side stream (allocator, cuDNN plans)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(n):
            fn()
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        torch.cuda.synchronize()
        out.append(a.elapsed_time(b) / n)
    del g
    return sorted(out)[len(out) // 2]


def host_us(fn, n=20):
    """Host time of one call (launch work only) while the GPU is busy with a spin kernel."""
    torch.cuda.synchronize()
    torch.cuda._sleep(int(20e6))  # ~10 ms at ~2 GHz: the calls below only enqueue
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def trace_calls(fns, k):
    """CUPTI trace (torch.profiler) of k back-to-back calls of each fn, separated by spin
    kernels: per fn, the per-call sums in us of (all GPU ops, the longest op's kind, the rest),
    and the mean gap between one op's end and the next op's start within the run."""
    from torch.profiler import profile, ProfilerActivity
    names = list(fns)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for n in names:
            torch.cuda._sleep(2000000)
            for _ in range(k):
                fns[n]()
        torch.cuda._sleep(2000000)
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    ev = [e for e in json.load(open(path))["traceEvents"]
          if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memset", "gpu_memcpy")]
    ev.sort(key=lambda e: float(e["ts"]))
    segs, cur = [], None
    for e in ev:
        if "spin" in e["name"].lower() or "sleep" in e["name"].lower():
            if cur is not None:
                segs.append(cur)
            cur = []
        elif cur is not None:
            cur.append(e)
    out = {}
    for n, seg in zip(names, segs):
        if not seg:
            continue
        by = {}
        for e in seg:
            key = e["cat"] if e["cat"] != "kernel" else e["name"][:60]
            by[key] = by.get(key, 0.0) + float(e["dur"])
        main = max(by, key=by.get)
        total = sum(by.values())
        args = next((e.get("args", {}) for e in seg if e["name"][:60] == main), {})
        shape = "grid %s block %s regs %s smem %s" % tuple(
            args.get(x, "?") for x in ("grid", "block", "registers per thread", "shared memory"))
        gaps = [float(b["ts"]) - (float(a["ts"]) + float(a["dur"])) for a, b in zip(seg, seg[1:])]
        out[n] = {"kern_us": total / k, "main_us": by[main] / k, "rest_us": (total - by[main]) / k,
                  "ops_per_call": len(seg) / k, "gap_us": sum(gaps) / k if gaps else 0.0,
                  "main": main, "launch": shape}
    return out


def add_trace(r, fns, calls):
    """The kernel times of trace_calls(fns, calls) into r[name]; a profiler failure is noted in
    r["trace_error"] and the row goes on without them (the profiler is a diagnostic here)."""
    try:
        tr = trace_calls(fns, calls)
    except Exception as e:  # noqa: BLE001
        tr = {}
        r["trace_error"] = str(e)[:160]
    for n, t in tr.items():
        r[n].update(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rep-ms", type=float, default=20)
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="main cases only, no scans")
    ap.add_argument("--alt", action="append", default=[], help="NAME:VAR=VALUE[,VAR=VALUE]")
    ap.add_argument("--set", default="fwd11",
                    choices=("fwd11", "cells", "abl", "np", "pad", "wide", "padw", "c64"))
    ap.add_argument("--rounds", type=int, default=2, help="--set cells: interleaved rounds")
    a = ap.parse_args()
    alts = []
    for spec in a.alt:
        name, _, kvs = spec.partition(":")
        env = {}
        for kv in kvs.split(","):
            var, eq, value = kv.partition("=")
            if not (name and var and eq):
                ap.error(f"--alt {spec}: NAME:VAR=VALUE[,VAR=VALUE]")
            env[var] = value
            os.environ.pop(var, None)
        alts.append((name, env))
    IMPLS[1:1] = [n for n, _ in alts]
    fc = Flashc(a.lib)
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; flashc {fc.lib.flashc_build_info().decode()}",
          flush=True)

    def warm(lib):  # one launch of v6 (d 128 without the mask, 1k: the dispatcher's v6), or
        # at d 256 for --set wide (its alts force families that serve d 192 / 256 only)
        # (--set c64: at d 64, which its alts' families serve)
        q, k, v, o, lse, _ = make_case({"wide": 256, "c64": 64}.get(a.set, 128), 1024, 1024, 1,
                                       False)
        flashc_fn(lib, q, k, v, o, lse, False)()
        torch.cuda.synchronize()
    warm(fc)
    libs = {"flashc": fc}
    for name, env in alts:
        libs[name] = load_alt(a.lib, name, env, warm)
    torch.manual_seed(0)
    # (kind, d, Sq, Sk, B, causal): main = the convention (B S = 16384) with every measure;
    # bscan / kscan = the fits (graph + trace, flashc and cuDNN)
    cases = [("main", 128, 2048, 2048, 8, False), ("main", 128, 4096, 4096, 4, False),
             ("main", 128, 16384, 16384, 1, False), ("main", 64, 2048, 2048, 8, False),
             ("main", 64, 4096, 4096, 4, False)]
    cells = a.set in ("cells", "abl", "np", "pad", "wide", "padw", "c64")
    if a.set == "abl":
        cases = [("main", 128, s, s, 16384 // s, False) for s in (2048, 16384)]
    elif a.set == "np":
        cases = [("main", d, s, s, 16384 // s, c) for d, ss in ((128, (1024, 2048, 4096, 8192,
                                                                       16384)),
                                                              (64, (1024, 2048, 4096, 16384)))
                 for c in (False, True) for s in ss]
    elif a.set == "wide":
        cases = [("main", d, s, s, 16384 // s, c) for d in (256, 192) for c in (False, True)
                 for s in (1024, 2048, 4096, 8192, 16384)]
    elif a.set == "padw":
        cases = [("main", d, s, s, 16384 // s, c) for d, ss in ((160, (1024, 2048, 8192)),
                                                              (224, (1024, 2048, 8192)),
                                                              (136, (2048,)), (200, (2048,)),
                                                              (96, (1024, 8192)),
                                                              (112, (1024, 8192)))
                 for c in (False, True) for s in ss]
    elif a.set == "c64":
        cases = [("main", 64, s, s, 16384 // s, c) for c, ss in ((True, (512, 1024, 2048)),
                                                                  (False, (512, 1024)))
                 for s in ss]
    elif a.set == "pad":
        cases = [("main", d, s, s, 16384 // s, c) for d in (96, 32) for c in (False, True)
                 for s in (2048, 4096)]
    elif cells:
        cases = [("main", d, s, s, 16384 // s, c) for d, ss in ((128, (2048, 4096, 16384)),
                                                              (64, (2048, 4096)))
                 for c in (False, True) for s in ss]
    elif not a.quick:
        cases += [("bscan", 128, 2048, 2048, b, False) for b in (2, 4, 16)]
        cases += [("kscan", 128, 2048, sk, 8, False) for sk in (1024, 4096, 8192)]
    rows = []
    for kind, d, S, Sk, B, causal in cases:
        q, k, v, o, lse, H = make_case(d, S, Sk, B, causal)
        fns = {n: flashc_fn(lib, q, k, v, o, lse, causal) for n, lib in libs.items()}
        fns["cudnn"] = sdpa_fn(SDPBackend.CUDNN_ATTENTION, q, k, v, causal)
        if kind == "main":
            fns["flash"] = sdpa_fn(SDPBackend.FLASH_ATTENTION, q, k, v, causal)
        ref = fns["flash"]() if "flash" in fns else sdpa_fn(SDPBackend.FLASH_ATTENTION, q, k, v,
                                                            causal)()
        diffs = []
        for n in libs:
            for _ in range(2):  # twice: the second call finds the state the first left
                o.fill_(float("nan"))
                fns[n]()
                torch.cuda.synchronize()
                diffs.append((o.float() - ref.transpose(1, 2).float()).abs().max().item())
        ok = all(math.isfinite(x) and x < 2e-2 for x in diffs)  # NaN fails
        diff = max(diffs) if ok else float("nan")
        flops = 4.0 * B * H * S * Sk * d / (2 if causal else 1)
        r = {"kind": kind, "d": d, "Sq": S, "Sk": Sk, "B": B, "H": H, "causal": causal,
             "flops": flops, "maxdiff": diff}
        if not ok:
            print(f"{kind} d={d} S={S} Sk={Sk} B={B}: flashc WRONG (maxdiff {diff:.2e})",
                  flush=True)
            rows.append(r)
            continue
        if cells:  # rounds of every implementation in turn, so that drift hits all alike
            for n in list(fns):  # an SDPA backend that refuses the shape is left out of the cell
                try:
                    fns[n]()
                except RuntimeError as e:
                    if n.startswith("flashc"):
                        raise
                    print(f"d={d} S={S}{' causal' if causal else ''}: {n} left out: "
                          f"{str(e)[:160]}", flush=True)
                    del fns[n]
            torch.cuda.synchronize()
            per = {n: [] for n in fns}
            for _ in range(a.rounds):
                for n, fn in fns.items():
                    per[n].append(triton.testing.do_bench(fn, warmup=5, rep=a.rep_ms,
                                                          return_mode="median"))
            for n in fns:
                v = sorted(per[n])
                r[n] = {"flush": (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2}
            add_trace(r, fns, 10)
            rows.append(r)
            print(f"d={d} S={S} B={B}{' causal' if causal else ''}: " + "  ".join(
                f"{n} {r[n]['flush'] * 1e3:.1f}us"
                + (f"/{r[n]['kern_us']:.1f}us" if "kern_us" in r[n] else "") for n in fns),
                flush=True)
            del q, k, v, o, lse, ref, fns
            continue
        for n, fn in fns.items():
            fn()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            est = time.perf_counter() - t0
            calls = max(3, min(200, int(a.rep_ms * 1e-3 / max(est, 1e-5))))
            m = {}
            try:
                if kind == "main":
                    m["flush"] = triton.testing.do_bench(fn, warmup=10, rep=a.rep_ms,
                                                         return_mode="median")
                    m["b2b"] = per_call_events(fn, calls)
                    m["host_us"] = host_us(fn)
                m["graph"] = per_call_graph(fn, calls)
            except RuntimeError as e:  # a capture a backend refuses: report, go on
                m["error"] = str(e)[:160]
            r[n] = m
        add_trace(r, fns, 5)
        rows.append(r)
        tf = lambda n, key: (flops / (r[n][key] * 1e-3) / 1e12 if r.get(n, {}).get(key) else
                             float("nan"))
        print(f"{kind} d={d} S={S} Sk={Sk} B={B}{' causal' if causal else ''}: " + "  ".join(
            f"{n}[" + " ".join(f"{key} {tf(n, key):.0f}" for key in ("flush", "b2b", "graph")
                               if key in r[n])
            + (f" kern {r[n]['kern_us']:.1f}us main {r[n]['main_us']:.1f}us"
               f" ops {r[n]['ops_per_call']:.1f} gap {r[n]['gap_us']:.1f}us"
               if "kern_us" in r[n] else "")
            + (f" host {r[n]['host_us']:.1f}us" if "host_us" in r[n] else "")
            + (f" ERR {r[n]['error']}" if "error" in r[n] else "") + "]" for n in fns),
            flush=True)
        if kind == "main" and S == 2048:  # what each one launches (CUPTI's record)
            for n in fns:
                if "main" in r[n]:
                    print(f"    {n}: {r[n]['main']} | {r[n]['launch']}", flush=True)
        del q, k, v, o, lse, ref, fns
    if a.out:
        with open(a.out, "w") as fh:
            json.dump({"device": dev.name, "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "rows": rows}, fh, indent=1)
    if cells:
        report_cells(rows, [n for n, _ in alts])
    else:
        report(rows)
    return 0 if all(math.isfinite(r["maxdiff"]) and r["maxdiff"] < 2e-2 for r in rows) else 1


def fit(xs, ys):
    """Least squares y = c + s x: (c, s)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    s = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else float("nan")
    return my - s * mx, s


def report(rows):
    """The short table that decides (see the module doc; s8_fwd11.sh, which drove it in round A, is in git at 4c2c226)."""
    g = lambda r, n, k: r.get(n, {}).get(k)
    tf = lambda r, ms: r["flops"] / (ms * 1e-3) / 1e12 if ms else float("nan")
    print("\n| d | S | impl | flush TF | b2b TF | graph TF | kernel TF | host us | b2b-kern us "
          "| rest us | flashc/cuDNN flush | b2b | kernel |")
    print("|---" * 13 + "|")
    for r in rows:
        if r["kind"] != "main" or "flashc" not in r:
            continue
        for n in IMPLS:
            if n not in r:
                continue
            b2b, kern = g(r, n, "b2b"), g(r, n, "kern_us")
            ratio = lambda k: (
                f"{(g(r, 'cudnn', k) or float('nan')) / (g(r, n, k) or float('nan')):.3f}"
                if n.startswith("flashc") else "")
            if n not in r:
                continue
            print(f"| {r['d']} | {r['Sq']} | {n} | {tf(r, g(r, n, 'flush')):.0f} | "
                  f"{tf(r, b2b):.0f} | {tf(r, g(r, n, 'graph')):.0f} | "
                  f"{tf(r, kern / 1e3 if kern else None):.0f} | "
                  f"{g(r, n, 'host_us') or float('nan'):.1f} | "
                  f"{(b2b * 1e3 - kern) if b2b and kern else float('nan'):.1f} | "
                  f"{g(r, n, 'rest_us') if g(r, n, 'rest_us') is not None else float('nan'):.1f} | "
                  f"{ratio('flush')} | {ratio('b2b')} | {ratio('kern_us')} |")
    # the fits: kernel time (CUPTI, per call) against B at S 2048 and against Sk at Sq 2048
    for kind, xkey, label in (("bscan", "B", "per-launch intercept (us), kernel time vs B"),
                              ("kscan", "Sk", "per-tile intercept (keys), kernel time vs Sk")):
        base = [r for r in rows if r["kind"] == "main" and r["d"] == 128 and r["Sq"] == 2048]
        pts = base + [r for r in rows if r["kind"] == kind]
        line = []
        # flashc's default at d 128 without the mask walks blocks of 176 keys: Sk rounded up
        walked = lambda r: -(-r[xkey] // 176) * 176
        for n, xf in (("flashc", lambda r: r[xkey]), ("cudnn", lambda r: r[xkey]),
                      ("flashc(walked keys)", walked)):
            if kind == "bscan" and xf is walked:
                continue
            src = n.split("(")[0]
            xy = [(xf(r), g(r, src, "kern_us")) for r in pts if g(r, src, "kern_us")]
            if len(xy) < 3:
                line.append(f"{n} -")
                continue
            c, s = fit([x for x, _ in xy], [y for _, y in xy])
            val = c if kind == "bscan" else c / s
            line.append(f"{n} {val:.1f} (slope {s:.3f} us/{xkey}; points "
                        + ", ".join(f"{x}:{y:.0f}" for x, y in sorted(xy)) + ")")
        print(f"{label}: " + "; ".join(line))


def report_cells(rows, alts):
    """--set cells: per cell, TFLOP/s under do_bench's flush and in CUPTI kernel time, each
    flashc instance's ratio to cuDNN (cuDNN's time / its own) and each alt's to flashc."""
    g = lambda r, n, k: r.get(n, {}).get(k)
    tf = lambda r, ms: r["flops"] / (ms * 1e-3) / 1e12 if ms else float("nan")
    q = lambda a, b: f"{a / b:.3f}" if a and b else "nan"
    print("\n| d | S | causal | impl | flush TF | kernel TF | /cuDNN flush | /cuDNN kernel "
          "| /flashc flush | /flashc kernel |")
    print("|---" * 10 + "|")
    for r in rows:
        for n in ["flashc"] + alts + ["cudnn", "flash"]:
            if n not in r:
                continue
            fl, ke = g(r, n, "flush"), g(r, n, "kern_us")
            cf, ck = g(r, "cudnn", "flush"), g(r, "cudnn", "kern_us")
            df, dk = g(r, "flashc", "flush"), g(r, "flashc", "kern_us")
            own = n.startswith("flashc")
            print(f"| {r['d']} | {r['Sq']} | {int(r['causal'])} | {n} | {tf(r, fl):.0f} | "
                  f"{tf(r, ke / 1e3 if ke else None):.0f} | {q(cf, fl) if own else ''} | "
                  f"{q(ck, ke) if own else ''} | {q(df, fl) if n in alts else ''} | "
                  f"{q(dk, ke) if n in alts else ''} |")


if __name__ == "__main__":
    sys.exit(main())
