#!/usr/bin/env python3
"""The warp-specialised Hopper backward (sm90v3, helper bwd4, issue 12) against the d 128
default (sm90) and SDPA's flash (FlashAttention-2) and cuDNN backward, in one process.

Backward alone, bf16, batch * seqlen = 16384, hidden 2048 (H = 2048 / d), TFLOP/s with
bench_bwd.py's method (its part2: flashc through ctypes with a preallocated workspace, each
configuration first checked against SDPA flash's gradients, else WRONG and not timed; SDPA
through autograd; CUDA events, median of >= 10 calls after warm-up; FLOPs 2.5 x 4 B H S^2 d,
halved when causal). The flashc configurations differ only in FLASHC_CUDA_BWD_KERNEL:
  flashc / flashc_det   the dispatcher's choice (sm90v3w at d 128 and d 64 since 2026-12-03;
                        sm90v2s at d 64 before)
  sm90 / sm90_det       the sm90 family (attn_bwd_sm90.cu; d 128 only), forced
  v3 / v3_det           sm90v3 (src/cuda/attn_bwd_sm90v3.cu; d 128 only)
  v3t / v3t_det         sm90v3t: sm90v3 with dQ by tensor reduce-adds (d 128 only)
  v3q / v3q_det         sm90v3q: sm90v3t with dV, dK issued after dQ (d 128 only)
  v3w / v3w_det         sm90v3w: sm90v3q with the dQ adds on writer warps (d 128; d 64 too
                        since helper bwd6: dQ by keys)
  v3wg_det              sm90v3wg's deterministic mode: sm90v3w's, its blocks in groups of heads
                        (helper bwd9; its fast mode is sm90v3w's kernel, not timed)
  v3u / v3u_det         sm90v3u: sm90v3wg with an unmasked softmax loop for tiles without
                        masked keys (helper bwd13; d 128 and d 64)
  v3e / v3e_det         sm90v3e: sm90v3u with dV issued before the consumers' meeting (helper
                        bwd15; d 128 and d 64)
  v2s / v2s_det         sm90v2s (src/cuda/attn_bwd_sm90v2.cu; d 64 only): d 64's default until
                        2026-12-03, opt-in since
  pad / pad_det         sm90v3u forced at any head dim: at the multiples of 8 below 64 and 128
                        its padded entries (helper bwd16; opt-in), where the default is sm80
  80p / 80p_det         sm80p forced: the mma.sync backward above d 128 with one thread block
                        per K/V block and two warps per 16 keys (helper bwd18; opt-in), where
                        the default is sm80's two column slices
  90h / 90h_det         sm90h forced: the wgmma backward above d 128 (helper bwd20; opt-in;
                        d 256, and 136..248 padded into it), where the default is sm80p
  v3d / v3d_det         sm90v3d forced: sm90v3u whose deterministic mode at d 64 pipelines
                        the writer warps' dQ adds (helper bwd21; opt-in; d 64 only; its fast
                        mode is sm90v3u's kernel)
  90h2 / 90h2_det       sm90h2 forced: sm90h's d 192 kernel in 128 x 64 steps (helper bwd22;
                        opt-in; d 192, and 136..184 padded into it)
  90h2e / 90h2e_det     sm90h2e forced: sm90h2 with dV / dK issued before dQ, two dQ
                        accumulators (helper bwd22; opt-in)
  90h2l_det / 90hl_det  sm90h2l / sm90hl forced (d 192 / 256 only): sm90h2 / sm90h whose
                        deterministic mode completes a Q block's dQ adds once and releases the
                        turn a Q block late (opt-in; sm90h2g / hg / h2q / hq / h2r / hr, which
                        bench/gpu/s18_bwd23.sh timed, were removed after that run)
  l_det / l_det_p2 / l_det_p4 / l_free / l_free_p2
                        the late-release family of the head dim (sm90h2l at d 192, sm90hl at
                        d 256; skipped elsewhere) over 1 / 2 / 4 deterministic planes, and with
                        FLASHC_CUDA_BWD_DET_FREE=1 (its turns free: a diagnostic, not
                        deterministic)
  hs / hs_det            sm90hs forced (d 64 / 128 / 192 / 256): the split family, dK / dV by
                        the fused kernels without dQ, dQ by a kernel of its own (deterministic
                        in both modes, the same bits)
  nodq                  the fused base family (sm90v3d at d 64, sm90v3u at d 128, sm90h2 at
                        d 192, sm90h at d 256) in fast mode with FLASHC_CUDA_BWD_NO_DQ=1: dQ's
                        products, staging and adds left out, dQ zero and not checked: the
                        leave-one-out of the dQ path
  base                  the fused base family in fast mode
  o0 / o1 / o2 / o4 / o8 / okm
                        fast mode with FLASHC_CUDA_BWD_ORDER = 0 (head by head, the order
                        before 2026-12-06 evening), 1, 2, 4, 8 and 1e6: under the causal mask
                        the last ceil(C SMs / N) heads walked K block by K block (attn_bwd.cu)
  base_det              the head dim's base family (sm90h2 at d 192, sm90h at d 256; skipped
                        elsewhere) in deterministic mode: the default before 2026-12-06 late
                        morning, when the late-release kernels took it
The table (printed last) gives each TFLOP/s and the ratios the issue's target names.

usage: bench_bwd4.py --lib build/libflashc.so [--out x.json] [--dims 128,64] [--seqlens 2048,16384]
                    [--configs flashc,...] [--configs-d128 flashc,...] [--budget-ms 100]
                    [--peers flash,cudnn] [--causal both|yes|no]
"""
import argparse
import ctypes
import json
import math
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_bwd as bb  # noqa: E402
import torch  # noqa: E402

