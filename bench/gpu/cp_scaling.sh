#!/usr/bin/env bash
# bench/gpu/cp_scaling.sh — strong and weak scaling of context-parallel attention on 2, 4 and 8
# GPUs of one host (issue 17's bench): bench/cp_scale.c, one thread per GPU, NCCL, no torchrun.
# NOT RUN YET: written while only one GPU could be lent; run it on an nvidia-h200-x8 (or -x2/-x4:
# GPU counts above what is visible are skipped). Prints the table; JSON lines go to $OUT.
#   strong: 128k, 256k, 512k, 1M tokens split over 1, 2, 4, 8 GPUs (efficiency T1 / (N TN),
#           T1 the single-GPU kernel on the whole sequence in the same run)
#   weak:   32k, 64k, 128k tokens per GPU
# Causal, zigzag, bf16, 32 query / 8 KV heads, D = 128, forward + backward. Target (issue 17):
# >= 85% efficiency on 8 GPUs at 1M tokens; per-GPU TFLOP/s >= 90% of the kernel's on one slice.
# Usage: bench/gpu/cp_scaling.sh strong|strong1m|weak|serialized (one phase per device call).
# FLASHC_BUILD=dir reuses a build; FLASHC_CP_ARGS adds options (e.g. "--shard striped").
set -uo pipefail
cd "$(dirname "$0")/../.."
# NVLink multicast off (KINDS.md): NVLS objects are what the lent machines refuse
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
BUILD=${FLASHC_BUILD:-build-gpu}
if [ -z "${FLASHC_BUILD:-}" ]; then
  { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFLASHC_TESTS=OFF &&
    cmake --build "$BUILD" -j "$(nproc)" --target flashc_cp_scale; } >"$OUT/build.log" 2>&1 ||
    { tail -40 "$OUT/build.log"; exit 1; }
fi
nvidia-smi topo -m 2>&1 | tee "$OUT/topo.txt"
status=0
# One phase per call (a device command is limited to 10 minutes; the single-GPU kernel alone
# takes about a minute per fwd+bwd at 1M tokens, estimated from its ~550 TFLOP/s, not measured).
phase=${1:-strong}
run() { echo "=== $phase: $*"; "$BUILD/flashc_cp_scale" "$@" ${FLASHC_CP_ARGS:-} >>"$OUT/cp_$phase.jsonl" || status=1; }
case "$phase" in
  strong)     run --gpus 1,2,4,8 --mode strong --seqlens 131072,262144,524288 --reps 5 --warmup 2 ;;
  strong1m)   run --gpus 2,4,8 --mode strong --seqlens 1048576 --reps 3 --warmup 1 ;;
  weak)       run --gpus 1,2,4,8 --mode weak --seqlens 32768,65536,131072 --reps 5 --warmup 2 ;;
  serialized) run --gpus 8 --mode strong --seqlens 524288 --serialize 1 --reps 3 --warmup 1 ;;
  *) echo "usage: $0 strong|strong1m|weak|serialized"; exit 2 ;;
esac
exit $status
