#!/usr/bin/env python3
"""Which kernels serve a flashc CUDA backward under each FLASHC_CUDA_BWD_KERNEL value: one call
(bf16, B 2, S 1024, d as given, fast and deterministic) under torch.profiler, the names of the
library's kernels it launched, demangled by the profiler. A forced family that does not serve
the problem falls back to the dispatcher's choice silently (attn_bwd.cu); this shows whether it
did, so that a forced test or bench run is known to have run the family it names.

usage: bwd_which.py --lib build/libflashc.so [--d 64] [--families "",sm90v3w]
"""
import argparse
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_bwd as bb  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--d", type=int, default=64)
    ap.add_argument("--families", default=",sm90v3w")
    a = ap.parse_args()
    lib = ctypes.CDLL(a.lib)
    lib.flashc_last_error.restype = ctypes.c_char_p
    B, S, H, d = 2, 1024, 4, a.d
    torch.manual_seed(0)
    q, k, v, dout = (torch.randn(B, S, H, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    o = torch.empty_like(q)
    lse = torch.empty(B, H, S, device="cuda", dtype=torch.float32)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    stream = torch.cuda.current_stream().cuda_stream
    refs = [ctypes.byref(bb.view(x)) for x in (q, k, v, o, dout, lse, dq, dk, dv)]
    p = bb.params(False, stream)
    assert lib.flashc_attn_fwd(ctypes.byref(p), refs[0], refs[1], refs[2], refs[3], refs[5],
                               None) == 0, lib.flashc_last_error()
    bad = 0
    for fam in a.families.split(","):
        for det in (0, 1):
            bb.family_env((0, 0, det, fam) if fam else ())
            pb = bb.params(False, stream, det)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                st = lib.flashc_attn_bwd(ctypes.byref(pb), *refs, None)
                torch.cuda.synchronize()
            names = sorted({e.name for e in prof.events() if "attn_bwd" in e.name and
                            "pre_kernel" not in e.name and "post" not in e.name})
            short = [n.split("(")[0].replace("attn_bwd_", "").replace("__nv_bfloat16", "bf16")
                     for n in names]
            bad += st != 0
            print(f"which: FLASHC_CUDA_BWD_KERNEL={fam or '(unset)'} det={det} d={d}: rc {st}; "
                  f"main kernel {', '.join(short) or '?'}", flush=True)
    bb.family_env(())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
