#!/usr/bin/env python3
"""bench/gpu/bwd_trace.py — where the Hopper backward's time goes, block by block.

FLASHC_CUDA_BWD_TRACE=PATH makes the Hopper backward kernels record, for every thread block and
each of its Q-block steps, %clock64 stamps (src/cuda/bwd_trace.cuh; the call writes PATH):
  layout 1, sm90h / sm90h2 (d 256 / 192; src/cuda/attn_bwd_sm90h.cu, H_TRACE): when each
    consumer warpgroup's step found its Q / dO data, began its first dQ epilogue, acquired its
    deterministic turn and issued its last dQ adds (the consumers add dQ themselves);
  layout 2, sm90v3u / sm90v3d at d 64 (attn_bwd_sm90v3.cu, V3_TRACE): when each consumer
    warpgroup's step found its data, wanted a dQ staging buffer and had one, and when each
    writer warp saw the buffer full, acquired the turn and issued the adds. This script runs such calls and
reads the files (issue 12: deterministic mode at 0.55-0.74x fast above d 128, and three candidate
orders measured without knowing why).

  run:  bwd_trace.py run --lib build/libflashc.so --out DIR [--d 256] [--seqlens 2048,8192]
                         [--causal 0,1] [--configs fast:sm90h,det:sm90h,det:sm90hl,det2:sm90h]
        one warm call and one traced call per (config, seqlen, causal), bf16, B*S = 16k,
        H = 2048 // d (bench_bwd4's convention), through the Python binding's autograd; each
        trace DIR/<d>_<S>_<c|n>_<mode>_<family>.bin, then the report of all of them.
  read: bwd_trace.py read FILE... [--png PREFIX]
        the report of existing traces; --png draws each one's first 48 SMs as a timeline
        (matplotlib, if installed).

The report, per trace (times from the blocks' %clock64, placed on one axis by each block's
%globaltimer at its start and end):
  - span: first block start to last block end; sm_busy: the blocks' summed time over
    span x SMs used (idle SMs between blocks and at the tail lower it);
  - per step, warpgroup 0, as a share of the blocks' summed time: data (waiting for Q / dO:
    from the previous step's last issue to this step's data), compute (data -> first dQ
    epilogue), turn (epilogue -> turn acquired; deterministic mode), dq (turn -> last issue,
    and in fast mode epilogue -> last issue), plus the block's prologue and epilogue (start ->
    first data, last issue -> end);
  - the turn wait split into a block's first step and the rest (a wave's start vs its steady
    state), and its median / p90 in microseconds;
  - the lag: per (head, Q block), turn acquired by K block n minus turn acquired by the block
    before it in turn order, median / p90, in steps (the median step of the trace).
"""
import argparse
import glob
import math
import os
import statistics
import struct
import sys

HEAD = struct.Struct("<8s16iq")  # magic, 16 int32, int64 words (attn_bwd_sm90h.cu)
FIELDS = ("version", "grid_x", "grid_y", "maxit", "bm", "bn", "d", "det", "has_hi", "sq", "sk",
          "group", "hkv", "b", "hdr_words", "it_words")


def load(path):
    import array
    with open(path, "rb") as f:
        raw = f.read(HEAD.size)
        if len(raw) != HEAD.size:
            raise ValueError(f"{path}: short header")
        magic, *ints, words = HEAD.unpack(raw)
        if magic != b"FCBWDTR1":
            raise ValueError(f"{path}: not a flashc backward trace")
        h = dict(zip(FIELDS, ints))
        w = array.array("Q")
        w.fromfile(f, words)
    return h, w


def blocks(h, w):
    """Each block as a dict: smid, n_block, bh, steps [(m0, h, e[wg][ev])...], t0, t1 (ns), and
    clk(x) -> ns (its clock placed on the globaltimer axis)."""
    per = h["hdr_words"] + h["it_words"] * h["maxit"]
    out = []
    for i in range(h["grid_x"] * h["grid_y"]):
        o = i * per
        gt0, c0, gt1, c1, smid, nb, bh, total = w[o:o + 8]
        if gt0 == 0 or c1 <= c0:
            continue  # never ran (should not happen) or no end
        rate = (gt1 - gt0) / (c1 - c0) if gt1 > gt0 else None  # ns a cycle
        steps = []
        for it in range(min(total, h["maxit"])):
            s = o + h["hdr_words"] + it * h["it_words"]
            if h["version"] == 1:  # e[wg] = data, epilogue, turn, issue
                e = [list(w[s:s + 4]), list(w[s + 4:s + 8])]
                mh = w[s + 8]
            else:  # e[0..1] consumers: data, staging wanted, had; e[2..3] writers: full, turn, issue
                e = [list(w[s + 3 * i:s + 3 * i + 3]) for i in range(4)]
                mh = w[s + 12]
            steps.append((mh & 0xffffffff, mh >> 32, e))
        out.append({"smid": smid, "n_block": nb, "bh": bh, "c0": c0, "c1": c1, "gt0": gt0,
                    "gt1": gt1, "rate": rate, "steps": steps})
    rates = [b["rate"] for b in out if b["rate"]]
    ghz_ns = statistics.median(rates) if rates else 1 / 1.75  # ns a cycle
    for b in out:
        r = ghz_ns  # one clock rate for all: a block's own is coarse where globaltimer is
        b["ns"] = (lambda c, b=b, r=r: b["gt0"] + (c - b["c0"]) * r)
        b["t0"], b["t1"] = b["gt0"], b["gt0"] + (b["c1"] - b["c0"]) * r
    return out, ghz_ns


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def occupancy(bl):
    """span (first block start to last block end, ns), the SMs used, the blocks' summed time"""
    span = max(b["t1"] for b in bl) - min(b["t0"] for b in bl)
    return span, {b["smid"] for b in bl}, sum(b["t1"] - b["t0"] for b in bl)