# bench_bwd.part2 treats a name starting "flashc" as a flashc configuration
CONFIGS = {"flashc_v3": (0, 0, False, "sm90v3"), "flashc_v3_det": (0, 0, True, "sm90v3"),
           "flashc_v3t": (0, 0, False, "sm90v3t"), "flashc_v3t_det": (0, 0, True, "sm90v3t"),
           "flashc_v3q": (0, 0, False, "sm90v3q"), "flashc_v3q_det": (0, 0, True, "sm90v3q"),
           "flashc_v3w": (0, 0, False, "sm90v3w"), "flashc_v3w_det": (0, 0, True, "sm90v3w"),
           "flashc_v3wg_det": (0, 0, True, "sm90v3wg"),
           "flashc_v3u": (0, 0, False, "sm90v3u"), "flashc_v3u_det": (0, 0, True, "sm90v3u"),
           "flashc_v3e": (0, 0, False, "sm90v3e"), "flashc_v3e_det": (0, 0, True, "sm90v3e"),
           "flashc_v2s": (0, 0, False, "sm90v2s"), "flashc_v2s_det": (0, 0, True, "sm90v2s"),
           "flashc_sm90": (0, 0, False, "sm90"), "flashc_sm90_det": (0, 0, True, "sm90"),
           "flashc_pad": (0, 0, False, "sm90v3u"), "flashc_pad_det": (0, 0, True, "sm90v3u"),
           "flashc_80p": (0, 0, False, "sm80p"), "flashc_80p_det": (0, 0, True, "sm80p"),
           "flashc_90h": (0, 0, False, "sm90h"), "flashc_90h_det": (0, 0, True, "sm90h"),
           "flashc_v3d": (0, 0, False, "sm90v3d"), "flashc_v3d_det": (0, 0, True, "sm90v3d"),
           "flashc_90h2": (0, 0, False, "sm90h2"), "flashc_90h2_det": (0, 0, True, "sm90h2"),
           "flashc_90h2e": (0, 0, False, "sm90h2e"), "flashc_90h2e_det": (0, 0, True, "sm90h2e"),
           "flashc_90h2l_det": (0, 0, True, "sm90h2l"), "flashc_90hl_det": (0, 0, True, "sm90hl"),
           # deterministic mode over P planes (FLASHC_CUDA_BWD_DET_PLANES; the sm90h families)
           "flashc_det_p1": (0, 0, True, "", 1),
           "flashc_det_p2": (0, 0, True, "", 2), "flashc_det_p3": (0, 0, True, "", 3),
           "flashc_det_p4": (0, 0, True, "", 4), "flashc_det_p8": (0, 0, True, "", 8),
           "flashc_90hl_det_p2": (0, 0, True, "sm90hl", 2),
           # the diagnostic FLASHC_CUDA_BWD_DET_FREE=1: deterministic mode's instructions, its
           # turns never waited for (not deterministic); P = 1 and 2
           "flashc_detfree": (0, 0, True, "", 1, 1), "flashc_detfree_p2": (0, 0, True, "", 2, 1),
           # "L": the late-release family of the head dim (L_FAMILY), over 1, 2, 4 planes, and
           # with its turns free (the diagnostic): one column for d 192 and d 256
           "flashc_l_det": (0, 0, True, "L", 1), "flashc_l_det_p2": (0, 0, True, "L", 2),
           "flashc_l_det_p4": (0, 0, True, "L", 4), "flashc_l_free": (0, 0, True, "L", 1, 1),
           "flashc_l_free_p2": (0, 0, True, "L", 2, 1),
           # "BASE": the head dim's base family (sm90h2 at d 192, sm90h at d 256) with its own
           # default planes: the deterministic default before the late-release kernels took it
           "flashc_base_det": (0, 0, True, "BASE"),
           # FLASHC_CUDA_BWD_DET_FENCE=0: the turn's release without its __threadfence (the
           # default since 2026-12-06 midday; and with the turns free too); =1 (det_fence):
           # with it, the default before
           "flashc_det_nofence": (0, 0, True, "", "", "", 0),
           "flashc_detfree_nofence": (0, 0, True, "", "", 1, 0),
           "flashc_det_fence": (0, 0, True, "", "", "", 1),
           # FLASHC_CUDA_BWD_ORDER=C: under an upper key bound fast mode walks the grid's last
           # ceil(C SMs / N) heads K block by K block (attn_bwd.cu's order_tail; the default C
           # is its BWD_ORDER_SPREAD); o0 = every head head by head (the order before); until
           # commit "bwd order: the tail walk" C named groups of heads walked so (okm: one group)
           "flashc_o0": (0, 0, False, "", "", "", "", 0),
           "flashc_o1": (0, 0, False, "", "", "", "", 1),
           "flashc_o2": (0, 0, False, "", "", "", "", 2),
           "flashc_o4": (0, 0, False, "", "", "", "", 4),
           "flashc_o8": (0, 0, False, "", "", "", "", 8),
           "flashc_okm": (0, 0, False, "", "", "", "", 1000000),
           # FLASHC_CUDA_BWD_NO_DQ=1 (a diagnostic; the sm90h / sm90v3u / sm90v3d families' exact
           # fast-mode kernels): the step without dQ's products, staging and adds, dQ left zero
           # (dK, dV checked alone): the dK / dV half of a backward with a dQ kernel of its own
           "flashc_nodq": (0, 0, False, "BASE", "", "", "", "", 1),
           # the head dim's fused base family in fast mode (sm90h2 at d 192, sm90h at d 256):
           # the fast default before sm90hs took d 256
           "flashc_base": (0, 0, False, "BASE"),
           # sm90hs, the split family (d 64-256): dK / dV by the fused kernels without dQ,
           # dQ by a kernel of its own (attn_bwd_dq_sm90.cu); deterministic by construction
           "flashc_hs": (0, 0, False, "sm90hs"), "flashc_hs_det": (0, 0, True, "sm90hs"),
           # sm90hs at d 192 (and padded 136-184) with the 64-row dK / dV kernel (opt-in:
           # block_q 64), two Q / dO stages where the default 128-row one has one
           "flashc_hs64": (64, 64, False, "sm90hs"), "flashc_hs64_det": (64, 64, True, "sm90hs")}
