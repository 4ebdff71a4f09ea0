#!/usr/bin/env bash
# bench/gpu/s24_ldefault.sh BUILD_DIR — issue 12: the late-release kernels (sm90hl at d 256,
# sm90h2l at d 192) as the deterministic default with their own plane counts (attn_bwd.cu's
# det_planes; written 2026-12-06 late morning after s23_lplanes.sh's run on an H100 put them
# 0.98-1.19x / 0.91-1.08x the base kernels' deterministic default at their best counts).
# Needs up to ~330 s: run through device_call.sh with FLASHC_CALL_SCRIPT_LIMIT=340 and
# FLASHC_CALL_TARGETS="flashc test_cuda_attn_bwd".
#  1. at once: the whole backward suite (its deterministic tests now on the new defaults;
#     test_det_planes asserts the new counts, test_late_release_d192_d256 the bits against the
#     base kernels over 1 and 3 planes), memcheck of test_deterministic_bitwise's short cases
#     (d 256 on sm90hl now), racecheck of test_late_release_d192_d256's (both late kernels);
#  2. bench_bwd4.py d 256 / 192, S 1k / 2k / 8k / 16k, causal and not: fast, det (the new
#     default), base_det (the old one), SDPA FA2.
# $OUT: ldefault.json, bench.log, logs.tgz. The table LAST.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin ldefault "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch ldefault
F=FLASHC_TEST_FILTER
tjob l-suite 270 - OMP_NUM_THREADS=10
tjob l-memcheck 200 memcheck $F=test_deterministic_bitwise FLASHC_TEST_SMALL=1 OMP_NUM_THREADS=2
tjob l-racecheck 200 racecheck $F=test_late_release_d192_d256 FLASHC_TEST_SMALL=1 OMP_NUM_THREADS=2
tests_done s24_ldefault
grep -E 'default [0-9] planes|plane\(s\)' "$OUT/l-suite.log" | sort | uniq -c | head -8
bwd_bench ldefault 330 --dims 256,192 --seqlens 1024,2048,8192,16384 --budget-ms 20 \
  --peers flash --configs flashc,flashc_det,flashc_base_det
grep -E 'WRONG|^device|Traceback' "$OUT/bench.log" | head -5
s_pack "$OUT/ldefault.json" "$OUT/bench.log"
sed -n '/^bwd alone/,$p' "$OUT/bench.log" | head -20
exit $rc_all
