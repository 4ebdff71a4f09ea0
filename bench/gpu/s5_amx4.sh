#!/usr/bin/env bash
# bench/gpu/s5_amx4.sh BUILD_DIR — issue 16 on the H200 host's CPU (AMX-BF16, AVX512-BF16): the
# bf16 backward on the matrix units (src/cpu/attn_bwd.c mm_*; since round 2 the default on AMX
# where the (sequence, KV head) items balance the threads) and the forward's fused AMX tile at
# d 64 (the default since round 2), in the CPU lane of a device call (cores 8-15), <= 90 s:
#   (a) on cores 12-15: test_attn_bwd / test_attn_bwd_v2 on the amx table, default and forced
#       mm schedule (.amx.mm), on the avx512bf16 table forced (.avx512bf16.mm), the forward's
#       amx tests (test_attn_v2 / test_attn_fwd / test_findings_attn .amx, test_attn_lowp);
#       then, informational, test_attn_bwd_v2 with FLASHC_CPU_BWD_MM=2 (P and dS rounded once:
#       expected to fail the 2x rule somewhere; the count of failing cases is printed);
#   (b) meanwhile on cores 8,9: bench/cpu_bwd_peer.py, one process, interleaved rounds, medians:
#       flashc bf16 with FLASHC_CPU_BWD_MM=1, =2 (P, dS rounded once), =3 (dS alone), unset
#       (the library's choice: =1 on AMX since round 2), flashc f32
#       (same values), torch's CPU SDPA backward (bf16; its time includes its forward), d 128
#       and 64, n 1024 / 2048, causal and not, 2 threads;
#   (c) then the mm tiles (FLASHC_CPU_BWD_MM=1:BRxBC, interleaved in one process) at d 128 and
#       64, n 2048, against f32;
#   (d) the forward at d 64: the default (fused tile) and FLASHC_CPU_AMX_FWD=0 (chunked), each
#       with torch's CPU SDPA forward in the same process (bench/cpu_sdpa_peer.py).
# BUILD_DIR: built with tests on (libflashc.so, tests/); no rebuild. Logs under $OUT (default
# BUILD_DIR/out-amx4); the tables last. FLASHC_AMX4_LIMIT (86 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s5_amx4.sh BUILD_DIR}
B=$(realpath "$B")
OUT=${OUT:-$B/out-amx4}
mkdir -p "$OUT"
T0=$SECONDS
LIMIT=${FLASHC_AMX4_LIMIT:-86}
left() { echo $((LIMIT - (SECONDS - T0))); }
sum="$OUT/summary.txt"
: >"$sum"
{
  date -u
  lscpu | grep -E 'Model name|^CPU\(s\)|MHz|L1d|L2'
  grep -o -w -E 'amx_tile|amx_bf16|avx512_bf16' /proc/cpuinfo | sort | uniq -c
} >"$OUT/machine.txt" 2>&1
export FLASHC_LIBRARY=$B/libflashc.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
unset FLASHC_CPU_BWD_MM FLASHC_CPU_AMX_FWD

# (b) in the background: the peer, same process, same inputs
( timeout -k 2 $((LIMIT - 36)) python3 bench/cpu_bwd_peer.py --threads 2 --cores 8,9 \
    --d 128,64 --n 1024,2048 --causal 0,1 --rounds 3 --mm 1,2,3 --label r2 \
    --json "$OUT/peer.jsonl" >"$OUT/peer.log" 2>&1
  echo "peer: rc $?, $((SECONDS - T0)) s" >"$OUT/peer.sum" ) &
peer_pid=$!

# (a) tests on the real units
t=$SECONDS
timeout -k 2 44 taskset -c 12-15 ctest --test-dir "$B" -j 4 --timeout 42 \
  -R '^test_attn_bwd(_v2)?\.(amx|amx\.mm|avx512bf16\.mm)$|^(test_attn_v2|test_attn_fwd|test_findings_attn)\.amx$|^test_attn_lowp$' \
  --output-on-failure >"$OUT/ctest.log" 2>&1
echo "tests (amx default + mm, avx512bf16 mm, forward amx): rc $?, $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest.log" | tail -1)" >>"$sum"
grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/ctest.log" | sed 's/  */ /g' >>"$sum"
grep -E 'max error|SEED' "$OUT/ctest.log" | head -6 >>"$sum"
if [ "$(left)" -gt 50 ]; then
  t=$SECONDS
  FLASHC_CPU_BWD_MM=2 OMP_NUM_THREADS=2 FLASHC_ISA=amx timeout -k 2 15 taskset -c 12,13 \
    "$B/tests/test_attn_bwd_v2" >"$OUT/single.log" 2>&1
  echo "test_attn_bwd_v2 with FLASHC_CPU_BWD_MM=2 (informational): rc $?, $((SECONDS - t)) s, $(grep -c 'max error' "$OUT/single.log") failing checks; $(grep -E 'PASSED|FAILED' "$OUT/single.log" | head -2 | tr '\n' ' ')" >>"$sum"
  grep -m 3 'max error' "$OUT/single.log" | cut -c1-220 >>"$sum"
fi

wait "$peer_pid"
cat "$OUT/peer.sum" >>"$sum" 2>/dev/null

# (c) the mm tiles, interleaved in one process, d 128 and 64, n 2048 (f32 in the same process)
for d in 128 64; do
  [ "$(left)" -gt 10 ] || { echo "tiles d $d: skipped (time)" >>"$sum"; continue; }
  timeout -k 2 $(($(left) - 2)) python3 bench/cpu_bwd_peer.py --threads 2 --cores 8,9 \
    --d $d --n 2048 --causal 0 --rounds 3 --no-default --no-torch \
    --mm 1,1:128x64,1:64x128,1:128x128 --label tiles >>"$OUT/tiles.log" 2>&1
  echo "tiles d $d: rc $?" >>"$sum"
done

# (d) the forward at d 64: the default (fused tile since round 2) and the chunked path (=0)
for v in default 0; do
  [ "$(left)" -gt 9 ] || { echo "fwd d64 $v: skipped (time)" >>"$sum"; continue; }
  ( [ $v = default ] || export FLASHC_CPU_AMX_FWD=$v
    timeout -k 2 $(($(left) - 2)) python3 bench/cpu_sdpa_peer.py --threads 2 --cores 8,9 --d 64 \
      --n 2048,4096 --causal 0,1 --rounds 3 --ceiling-n 0 --no-check --label "fwd$v" \
      >>"$OUT/fwd.log" 2>&1
    echo "fwd d64 $v: rc $?" >>"$sum" )
done

echo "total $((SECONDS - T0)) s" >>"$sum"
cat "$sum"
grep -h -E '^# flashc' "$OUT/peer.log" | head -1 | cut -c1-200
grep -h -E '^\| (label|r2|tiles)' "$OUT/peer.log" "$OUT/tiles.log" 2>/dev/null | awk '!/label/ || !h++'
grep -h -E '^\| (label|fwd)' "$OUT/fwd.log" 2>/dev/null | awk '!/label/ || !h++'
