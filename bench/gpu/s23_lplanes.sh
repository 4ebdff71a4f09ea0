#!/usr/bin/env bash
# bench/gpu/s23_lplanes.sh BUILD_DIR — issue 12 and 16, two questions the afternoon of 2026-12-06
# left (written the next session, 2026-12-06 late morning UTC).
#  a. Deterministic mode at d 192 / 256: s22_detfree.sh (H100) found free / det 0.90-1.03 (the
#     waiting is not the cost), and s19_bwdl.sh (the same day) found the late-release families
#     (sm90h2l / sm90hl: one completion a Q block, the release a Q block late) 0.72-1.19x the
#     default's det, over ONE plane (before planes existed). Late release lengthens each turn's
#     wait by a step; P planes run P chains side by side, which is what such a lag needs. Never
#     timed together: bench_bwd4.py's "l" configurations, the head dim's late-release family
#     over 1 / 2 / 4 planes, and with its turns free (the diagnostic: what l could reach).
#     l_free / fast near 1 with lp4 / fast >= 0.8: make l over planes the default det.
#  b. Issue 16's one cell below 3x (d 64 n 512 causal bf16 backward / f32 backward, 2.82 on the
#     H100 host's Xeon with AMX): the matrix-unit tiles at n <= 1024 (default 64 x 128; the
#     bench's FLASHC_CPU_BWD_MM=1:BRxBC) against 32 x 128, 32 x 64, 64 x 64, in one lane on cores
#     8, 9 after the GPU bench (nothing else of ours running).
# Budget 150 s: the bench up to 90 s, the lane up to 50 s. No tests (the families and planes
# passed their suites: s21_planes.sh test_det_planes covers sm90hl / sm90h2l at P = 2, 3).
# $OUT: lplanes.json, bench.log, lane.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin lplanes "${1:-}"
T0=$SECONDS
rc_all=0
s_scratch lplanes
bwd_bench lplanes 90 --dims 256,192 --seqlens 2048,8192,16384 --budget-ms 20 --peers flash \
  --configs flashc,flashc_det,flashc_l_det,flashc_l_det_p2,flashc_l_det_p4,flashc_l_free,flashc_l_free_p2
grep -E 'WRONG|^device|Traceback' "$OUT/bench.log" | head -5
cp "$OUT/bench.log" "$FINAL/" 2>/dev/null
left=$((145 - (SECONDS - T0)))
[ $left -gt 50 ] && left=50
unset FLASHC_CPU_BWD_MM FLASHC_CPU_BWD_SPLIT FLASHC_CPU_AMX_FWD FLASHC_ISA
if [ $left -gt 10 ]; then
  { lscpu | grep -E 'Model name|^CPU\(s\)'; uptime; } >"$FINAL/lane.log" 2>&1
  "${PY[@]}" timeout -k 2 $left python3 bench/cpu_bwd_peer.py --threads 2 --cores 8,9 --heads 8 \
    --d 64 --n 512,1024 --causal 1,0 --rounds 11 \
    --mm 1+s,1:32x128+s,1:32x64+s,1:64x64+s --no-default --no-torch --label lane \
    >>"$FINAL/lane.log" 2>&1
  echo "lane: rc $?"
  grep -E '^\| lane' "$FINAL/lane.log" | cut -d'|' -f3-7,11,12
fi
s_pack "$OUT/lplanes.json"
sed -n '/^bwd alone/,$p' "$FINAL/bench.log" | head -20
exit $rc_all
