#!/usr/bin/env bash
# bench/gpu/device_call.sh SCRIPT... — the lead's device call (how the sessions of 2026-12-05/06
# spent their 30 minutes): one targets-only build for sm_90a alone into build-c1 (the lent H100 /
# H200 runs sm_90a objects, the sm80 kernels included; dropping the sm_80 pass halves the build),
# then each bench/gpu/s*.sh SCRIPT given, one after another, each with build-c1 as its BUILD_DIR
# under a hard 155 s (FLASHC_CALL_SCRIPT_LIMIT overrides), its output in $OUT/<name>/ tarred to
# $OUT/<name>.tgz as soon as it ends (a call cut by its limit still returns the scripts that
# finished), its stdout's last 40 lines
# printed and kept in build-c1/s_logs/ (a follow-up call on the still-warm machine reads them:
# the build folder survives between calls, $OUT does not; build_stamp.sh keeps its objects when
# the tree is byte for byte the one it was built from).
# Needs FLASHC_DEPS (default .xfer/deps): a folder made by bench/gpu/stage.sh (cmocka), carried
# into the call. A follow-up call: FLASHC_DEPS=$PWD/.xfer/deps bash bench/gpu/final_check.sh
# after `ln -s build-c1 build-final` reuses the build (the whole GPU suite, sanitizers, the
# host's CPU ctest). FLASHC_CALL_TARGETS (default "flashc test_cuda_attn test_cuda_attn_bwd").
# Machine code for the lent Hopper only (FLASHC_CUDA_ARCHS=90a, src/cuda/cuda.cmake).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
DEPS=${FLASHC_DEPS:-$PWD/.xfer/deps}
export PKG_CONFIG_PATH=$DEPS/lib/pkgconfig LD_LIBRARY_PATH=$DEPS/lib NCCL_NVLS_ENABLE=0
R=${OUT:?OUT: the output folder of the device call} B=build-c1 T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader
. bench/gpu/build_stamp.sh
stamp_reuse $B 2>&1 || true
# shellcheck disable=SC2086
{ cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFLASHC_CUDA_ARCHS=90a &&
  cmake --build $B -j"$(nproc)" --target ${FLASHC_CALL_TARGETS:-flashc test_cuda_attn test_cuda_attn_bwd}; } \
  >"$R/build.log" 2>&1 || { tail -30 "$R/build.log"; exit 1; }
stamp_write $B
echo "build $(($(date +%s) - T0)) s"
mkdir -p $B/s_logs
for s in "$@"; do
  n=$(basename "$s" .sh)
  mkdir -p "$R/$n"
  t1=$(date +%s)
  OUT=$R/$n timeout -k 5 "${FLASHC_CALL_SCRIPT_LIMIT:-155}" bash "$s" $B >"$R/$n/stdout.log" 2>&1
  rc=$?
  echo "== $n rc $rc $(($(date +%s) - t1)) s"
  tail -40 "$R/$n/stdout.log"
  cp "$R/$n/stdout.log" "$B/s_logs/$n.log"
  (cd "$R" && tar czf "$n.tgz" "$n" && rm -rf "$n")
done
echo "total $(($(date +%s) - T0)) s"
