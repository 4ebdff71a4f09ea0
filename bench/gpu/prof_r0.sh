#!/usr/bin/env bash
# bench/gpu/prof_r0.sh — one device call (2026-12-01 late session): build the library and the GPU
# tests, run the short GPU tests and the CUDA pytest cases (the host-side changes of the last
# session: fwd_args_common in attn.cu, the varlen-backward workspace in the binding), then
# Nsight Compute over decode, RMSNorm fwd/bwd, the sm90 forward and backward and their torch
# peers (bench/gpu/prof_drive.py): a compact metric table over every kernel, and the full
# section set over flashc's own kernels. Files under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-prof/out}; mkdir -p "$OUT"
export PKG_CONFIG_PATH="${FLASHC_DEPS:-/nonexistent}/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="${FLASHC_DEPS:-/nonexistent}/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
B=build-prof
t0=$SECONDS
{ cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release && cmake --build $B -j "$(nproc)" --target flashc test_cuda_attn test_cuda_attn_bwd test_cuda_serving; } >"$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
echo "build $((SECONDS - t0)) s" | tee "$OUT/summary.txt"
export FLASHC_LIBRARY=$PWD/$B/libflashc.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
{
  for t in test_cuda_attn test_cuda_attn_bwd test_cuda_serving; do
    t1=$SECONDS
    FLASHC_TEST_SMALL=1 timeout 120 $B/tests/$t >"$OUT/t_$t.log" 2>&1
    echo "$t (small): rc $?, $((SECONDS - t1)) s, $(grep -E 'PASSED|FAILED' "$OUT/t_$t.log" | tail -2 | tr '\n' ' ')"
  done
  t1=$SECONDS
  timeout 150 python3 -m pytest python/tests -q -p no:cacheprovider -k "cuda or varlen or kvcache" >"$OUT/t_pytest.log" 2>&1
  echo "pytest (cuda|varlen|kvcache): rc $?, $((SECONDS - t1)) s, $(tail -1 "$OUT/t_pytest.log")"
} | tee -a "$OUT/summary.txt"
cat "$OUT"/t_*.log >"$OUT/tests.log"; rm -f "$OUT"/t_*.log
N="timeout 150 ncu --clock-control none"
M=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,launch__occupancy_limit_registers,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
prof() { # name, env, driver op, flashc kernel regex, skip, count
  local name=$1 envs=$2 op=$3 rx=$4 skip=$5 cnt=$6 t1=$SECONDS
  env $envs $N --csv --page raw --metrics $M python3 bench/gpu/prof_drive.py $op >"$OUT/m_$name.csv" 2>&1
  env $envs $N --kernel-name "regex:$rx" --launch-skip $skip --launch-count $cnt --set full \
    python3 bench/gpu/prof_drive.py $op >"$OUT/f_$name.txt" 2>&1
  echo "ncu $name: $((SECONDS - t1)) s" | tee -a "$OUT/summary.txt"
}
prof decode1x32k "B=1 CTX=32768" decode attn_decode 8 4
prof decode16x32k "B=16 CTX=32768" decode attn_decode 8 2
prof rms "" rms rms_ 3 1
prof rmsbwd "" rms_bwd rms_ 6 2
prof fwd4k "S=4096 D=128" fwd attn_fwd 3 1
prof fwd4kc "S=4096 D=128 CAUSAL=1" fwd attn_fwd 3 1
prof fwd4k64 "S=4096 D=64" fwd attn_fwd 3 1
prof bwd4k "S=4096 D=128" bwd "attn_bwd" 9 3
prof bwd4k64 "S=4096 D=64" bwd "attn_bwd" 9 3
# at most 8 files come back: metrics in one, full sets in two
for f in "$OUT"/m_*.csv; do echo "=== $(basename "$f")"; grep -v '^==PROF==' "$f"; done >"$OUT/metrics.csv"
for f in "$OUT"/f_decode*.txt "$OUT"/f_rms*.txt; do echo "=== $(basename "$f")"; cat "$f"; done >"$OUT/full_mem.txt"
for f in "$OUT"/f_fwd*.txt "$OUT"/f_bwd*.txt; do echo "=== $(basename "$f")"; cat "$f"; done >"$OUT/full_attn.txt"
rm -f "$OUT"/m_*.csv "$OUT"/f_*.txt
ls -la "$OUT"; cat "$OUT/summary.txt"