def lags_of(acq):
    """acq: (head, Q block) -> the times its turns were acquired; the gaps between successive
    ones (in turn order, which is acquisition order)"""
    lags = []
    for v in acq.values():
        v = sorted(v)
        lags += [v[i] - v[i - 1] for i in range(1, len(v))]
    return lags


def report(path):
    h, w = load(path)
    bl, ns_cyc = blocks(h, w)
    if not bl:
        print(f"{os.path.basename(path)}: no blocks recorded")
        return None
    if h["version"] == 2:
        return report_v2(path, h, bl, ns_cyc)
    span, sms, busy = occupancy(bl)
    ph = {"prologue": 0.0, "data": 0.0, "compute": 0.0, "turn": 0.0, "dq": 0.0, "epilogue": 0.0}
    turn_first, turn_rest, step_ns, acq = [], [], [], {}
    for b in bl:
        cyc = lambda a, z: max(0, z - a) * ns_cyc
        prev = None
        for it, (m0, hh, e) in enumerate(b["steps"]):
            e0 = e[0]
            if not e0[0]:
                continue
            if prev is None:
                ph["prologue"] += cyc(b["c0"], e0[0])
            else:
                ph["data"] += cyc(prev, e0[0])
            ph["compute"] += cyc(e0[0], e0[1])
            if h["det"] and e0[2]:
                t = cyc(e0[1], e0[2])
                ph["turn"] += t
                (turn_first if it == 0 else turn_rest).append(t)
                ph["dq"] += cyc(e0[2], e0[3])
                acq.setdefault((b["bh"], hh, m0), []).append(b["ns"](e0[2]))
            else:
                ph["dq"] += cyc(e0[1], e0[3])
            if prev is not None:
                step_ns.append(cyc(prev, e0[3]))
            prev = e0[3] or prev
        if prev:
            ph["epilogue"] += cyc(prev, b["c1"])
    lags = lags_of(acq)
    step = statistics.median(step_ns) if step_ns else float("nan")
    tot = sum(ph.values()) or 1.0
    name = os.path.basename(path)
    print(f"\n{name}: d {h['d']}, BM {h['bm']}, Sq {h['sq']}, Sk {h['sk']}, B {h['b']}, Hkv "
          f"{h['hkv']}, group {h['group']}, {'deterministic' if h['det'] else 'fast'}, "
          f"{'upper key bound' if h['has_hi'] else 'no upper bound'}; {len(bl)} blocks on "
          f"{len(sms)} SMs; clock {1 / ns_cyc:.2f} GHz")
    print(f"  span {span / 1e3:.1f} us, sm_busy {busy / (span * len(sms)):.3f}, median step "
          f"{step / 1e3:.2f} us")
    print("  warpgroup 0's time: " + ", ".join(f"{k} {v / tot:.3f}" for k, v in ph.items()))
    if h["det"]:
        print(f"  turn wait: first step of a block median {pct(turn_first, .5) / 1e3:.2f} us "
              f"(p90 {pct(turn_first, .9) / 1e3:.2f}), later steps median "
              f"{pct(turn_rest, .5) / 1e3:.2f} us (p90 {pct(turn_rest, .9) / 1e3:.2f}); lag "
              f"between successive turns on a Q block median {pct(lags, .5) / 1e3:.2f} us = "
              f"{pct(lags, .5) / step:.2f} steps (p90 {pct(lags, .9) / step:.2f})")
    return {"name": name, "span_us": span / 1e3, "sm_busy": busy / (span * len(sms)),
            "step_us": step / 1e3, **{k: v / tot for k, v in ph.items()}}


