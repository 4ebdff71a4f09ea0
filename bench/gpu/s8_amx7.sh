#!/usr/bin/env bash
# bench/gpu/s8_amx7.sh BUILD_DIR — issue 16's "bf16 backward >= 3x flashc's f32 backward" on the
# H200 host's CPU (16-core Xeon, AMX-BF16; CPU only, the GPU stays with the other jobs), helper
# amx7, budget 90 s (hard timeouts inside; FLASHC_AMX7_LIMIT, default 86). What it checks there
# (bench/RESULTS.md "Issue 16: the bf16 backward's elementwise work (helper amx7)"): the AMX
# backward's P and dS in one pass (kernels.h p_ds: scale, e^(S - L) by v_exp2_p, dS) and the
# fused item's Q-block operands packed once, both the default for bf16 on AMX:
#   (a) on cores 12-15: the tests of that path on the real units (test_cpu_kernels: p_ds of the
#       avx512 instance against the scalar model; test_attn_bwd / test_attn_bwd_v2 .amx, the
#       default mm schedule, under the 2x rule, with each run's worst ratio to the bound;
#       test_attn_bwd_v2.bf16ref: the scalar model; test_threads.amx: the bits across threads);
#   (b) meanwhile on cores 8,9 (2 threads): bench/cpu_bwd_peer.py, flashc bf16 (the AMX
#       default, FLASHC_CPU_BWD_MM=1) against flashc f32 on the same values in one process,
#       interleaved rounds, medians and the per-round ratio's spread; d 128 / 64, n 1024 / 2048 /
#       4096, causal and not;
#   (c) meanwhile on cores 10,11 (2 threads): bench/cpu_sdpa_peer.py, the bf16 forward against
#       torch's CPU SDPA (unchanged by amx7: the issue's other target, re-read) at d 128 / 64,
#       n 2048 / 4096, if torch imports.
# All three at once (the tables print row by row: a lane cut by its timeout keeps its rows).
# BUILD_DIR: built with tests (libflashc.so, tests/); no rebuild. Logs in $OUT (default
# BUILD_DIR/out-amx7); the short tables LAST on stdout. FLASHC_AMX7_BENCH_CORES (8,9),
# FLASHC_AMX7_FWD_CORES (10,11) and FLASHC_AMX7_TEST_CORES (12-15) move the lanes.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin amx7 "${1:-}" tests/test_attn_bwd_v2
T0=$SECONDS
LIMIT=${FLASHC_AMX7_LIMIT:-86}
BC=${FLASHC_AMX7_BENCH_CORES:-8,9}
FC=${FLASHC_AMX7_FWD_CORES:-10,11}
TC=${FLASHC_AMX7_TEST_CORES:-12-15}
sum="$OUT/summary.txt"
: >"$sum"
s_machine
export FLASHC_LIBRARY=$LIB PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
unset FLASHC_CPU_BWD_MM FLASHC_CPU_AMX_FWD FLASHC_ISA
hastorch=0
python3 -c 'import torch' 2>/dev/null && hastorch=1

# (b) the backward table on cores 8,9, beside the tests
( timeout -k 2 $((LIMIT - 4)) python3 bench/cpu_bwd_peer.py --threads 2 --cores "$BC" --d 128,64 \
    --n 1024,2048,4096 --causal 0,1 --rounds 3 --mm 1 --no-default --no-torch --label bwd \
    >"$OUT/bwd.log" 2>&1
  echo "bwd peer (bf16 vs f32): rc $?, $((SECONDS - T0)) s" >"$OUT/peer.sum" ) &
peer_pid=$!

# (c) the forward against torch on cores 10,11
if [ "$hastorch" = 1 ]; then
  ( timeout -k 2 60 python3 bench/cpu_sdpa_peer.py --threads 2 --cores "$FC" --d 128,64 \
      --n 2048,4096 --causal 0,1 --rounds 3 --no-check --ceiling-n 0 --label fwd \
      >"$OUT/fwd.log" 2>&1
    echo "fwd peer (bf16 vs torch SDPA): rc $?, $((SECONDS - T0)) s" >"$OUT/fwd.sum" ) &
  fwd_pid=$!
else
  echo "fwd peer: skipped (no torch)" >"$OUT/fwd.sum"
  fwd_pid=
fi

# (a) tests on the real units, cores 12-15 (-V: the worst-ratio lines of passing runs too)
t=$SECONDS
timeout -k 2 45 taskset -c "$TC" ctest --test-dir "$B" -j 4 --timeout 43 -V \
  -R '^test_cpu_kernels$|^test_attn_bwd(_v2)?\.amx$|^test_attn_bwd_v2\.bf16ref$|^test_threads\.amx$' \
  >"$OUT/ctest.log" 2>&1
echo "tests (p_ds kernel, backward amx + bf16ref, threads): rc $?, $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest.log" | tail -1)" >>"$sum"
grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/ctest.log" | sed 's/  */ /g' >>"$sum"
grep -E 'worst ratio.* bf16 ' "$OUT/ctest.log" | sed 's/^[0-9]*: //' | cut -c1-170 >>"$sum"
grep -E 'max error|FLASHC_TEST_SEED|mm p_ds' "$OUT/ctest.log" | sed 's/^[0-9]*: //' | sort -u | head -8 >>"$sum"

wait "$peer_pid" $fwd_pid
cat "$OUT/peer.sum" "$OUT/fwd.sum" >>"$sum" 2>/dev/null

echo "total $((SECONDS - T0)) s" >>"$sum"
cat "$sum"
grep -h -E '^# flashc' "$OUT/bwd.log" | head -1 | cut -c1-200
grep -h -E '^\| (label|bwd)' "$OUT/bwd.log" 2>/dev/null | awk '!/label/ || !h++' |
  cut -d'|' -f4-8,10-12,14
grep -h -E '^\| (label|fwd)' "$OUT/fwd.log" 2>/dev/null | awk '!/label/ || !h++'
