#!/usr/bin/env bash
# bench/gpu/s34_hspad.sh BUILD_DIR — the check that branch hs-pad waits for (sm90hs the default at
# the padded head dims 136-248, multiples of 8, D == Dv; bench/RESULTS.md, "Session of
# 2026-12-07, midday", call 9): the backward tests that take the default path at those dims
# (test_padded_dims_bf16 / f16: 136, 160, 224 / 176 among their dims, windows, a (B, H, S, D)
# view with a caller workspace; test_deterministic_bitwise: D 160, S 1500, bitwise over 3 runs),
# test_sm90hs_d192_d256 and test_sm80p_bits (sm80p forced: unchanged), then compute-sanitizer
# memcheck on test_padded_dims_bf16's short cases, then the bench of call 9 at D 160 / 224
# (default against sm90hs forced: after the switch both are sm90hs, hs / default ~1).
# BUILD_DIR: a build with FLASHC_TESTS=ON (BUILD_DIR/tests/test_cuda_attn_bwd, libflashc.so), or
# a packed prebuild made here: FLASHC_PREBUILD_TESTS=test_cuda_attn_bwd FLASHC_DEPS=.xfer/deps
# bash bench/gpu/prebuild.sh build-h, carried with .xfer/deps (LD_LIBRARY_PATH=.xfer/deps/lib).
# Budget ~150 s on an H100. Files in $OUT: t_pad.log, san_memcheck.log, pad.log (the table last).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin hspad "${1:-}" tests/test_cuda_attn_bwd
T=$B/tests/test_cuda_attn_bwd
t0=$SECONDS
rc_all=0
timeout -k 2 200 env OMP_NUM_THREADS=${FLASHC_HSPAD_THREADS:-12} \
  FLASHC_TEST_FILTER='test_padded_dims_bf16,test_padded_dims_f16,test_deterministic_bitwise,test_sm90hs_d192_d256,test_sm80p_bits' \
  "$T" >"$OUT/t_pad.log" 2>&1 || rc_all=1
echo "tests: rc $rc_all, $((SECONDS - t0)) s"
grep -E 'PASSED|FAILED|rror' "$OUT/t_pad.log" | head -6
timeout -k 2 90 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_padded_dims_bf16' compute-sanitizer \
  --tool memcheck --report-api-errors no --error-exitcode 9 "$T" >"$OUT/san_memcheck.log" 2>&1 || rc_all=1
echo "memcheck: $((SECONDS - t0)) s, $(tail -1 "$OUT/san_memcheck.log")"
OUT=$OUT/pad S33_DIMS=160,224 S33_PEERS=flash S33_CONFIGS=flashc,flashc_det,flashc_hs,flashc_hs_det \
  timeout -k 2 80 bash bench/gpu/s33_nodq.sh "$B" >"$OUT/pad.log" 2>&1 || rc_all=1
echo "bench: $((SECONDS - t0)) s"
tail -18 "$OUT/pad.log"
exit $rc_all
