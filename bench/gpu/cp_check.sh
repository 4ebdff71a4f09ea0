#!/usr/bin/env bash
# bench/gpu/cp_check.sh — context parallelism (issue 17) on ONE GPU: builds libflashc with CUDA
# and the NCCL transport, then runs
#   1. tests/test_cp_nccl: a 1-rank NCCL communicator (flashc_cp_comm_nccl_init) and 2..8
#      simulated ranks sharing the GPU, forward and backward against single-call attention and
#      the float64 reference (the 2x rule); see the test's header for what 1 rank cannot show
#   2. tests/test_cp: the CPU simulated ring (the same as CI) on this host's CPU
#   3. bench/cp_scale.c with --gpus 1: the ring's own overhead at N = 1 (pack, merge, stores,
#      the NCCL stream's events) against the single-GPU kernel, causal, 32k and 128k tokens
# Usage (staged as bench/gpu/stage.sh describes):
#   cd .xfer/NAME && FLASHC_DEPS=$PWD/.deps bench/gpu/cp_check.sh
# FLASHC_BUILD=dir reuses a finished build. Logs go to $OUT (default build-gpu/out).
# NVLink multicast stays off: NCCL_NVLS_ENABLE=0 (and the torch / NVSHMEM switches) for every
# step; nothing here calls cuMulticastCreate.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }

nvidia-smi --query-gpu=name,driver_version --format=csv 2>&1 | tee "$OUT/gpu.txt"
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
# libnccl.so.2: the loader's, else the CUDA toolkit's or PyTorch's wheel (FLASHC_NCCL_LIBRARY)
if [ -z "${FLASHC_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl.so.2 '; then
  for c in /usr/local/cuda/lib/libnccl.so.2 /usr/local/cuda/lib64/libnccl.so.2 \
           $(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null); do
    [ -f "$c" ] && { export FLASHC_NCCL_LIBRARY="$c"; break; }
  done
fi
echo "NCCL library: ${FLASHC_NCCL_LIBRARY:-libnccl.so.2 on the loader path}"

BUILD=${FLASHC_BUILD:-build-gpu}
if [ -z "${FLASHC_BUILD:-}" ]; then
  step "build"
  { cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DFLASHC_TESTS=ON &&
    cmake --build "$BUILD" -j "$(nproc)" --target test_cp_nccl test_cp flashc_cp_scale; } \
    >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; echo "build failed"; exit 1; }
  grep -E "NCCL transport|CUDA backend" "$OUT/build.log"
fi

step "test_cp_nccl (1 NCCL rank; 2..8 simulated ranks on this GPU)"
timeout 600 "$BUILD/tests/test_cp_nccl" >"$OUT/test_cp_nccl.log" 2>&1
rc=$?
grep -vE "^  (o|lse|dq|dk|dv) " "$OUT/test_cp_nccl.log" | tail -30
[ "$rc" = 0 ] || { status=1; echo "TEST_CP_NCCL FAILED (rc $rc)"; }

step "test_cp (CPU simulated ring)"
OMP_WAIT_POLICY=passive OMP_NUM_THREADS=4 timeout 300 "$BUILD/tests/test_cp" >"$OUT/test_cp.log" 2>&1
rc=$?
tail -4 "$OUT/test_cp.log"
[ "$rc" = 0 ] || { status=1; echo "TEST_CP FAILED (rc $rc)"; }

step "ring overhead at N = 1 (flashc_cp_scale --gpus 1)"
timeout 300 "$BUILD/flashc_cp_scale" --gpus 1 --mode strong --seqlens 32768,131072 --reps 5 \
  --warmup 2 >"$OUT/cp_scale_1gpu.jsonl" 2>"$OUT/cp_scale_1gpu.txt"
rc=$?
cat "$OUT/cp_scale_1gpu.txt"
[ "$rc" = 0 ] || { status=1; echo "CP_SCALE FAILED (rc $rc)"; }

step "summary"
echo "test_cp_nccl: $(grep -cE '^\[ +OK +\]' "$OUT/test_cp_nccl.log") ok, $(grep -cE '^\[ +(FAILED|SKIPPED) +\]' "$OUT/test_cp_nccl.log") failed/skipped;" \
     "cases: $(grep -cE '^N=[0-9]' "$OUT/test_cp_nccl.log")"
echo "status $status"
exit $status