def report_v2(path, h, bl, ns_cyc):
    """Layout 2 (sm90v3u / sm90v3d, dQ on writer warps): consumer warpgroup 0's time split into
    prologue / compute (data -> staging wanted) / staging (waiting for a buffer the writer has
    not handed back) / rest (staging had -> the next step's data: dK, dV, the stage) /
    epilogue; writer 0's into full wait (for the consumers' tile) / turn / issue."""
    span, sms, busy = occupancy(bl)
    cp = {"prologue": 0.0, "compute": 0.0, "staging": 0.0, "rest": 0.0, "epilogue": 0.0}
    wp = {"full_wait": 0.0, "turn": 0.0, "issue": 0.0}
    step_ns, turn_first, turn_rest, acq = [], [], [], {}
    for b in bl:
        cyc = lambda a, z: max(0, z - a) * ns_cyc
        prev_c, prev_w = None, None
        for it, (m0, hh, e) in enumerate(b["steps"]):
            c, wr = e[0], e[2]
            if c[0]:
                if prev_c is None:
                    cp["prologue"] += cyc(b["c0"], c[0])
                else:
                    cp["rest"] += cyc(prev_c, c[0])
                    step_ns.append(cyc(prev_c, c[2]))
                cp["compute"] += cyc(c[0], c[1])
                cp["staging"] += cyc(c[1], c[2])
                prev_c = c[2]
            if wr[0]:
                if prev_w is not None:
                    wp["full_wait"] += cyc(prev_w, wr[0])
                if h["det"] and wr[1]:
                    t = cyc(wr[0], wr[1])
                    wp["turn"] += t
                    (turn_first if it == 0 else turn_rest).append(t)
                    wp["issue"] += cyc(wr[1], wr[2])
                    acq.setdefault((b["bh"], hh, m0), []).append(b["ns"](wr[1]))
                else:
                    wp["issue"] += cyc(wr[0], wr[2])
                prev_w = wr[2]
        if prev_c:
            cp["epilogue"] += cyc(prev_c, b["c1"])
    lags = lags_of(acq)
    step = statistics.median(step_ns) if step_ns else float("nan")
    ct, wt = sum(cp.values()) or 1.0, sum(wp.values()) or 1.0
    name = os.path.basename(path)
    print(f"\n{name}: layout 2, d {h['d']}, BM {h['bm']}, BN {h['bn']}, Sq {h['sq']}, Sk "
          f"{h['sk']}, B {h['b']}, Hkv {h['hkv']}, group {h['group']}, "
          f"{'deterministic' if h['det'] else 'fast'}, "
          f"{'upper key bound' if h['has_hi'] else 'no upper bound'}; {len(bl)} blocks on "
          f"{len(sms)} SMs; clock {1 / ns_cyc:.2f} GHz")
    print(f"  span {span / 1e3:.1f} us, sm_busy {busy / (span * len(sms)):.3f}, median step "
          f"{step / 1e3:.2f} us")
    print("  consumer 0's time: " + ", ".join(f"{k} {v / ct:.3f}" for k, v in cp.items()))
    print("  writer 0's time: " + ", ".join(f"{k} {v / wt:.3f}" for k, v in wp.items()))
    if h["det"]:
        print(f"  writer turn wait: first step median {pct(turn_first, .5) / 1e3:.2f} us, later "
              f"median {pct(turn_rest, .5) / 1e3:.2f} us (p90 {pct(turn_rest, .9) / 1e3:.2f}); "
              f"lag between successive turns on a Q block median {pct(lags, .5) / 1e3:.2f} us = "
              f"{pct(lags, .5) / step:.2f} steps")
    # the common table's columns: consumer shares (turn = the staging wait, dq = writer issue)
    return {"name": name, "span_us": span / 1e3, "sm_busy": busy / (span * len(sms)),
            "step_us": step / 1e3, "prologue": cp["prologue"] / ct, "data": cp["rest"] / ct,
            "compute": cp["compute"] / ct, "turn": cp["staging"] / ct, "dq": float("nan"),
            "epilogue": cp["epilogue"] / ct}


