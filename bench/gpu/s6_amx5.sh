#!/usr/bin/env bash
# bench/gpu/s6_amx5.sh BUILD_DIR — issue 16 on the H200 host's CPU (16-core Xeon, AMX-BF16), the
# CPU lane of a device call (cores 8-15 beside the GPU jobs), budget 120 s (hard timeouts inside;
# FLASHC_AMX5_LIMIT, default 116). Confirms there the defaults that branch amx5 set on the 2-core
# dev Xeon (bench/RESULTS.md "Issue 16: AMX on a 2-core dev Xeon (helper amx5, 2026-12-03)"):
#   - the mm softmax's P by the short exp2 (vreduceps + degree-4 polynomial + vscalefps), every
#     table with the AVX-512 softmax (amx, avx512bf16): forward;
#   - the backward's unit tiles 128 x 128 where max(D, Dv) >= 128, 64 x 128 below (were 64 x 64).
#   (a) on cores 12-15: the tests of both paths on the real units (test_cpu_kernels: the mm
#       softmax against the scalar model; test_attn_v2 / test_attn_fwd / test_cases /
#       test_findings_attn .amx, test_attn_lowp: the forward under the 2x rule;
#       test_attn_bwd / test_attn_bwd_v2 .amx (the mm schedule, new tiles) and .avx512bf16.mm);
#   (b) meanwhile on cores 8,9, one process each, interleaved rounds, medians, 2 threads:
#       bench/cpu_sdpa_peer.py forward d 128 / 64, n 2048 / 4096, causal and not, against torch's
#       CPU SDPA, with the torch.mm bf16 ceiling timed in every round (--ceiling-each);
#       bench/cpu_bwd_peer.py backward d 128 / 64, n 2048, the default tiles against
#       FLASHC_CPU_BWD_MM=1:64x64 (the old default) and the other two, f32 and torch in the
#       same process;
#   (c) then `flashc bench --ceiling` (the oneDNN bf16 gemm row) beside flashc's bf16 forward
#       at d 128 n 4096, and the avx512bf16 table's forward against the avx512 table's f32 one.
# BUILD_DIR: built with tests on (libflashc.so, flashc, tests/); no rebuild. Logs under $OUT
# (default BUILD_DIR/out-amx5); the short tables last on stdout. FLASHC_AMX5_BENCH_CORES (8,9) and
# FLASHC_AMX5_TEST_CORES (12-15) move the lanes (a dry run on a smaller machine).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s6_amx5.sh BUILD_DIR}
B=$(realpath "$B")
OUT=${OUT:-$B/out-amx5}
mkdir -p "$OUT"
T0=$SECONDS
LIMIT=${FLASHC_AMX5_LIMIT:-116}
BC=${FLASHC_AMX5_BENCH_CORES:-8,9}
TC=${FLASHC_AMX5_TEST_CORES:-12-15}
left() { echo $((LIMIT - (SECONDS - T0))); }
sum="$OUT/summary.txt"
: >"$sum"
{
  date -u
  lscpu | grep -E 'Model name|^CPU\(s\)|MHz|L1d|L2'
  grep -o -w -E 'amx_tile|amx_bf16|avx512_bf16' /proc/cpuinfo | sort | uniq -c
} >"$OUT/machine.txt" 2>&1
export FLASHC_LIBRARY=$B/libflashc.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
unset FLASHC_CPU_BWD_MM FLASHC_CPU_AMX_FWD FLASHC_ISA

# (b) in the background on cores 8,9: forward peer, then the backward tiles
( timeout -k 2 40 python3 bench/cpu_sdpa_peer.py --threads 2 --cores "$BC" --d 128,64 \
    --n 2048,4096 --causal 0,1 --rounds 3 --no-check --ceiling-n 4096 --ceiling-each --label fwd \
    >"$OUT/fwd.log" 2>&1
  echo "fwd peer: rc $?, $((SECONDS - T0)) s" >"$OUT/peer.sum"
  timeout -k 2 40 python3 bench/cpu_bwd_peer.py --threads 2 --cores "$BC" --d 128,64 --n 2048 \
    --causal 0,1 --rounds 3 --mm 1:64x64,1:64x128,1:128x128 --label bwd \
    >"$OUT/bwd.log" 2>&1
  echo "bwd peer: rc $?, $((SECONDS - T0)) s" >>"$OUT/peer.sum" ) &
peer_pid=$!

# (a) tests on the real units, cores 12-15
t=$SECONDS
timeout -k 2 70 taskset -c "$TC" ctest --test-dir "$B" -j 4 --timeout 68 \
  -R '^test_cpu_kernels$|^(test_attn_v2|test_attn_fwd|test_cases|test_findings_attn)\.amx$|^test_attn_lowp$|^test_attn_bwd(_v2)?\.(amx|avx512bf16\.mm)$' \
  --output-on-failure >"$OUT/ctest.log" 2>&1
echo "tests (mm softmax, forward amx, backward amx + avx512bf16.mm): rc $?, $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest.log" | tail -1)" >>"$sum"
grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/ctest.log" | sed 's/  */ /g' >>"$sum"
grep -E 'max error|SEED|worst ratio' "$OUT/ctest.log" | head -6 >>"$sum"

wait "$peer_pid"
cat "$OUT/peer.sum" >>"$sum" 2>/dev/null

# (c) the oneDNN ceiling row beside flashc bf16 at d 128, then avx512bf16 bf16 vs avx512 f32
if [ "$(left)" -gt 14 ]; then
  timeout -k 2 $(($(left) - 10)) taskset -c "$BC" "$B/flashc" bench --ceiling --threads 2 --op attn \
    --impl flash --dtype bf16 --heads 8 --ref-rows 64 --n 4096 --d 128 --reps 3 \
    >"$OUT/ceiling.log" 2>&1
  echo "flashc bench --ceiling: rc $?" >>"$sum"
else
  echo "flashc bench --ceiling: skipped (time)" >>"$sum"
fi
for v in "avx512bf16 bf16" "avx512 f32"; do
  set -- $v
  [ "$(left)" -gt 6 ] || { echo "isa $1 $2: skipped (time)" >>"$sum"; continue; }
  FLASHC_ISA=$1 timeout -k 2 $(($(left) - 3)) python3 bench/cpu_sdpa_peer.py --threads 2 \
    --cores "$BC" --d 128 --n 2048 --causal 0 --rounds 3 --no-check --ceiling-n 0 --flashc-only \
    --dtype "$2" --label "isa-$1-$2" >>"$OUT/isa.log" 2>&1
  echo "isa $1 $2: rc $?" >>"$sum"
done

echo "total $((SECONDS - T0)) s" >>"$sum"
cat "$sum"
grep -h -E '^# (flashc|torch)' "$OUT/fwd.log" | head -2 | cut -c1-200
grep -h -E '^\| (label|fwd)' "$OUT/fwd.log" 2>/dev/null | awk '!/label/ || !h++'
grep -h -E '^\| (label|bwd)' "$OUT/bwd.log" 2>/dev/null | awk '!/label/ || !h++'
grep -h -E '^\| (attn|gemm_bf16) |of ceiling' "$OUT/ceiling.log" 2>/dev/null | cut -c1-160
grep -h -E '^\| isa' "$OUT/isa.log" 2>/dev/null
