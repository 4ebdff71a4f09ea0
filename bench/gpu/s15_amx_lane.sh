#!/usr/bin/env bash
# bench/gpu/s15_amx_lane.sh BUILD_DIR — issue 16's "bf16 backward >= 3x flashc's f32 backward"
# on the H200 host's CPU in ONE lane: a single 2-thread bench on cores 8,9 and nothing else of
# ours on the host (no tests beside it, no second lane, no build: run it alone in its device
# call, after any build). The two-lane runs of 2026-12-03 / 04 (s6_amx5.sh, s12_amx15.sh) moved
# the same cell up to 2x between passes (the lanes shared cores or the AMX unit), so the host's
# table is still to be read quietly. Budget 60 s (FLASHC_LANE_LIMIT, default 56; hard
# timeout; ~20 s on the dev Xeon).
#   d 64 and 128, n 512 / 1024 / 2048, causal and not, H 8, 15 interleaved rounds:
#   bench/cpu_bwd_peer.py --mm 1+s (the library's default path, set explicitly) and flashc f32
#   (no torch: the cell is bf16 against flashc's own f32).
# FLASHC_LANE_CORES (default 8,9) moves the lane (a dry run on a 2-core machine: 0,1).
# BUILD_DIR: built (libflashc.so); no rebuild. Files in $OUT (default BUILD_DIR/out-lane):
# lane.log (the bench's rows). The table LAST: per (d, n, causal) bf16 ms, f32 ms, the ratio of
# the medians, the per-round median [min, max], and whether it is >= 3.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin lane "${1:-}"
T0=$SECONDS
LIMIT=${FLASHC_LANE_LIMIT:-56}
CORES=${FLASHC_LANE_CORES:-8,9}
export FLASHC_LIBRARY=$LIB PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
unset FLASHC_CPU_BWD_MM FLASHC_CPU_BWD_SPLIT FLASHC_CPU_AMX_FWD FLASHC_ISA
{
  date -u
  lscpu | grep -E 'Model name|^CPU\(s\)'
  uptime
} >"$OUT/lane.log" 2>&1
timeout -k 2 "$LIMIT" python3 bench/cpu_bwd_peer.py --threads 2 --cores "$CORES" --heads 8 \
  --d 64,128 --n 512,1024,2048 --causal 0,1 --rounds 15 --mm 1+s --no-default --no-torch \
  --label lane >>"$OUT/lane.log" 2>&1
echo "bench: rc $?, $((SECONDS - T0)) s" | tee -a "$OUT/lane.log"
grep -h -E '^# flashc' "$OUT/lane.log" | head -1 | cut -c1-200
echo "| d | n | causal | bf16 ms | f32 ms | f32 / bf16 | per round [min, max] | >= 3 |"
echo "|---|---|---|--:|--:|--:|---|:-:|"
awk -F'|' '$2 ~ /lane/ && $3 ~ /mm1\+s/ { for (i = 2; i <= 11; i++) gsub(/^ +| +$/, "", $i)
    printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $4, $5, $6, $7, $8, $11, $12,
      ($11 + 0 >= 3 ? "yes" : "no") }' "$OUT/lane.log"