PER_DIM = {"L": {192: "sm90h2l", 256: "sm90hl"},
           "BASE": {64: "sm90v3d", 128: "sm90v3u", 192: "sm90h2", 256: "sm90h"}}
# sm90h2l / sm90hl serve one head dim each: elsewhere they would time the dispatcher's choice again
ONE_DIM = {"flashc_90h2l": 192, "flashc_90hl": 256}


def serves(config, d):
    """Whether config times something other than the dispatcher's choice at head dim d."""
    fam = CONFIGS.get(config, ("",) * 4)[3]
    if config in ("flashc_hs", "flashc_hs_det"):  # d 64, 128 (opt-in), 192, 256 and padded 136-248
        return d in (64, 128) or (136 <= d <= 256 and d % 8 == 0)
    if config in ("flashc_hs64", "flashc_hs64_det"):  # d 192 and padded 136-184 only
        return 136 <= d <= 192 and d % 8 == 0
    if fam in PER_DIM:
        return d in PER_DIM[fam]
    return all(not config.startswith(k) or d == v for k, v in ONE_DIM.items())


def _term(signum, frame):
    raise SystemExit(124)  # timeout's SIGTERM: the finally below still writes the table


def main():
    signal.signal(signal.SIGTERM, _term)
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--dims", default="128,64")
    ap.add_argument("--seqlens", default="2048,16384")
    ap.add_argument("--configs", default="flashc,flashc_det,flashc_sm90,flashc_sm90_det,flashc_v3w,"
                    "flashc_v3w_det")
    ap.add_argument("--configs-d128", default=None,
                    help="the configurations at d 128 (default: --configs); e.g. without "
                    "flashc_v3w, the default there")
    ap.add_argument("--budget-ms", type=float, default=100.0)
    ap.add_argument("--causal", default="both", choices=("both", "yes", "no"),
                    help="the masks timed (default both)")
    ap.add_argument("--peers", default="flash,cudnn",
                    help="SDPA's backends timed beside flashc; flash is needed (its gradients "
                    "are the check), cudnn may be left out for a shorter run")
    a = ap.parse_args()
    bb.BUDGET_MS = a.budget_ms
    bb.CAUSALS = {"both": (False, True), "yes": (True,), "no": (False,)}[a.causal]
    bb.FLASHC_CONFIGS.update(CONFIGS)
    os.environ["FLASHC_LIBRARY"] = os.path.abspath(a.lib)
    lib = ctypes.CDLL(a.lib)
    lib.flashc_last_error.restype = ctypes.c_char_p
    lib.flashc_build_info.restype = ctypes.c_char_p
    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}; flashc {lib.flashc_build_info().decode()}",
          flush=True)
    rows = []
    configs = tuple(a.configs.split(","))
    configs128 = tuple(a.configs_d128.split(",")) if a.configs_d128 else configs
    seqlens = [int(x) for x in a.seqlens.split(",")]
    try:
        for d in (int(x) for x in a.dims.split(",")):
            # sm90v3* and sm90 serve d 128 only, sm90v3w d 64 too, sm90v2s d 64 only
            # (elsewhere: the dispatcher's choice again, not timed twice; pass --configs-d128);
            # flashc_pad* (sm90v3u forced) and flashc_80p* (sm80p) at every d
            cf = configs128 if d == 128 else tuple(
                c for c in configs if not c.startswith(("flashc_v3", "flashc_sm90", "flashc_v2s"))
                or (d == 64 and c.startswith(("flashc_v3w", "flashc_v3u", "flashc_v3e",
                                                "flashc_v2s", "flashc_v3d"))))
            cf = tuple(c for c in cf if serves(c, d))
            for name, cfg in CONFIGS.items():  # "L", "BASE" -> this head dim's family
                if cfg[3] in PER_DIM:
                    bb.FLASHC_CONFIGS[name] = cfg[:3] + (PER_DIM[cfg[3]].get(d, ""),) + cfg[4:]
            if cf:
                bb.part2(lib, seqlens, rows, d=d, configs=cf,
                         peers=tuple(p for p in a.peers.split(",") if p), part=3)
    finally:
        if a.out:
            with open(a.out, "w") as fh:
                json.dump({"device": dev.name, "torch": torch.__version__,
                           "cudnn": torch.backends.cudnn.version(),
                           "flashc": lib.flashc_build_info().decode(), "rows": rows}, fh, indent=1)
        table(rows, tuple(dict.fromkeys(configs + configs128)))
    return 1 if any(r.get("status") == "WRONG" for r in rows) else 0


