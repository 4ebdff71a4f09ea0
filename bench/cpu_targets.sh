#!/usr/bin/env bash
# bench/cpu_targets.sh [BUILD] — the CPU-speed targets in one run of `flashc bench` rows, each
# read against a ceiling measured in the same script (OpenBLAS sgemm, stream copy):
#   forward f32 d=128 / d=64 (n = 2048, 16 heads) vs sgemm; causal vs non-causal time;
#   backward vs sgemm; bf16/f16 forward vs f32; RMSNorm and SwiGLU (f32, bf16, f16) vs copy.
# 2 threads. Prints the md rows only; run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build}/flashc
common=(--threads 2 --heads 16 --n 2048)
run() { "$B" bench "$@" 2>/dev/null | grep -E '^\| (attn|attn_bwd|sgemm|copy|rmsnorm|swiglu) '; }
"$B" bench --op softmax --n 64 --reps 3 2>/dev/null | grep -E '^\|( op |---)' # the table header
run --op attn,attn_bwd --impl flash "${common[@]}" --d 128 --ceiling
run --op attn,attn_bwd --impl flash "${common[@]}" --d 128 --causal
run --op attn,attn_bwd --impl flash "${common[@]}" --d 64
run --op attn --impl flash "${common[@]}" --d 64 --causal
for dt in bf16 f16; do run --op attn --impl flash "${common[@]}" --d 128 --dtype "$dt"; done
for dt in f32 bf16 f16; do
    run --op rmsnorm,swiglu --impl fused --threads 2 --tokens 8192 --hidden 4096 --inter 4096 --dtype "$dt" --ceiling
done
