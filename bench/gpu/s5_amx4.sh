#!/usr/bin/env bash
# bench/gpu/s5_amx4.sh BUILD_DIR — issue 16 on the H200 host's CPU (AMX-BF16, AVX512-BF16): the
# bf16 backward on the matrix units (src/cpu/attn_bwd.c mm_*, opt-in FLASHC_CPU_BWD_MM=1), in
# the CPU lane of a device call (cores 8-15), <= 90 s in all:
#   (a) on cores 12-15: test_attn_bwd and test_attn_bwd_v2 with the mm schedule on the real
#       units (ctest *.amx.mm, *.avx512bf16.mm: every mask / modifier, GQA, varlen, odd sizes,
#       the 2x rule against the naive bf16 backward);
#   (b) meanwhile on cores 8,9: bench/cpu_bwd_peer.py, one process, interleaved rounds,
#       medians: flashc bf16 on the mm schedule, flashc bf16 on the default path, flashc f32
#       (same values), torch's CPU SDPA backward (bf16; its time includes its forward), d 128
#       and 64, n 1024 / 2048, causal and not, 2 threads;
#   (c) then the mm tiles (FLASHC_CPU_BWD_MM=1:BRxBC) at d 128, n 2048, against f32;
#   (d) the forward at d 64: FLASHC_CPU_AMX_FWD=1 (the fused tile) and the default (chunked),
#       each with torch's CPU SDPA forward in the same process (bench/cpu_sdpa_peer.py);
#   (e) the mm schedule on the avx512bf16 table (FLASHC_ISA), d 128, n 2048, against f32.
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

# (b) in the background: the peer, same process, same inputs
( timeout -k 2 $((LIMIT - 30)) python3 bench/cpu_bwd_peer.py --threads 2 --cores 8,9 \
    --d 128,64 --n 1024,2048 --causal 0,1 --rounds 3 --label mm \
    --json "$OUT/peer.jsonl" >"$OUT/peer.log" 2>&1
  echo "peer: rc $?, $((SECONDS - T0)) s" >"$OUT/peer.sum" ) &
peer_pid=$!

# (a) tests on the real units, the mm schedule (the default path is unchanged by this branch)
t=$SECONDS
timeout -k 2 52 taskset -c 12-15 ctest --test-dir "$B" -j 4 --timeout 50 \
  -R '^test_attn_bwd(_v2)?\.(amx|avx512bf16)\.mm$' --output-on-failure >"$OUT/ctest_mm.log" 2>&1
echo "tests mm (amx, avx512bf16): rc $?, $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest_mm.log" | tail -1)" >>"$sum"
grep -E 'Failed|\*\*\*|max error|Not Run|SEED' "$OUT/ctest_mm.log" | head -8 >>"$sum"
grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/ctest_mm.log" | sed 's/  */ /g' >>"$sum"

wait "$peer_pid"
cat "$OUT/peer.sum" >>"$sum" 2>/dev/null

# (c) the mm tiles at d 128, n 2048 (f32 in the same process)
for tl in 64x64 128x64 64x128 128x128; do
  [ "$(left)" -gt 8 ] || { echo "tiles $tl: skipped (time)" >>"$sum"; continue; }
  timeout -k 2 $(($(left) - 2)) python3 bench/cpu_bwd_peer.py --threads 2 --cores 8,9 \
    --d 128 --n 2048 --causal 0 --rounds 2 --no-default --no-torch --mm "1:$tl" \
    --label "mm $tl" >>"$OUT/tiles.log" 2>&1
  echo "tiles $tl: rc $?" >>"$sum"
done

# (d) the forward at d 64: the fused AMX tile (FLASHC_CPU_AMX_FWD=1; the default there is the
# chunked path) and the default, each against torch's CPU SDPA in its own process
for v in 1 default; do
  [ "$(left)" -gt 9 ] || { echo "fwd d64 $v: skipped (time)" >>"$sum"; continue; }
  ( [ $v = default ] || export FLASHC_CPU_AMX_FWD=$v
    timeout -k 2 $(($(left) - 2)) python3 bench/cpu_sdpa_peer.py --threads 2 --cores 8,9 --d 64 \
      --n 2048,4096 --causal 0,1 --rounds 3 --ceiling-n 0 --no-check --label "fwd$v" \
      >>"$OUT/fwd.log" 2>&1
    echo "fwd d64 $v: rc $?" >>"$sum" )
done

# (e) the mm schedule on vdpbf16ps (the avx512bf16 table: CPUs with AVX512-BF16, no AMX)
if [ "$(left)" -gt 8 ]; then
  FLASHC_ISA=avx512bf16 timeout -k 2 $(($(left) - 2)) python3 bench/cpu_bwd_peer.py --threads 2 \
    --cores 8,9 --d 128 --n 2048 --causal 0 --rounds 2 --no-default --no-torch \
    --label "mm avx512bf16" >>"$OUT/tiles.log" 2>&1
  echo "mm avx512bf16: rc $?" >>"$sum"
else
  echo "mm avx512bf16: skipped (time)" >>"$sum"
fi

echo "total $((SECONDS - T0)) s" >>"$sum"
cat "$sum"
grep -h -E '^# flashc' "$OUT/peer.log" | head -1 | cut -c1-200
grep -h -E '^\| (label|mm)' "$OUT/peer.log" "$OUT/tiles.log" 2>/dev/null | awk '!/label/ || !h++'
grep -h -E '^\| (label|fwd)' "$OUT/fwd.log" 2>/dev/null | awk '!/label/ || !h++'