def png(path, prefix):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("  (no matplotlib: no timeline)")
        return
    h, w = load(path)
    if h["version"] != 1:
        print(f"  {os.path.basename(path)}: timelines are drawn for layout 1 only")
        return
    bl, ns_cyc = blocks(h, w)
    t00 = min(b["t0"] for b in bl)
    fig, ax = plt.subplots(figsize=(14, 7))
    col = {"compute": "tab:blue", "turn": "tab:red", "dq": "tab:orange", "data": "tab:gray"}
    for b in bl:
        y = b["smid"]
        if y >= 48:
            continue
        prev = None
        for m0, hh, e in b["steps"]:
            e0 = [b["ns"](x) - t00 if x else None for x in e[0]]
            if e0[0] is None:
                continue
            if prev is not None:
                ax.barh(y, e0[0] - prev, left=prev, color=col["data"], height=0.8)
            ax.barh(y, e0[1] - e0[0], left=e0[0], color=col["compute"], height=0.8)
            if h["det"] and e0[2] is not None:
                ax.barh(y, e0[2] - e0[1], left=e0[1], color=col["turn"], height=0.8)
                ax.barh(y, e0[3] - e0[2], left=e0[2], color=col["dq"], height=0.8)
            elif e0[3] is not None:
                ax.barh(y, e0[3] - e0[1], left=e0[1], color=col["dq"], height=0.8)
            prev = e0[3]
    ax.set_xlabel("ns")
    ax.set_ylabel("SM")
    ax.set_title(os.path.basename(path) + " (blue compute, red turn wait, orange dQ, gray data)")
    out = f"{prefix}{os.path.splitext(os.path.basename(path))[0]}.png"
    fig.savefig(out, dpi=80, bbox_inches="tight")
    plt.close(fig)
    print(f"  timeline: {out}")


def run(a):
    import torch
    os.environ["FLASHC_LIBRARY"] = os.path.abspath(a.lib)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "python"))
    import flashc
    os.makedirs(a.out, exist_ok=True)
    d = a.d
    H = 2048 // d
    paths = []
    for S in (int(x) for x in a.seqlens.split(",")):
        B = max(1, 16384 // S)
        for causal in (int(x) for x in a.causal.split(",")):
            torch.manual_seed(0)
            q, k, v = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16,
                                   requires_grad=True) for _ in range(3))
            do = torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16)
            for cfg in a.configs.split(","):
                mode, fam = cfg.split(":")
                # detP: over P planes (FLASHC_CUDA_BWD_DET_PLANES); free / freeP: the diagnostic
                # FLASHC_CUDA_BWD_DET_FREE=1 (deterministic mode's instructions, no waiting)
                det = mode.startswith(("det", "free"))
                planes = mode[4:] if mode.startswith("free") else mode[3:] if det else ""
                os.environ.pop("FLASHC_CUDA_BWD_DET_PLANES", None)
                os.environ.pop("FLASHC_CUDA_BWD_DET_FREE", None)
                if planes:
                    os.environ["FLASHC_CUDA_BWD_DET_PLANES"] = planes
                if mode.startswith("free"):
                    os.environ["FLASHC_CUDA_BWD_DET_FREE"] = "1"
                os.environ["FLASHC_CUDA_BWD_KERNEL"] = fam
                path = os.path.join(a.out, f"{d}_{S}_{'c' if causal else 'n'}_{mode}_{fam}.bin")
                if os.path.exists(path):  # a file of an earlier run must not pass for this one's
                    os.remove(path)
                for traced in (False, True):  # a warm call, then the traced one
                    if traced:
                        os.environ["FLASHC_CUDA_BWD_TRACE"] = path
                    q.grad = k.grad = v.grad = None
                    o = flashc.flash_attn_func(q, k, v, causal=bool(causal), deterministic=det)
                    o.backward(do)
                    torch.cuda.synchronize()
                    os.environ.pop("FLASHC_CUDA_BWD_TRACE", None)
                if os.path.exists(path):
                    paths.append(path)
                else:
                    print(f"{path}: not written (the family did not serve the call?)")
    os.environ.pop("FLASHC_CUDA_BWD_KERNEL", None)
    os.environ.pop("FLASHC_CUDA_BWD_DET_PLANES", None)
    os.environ.pop("FLASHC_CUDA_BWD_DET_FREE", None)
    return paths


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--lib", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--d", type=int, default=256, choices=(64, 192, 256))
    r.add_argument("--seqlens", default="2048,8192")
    r.add_argument("--causal", default="0,1")
    r.add_argument("--configs", default="fast:sm90h,det:sm90h,det:sm90hl")
    r.add_argument("--png", default=None, help="timeline PNGs with this path prefix")
    rd = sub.add_parser("read")
    rd.add_argument("files", nargs="+")
    rd.add_argument("--png", default=None)
    a = ap.parse_args()
    paths = run(a) if a.cmd == "run" else [p for f in a.files for p in sorted(glob.glob(f))]
    rows = [x for x in (report(p) for p in paths) if x]
    if a.png:
        for p in paths:
            png(p, a.png)
    if rows:
        print("\n(layout 2 rows: data = after the staging, turn = the consumers' staging wait, dq "
              "not applicable)")
        print("\n| trace | span us | sm_busy | step us | prologue | data | compute | turn | dq | "
              "epilogue |")
        print("|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        for x in rows:
            print(f"| {x['name']} | {x['span_us']:.1f} | {x['sm_busy']:.3f} | {x['step_us']:.2f} | "
                  + " | ".join(f"{x[k]:.3f}" for k in ("prologue", "data", "compute", "turn", "dq",
                                                      "epilogue")) + " |")
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