def table(rows, configs):
    impls = [c for c in configs if any(r["impl"] == c for r in rows)] + ["flash", "cudnn"]
    nan = float("nan")
    ratios = [("v3/cuDNN", "flashc_v3", "cudnn"), ("v3/flash", "flashc_v3", "flash"),
              ("v3/default", "flashc_v3", "flashc"), ("v3det/v3", "flashc_v3_det", "flashc_v3"),
              ("v3det/det", "flashc_v3_det", "flashc_det"),
              ("v3t/cuDNN", "flashc_v3t", "cudnn"), ("v3t/flash", "flashc_v3t", "flash"),
              ("v3t/default", "flashc_v3t", "flashc"),
              ("v3tdet/v3t", "flashc_v3t_det", "flashc_v3t"),
              ("v3tdet/det", "flashc_v3t_det", "flashc_det"),
              ("v3q/cuDNN", "flashc_v3q", "cudnn"), ("v3q/default", "flashc_v3q", "flashc"),
              ("v3qdet/v3q", "flashc_v3q_det", "flashc_v3q"),
              ("v3w/cuDNN", "flashc_v3w", "cudnn"), ("v3w/flash", "flashc_v3w", "flash"),
              ("v3w/default", "flashc_v3w", "flashc"),
              ("v3wdet/v3w", "flashc_v3w_det", "flashc_v3w"),
              ("v3wdet/det", "flashc_v3w_det", "flashc_det"),
              ("v3wgdet/det", "flashc_v3wg_det", "flashc_det"),
              ("v3wgdet/fast", "flashc_v3wg_det", "flashc"),
              ("v3u/default", "flashc_v3u", "flashc"),
              ("v3udet/det", "flashc_v3u_det", "flashc_det"),
              ("v3e/default", "flashc_v3e", "flashc"), ("v3edet/det", "flashc_v3e_det", "flashc_det"),
              ("v3edet/v3e", "flashc_v3e_det", "flashc_v3e"),
              ("v3e/cuDNN", "flashc_v3e", "cudnn"), ("v3e/flash", "flashc_v3e", "flash"),
              ("default/v2s", "flashc", "flashc_v2s"), ("det/v2sdet", "flashc_det", "flashc_v2s_det"),
              ("v3w/sm90", "flashc_v3w", "flashc_sm90"), ("v3q/sm90", "flashc_v3q", "flashc_sm90"),
              ("v3w/v3q", "flashc_v3w", "flashc_v3q"),
              ("default/sm90", "flashc", "flashc_sm90"), ("det/sm90det", "flashc_det", "flashc_sm90_det"),
              ("pad/default", "flashc_pad", "flashc"), ("paddet/det", "flashc_pad_det", "flashc_det"),
              ("pad/cuDNN", "flashc_pad", "cudnn"), ("pad/flash", "flashc_pad", "flash"),
              ("90h/default", "flashc_90h", "flashc"), ("90hdet/det", "flashc_90h_det", "flashc_det"),
              ("90h/flash", "flashc_90h", "flash"), ("90h/cuDNN", "flashc_90h", "cudnn"),
              ("v3ddet/det", "flashc_v3d_det", "flashc_det"),
              ("v3ddet/fast", "flashc_v3d_det", "flashc"),
              ("90h2/default", "flashc_90h2", "flashc"), ("90h2det/det", "flashc_90h2_det", "flashc_det"),
              ("90h2/90h", "flashc_90h2", "flashc_90h"), ("90h2det/90hdet", "flashc_90h2_det", "flashc_90h_det"),
              ("90h2/flash", "flashc_90h2", "flash"), ("90h2/cuDNN", "flashc_90h2", "cudnn"),
              ("90h2e/90h2", "flashc_90h2e", "flashc_90h2"),
              ("90h2edet/90h2det", "flashc_90h2e_det", "flashc_90h2_det"),
              ("90h2e/default", "flashc_90h2e", "flashc"), ("90h2e/flash", "flashc_90h2e", "flash"),
              ("90h2ldet/det", "flashc_90h2l_det", "flashc_det"),
              ("90hldet/det", "flashc_90hl_det", "flashc_det"),
              ("90hlp2/det", "flashc_90hl_det_p2", "flashc_det"),
              ("det/basedet", "flashc_det", "flashc_base_det"),
              ("nofence/det", "flashc_det_nofence", "flashc_det"),
              ("det/fence", "flashc_det", "flashc_det_fence"),
              ("nofence/fast", "flashc_det_nofence", "flashc"),
              ("freenofence/fast", "flashc_detfree_nofence", "flashc"),
              ("basedet/fast", "flashc_base_det", "flashc"),
              ("l/det", "flashc_l_det", "flashc_det"), ("lp2/det", "flashc_l_det_p2", "flashc_det"),
              ("lp4/det", "flashc_l_det_p4", "flashc_det"),
              ("lfree/fast", "flashc_l_free", "flashc"),
              ("lfreep2/fast", "flashc_l_free_p2", "flashc"),
              ("lp2/fast", "flashc_l_det_p2", "flashc"), ("lp4/fast", "flashc_l_det_p4", "flashc"),
              ("p2/det", "flashc_det_p2", "flashc_det"), ("p3/det", "flashc_det_p3", "flashc_det"),
              ("p4/det", "flashc_det_p4", "flashc_det"), ("p8/det", "flashc_det_p8", "flashc_det"),
              ("p2/fast", "flashc_det_p2", "flashc"), ("p4/fast", "flashc_det_p4", "flashc"),
              ("p8/fast", "flashc_det_p8", "flashc"),
              ("det/p1", "flashc_det", "flashc_det_p1"), ("p1/fast", "flashc_det_p1", "flashc"),
              ("free/fast", "flashc_detfree", "flashc"), ("free/p1", "flashc_detfree", "flashc_det_p1"),
              ("freep2/fast", "flashc_detfree_p2", "flashc"),
              ("o0/cuDNN", "flashc_o0", "cudnn"), ("default/o0", "flashc", "flashc_o0"),
              ("o1/o0", "flashc_o1", "flashc_o0"), ("o2/o0", "flashc_o2", "flashc_o0"),
              ("o4/o0", "flashc_o4", "flashc_o0"), ("o8/o0", "flashc_o8", "flashc_o0"),
              ("okm/o0", "flashc_okm", "flashc_o0"),
              ("nodq/base", "flashc_nodq", "flashc_base"),
              ("hs/base", "flashc_hs", "flashc_base"), ("hsdet/base", "flashc_hs_det", "flashc_base"),
              ("hsdet/ldet", "flashc_hs_det", "flashc_l_det"), ("hs/cuDNN", "flashc_hs", "cudnn"),
              ("hs/flash", "flashc_hs", "flash"),
              # at d 64 / 128 (sm90hs opt-in there): against the default's fast and
              # deterministic modes, and the dQ path's share of the default's step
              ("hs/default", "flashc_hs", "flashc"), ("hsdet/det", "flashc_hs_det", "flashc_det"),
              ("nodq/default", "flashc_nodq", "flashc"),
              ("hs64/default", "flashc_hs64", "flashc"), ("hs64/flash", "flashc_hs64", "flash"),
              ("default/cuDNN", "flashc", "cudnn"), ("default/flash", "flashc", "flash"),
              ("det/fast", "flashc_det", "flashc")]
    ratios = [x for x in ratios if x[1] in impls and x[2] in impls]
    print("\nbwd alone, bf16, B*S = 16k, hidden 2048: TFLOP/s (median); flashc = the dispatcher's "
          "choice (on compute capability 9.0 as of 2026-12-07: d 128 sm90v3u; d 64 sm90v3u, "
          "sm90v3d deterministic; d 192 / 256 sm90hs; "
          "attn_bwd.cu's table has the rest); vX = family sm90vX forced; sm90 = "
          "that family forced")
    print("| d | causal | S | " + " | ".join(i.replace("flashc_", "") for i in impls) + " | " +
          " | ".join(x[0] for x in ratios) + " |")
    print("|---|---|---|" + "---|" * (len(impls) + len(ratios)))
    for d in sorted({r["d"] for r in rows}, reverse=True):
        for causal in (False, True):
            for S in sorted({r["S"] for r in rows}):
                get = {r["impl"]: r for r in rows
                       if r["S"] == S and r["causal"] == causal and r["d"] == d}
                if not get:
                    continue
                t = {i: get[i].get("tflops", nan) if i in get else nan for i in impls}

                def ratio(x, y):
                    return f"{x / y:.2f}" if x == x and y == y and y > 0 else "-"
                cells = [f"{t[i]:.0f}" if not math.isnan(t[i]) else get.get(i, {}).get("status", "-")
                         for i in impls]
                print(f"| {d} | {'yes' if causal else 'no'} | {S} | " + " | ".join(cells) + " | " +
                      " | ".join(ratio(t[x[1]], t[x[2]]) for x in ratios) + " |")


if __name__ == "__main__":
    sys.exit(main())
