#!/usr/bin/env bash
# bench/gpu/s36_ring.sh NEW_BUILD OLD_BUILD — the check that branch hs-ring waits for: sm90hs's d 192
# dK / dV kernel (sm90h2's NODQ twin, 128 query rows a step) with Q, dO through a ring of three
# 64-row half stages instead of one 128-row stage (attn_bwd_sm90h.cu, RING; named barriers 2 / 3
# order its single P / dS buffer). Written before the kernel had run on a GPU; on 2026-12-07
# evening its parts ran in separate warm calls instead (bench/RESULTS.md, "Session of 2026-12-07,
# evening", calls 4-6) and the ring became the default. Tests on NEW_BUILD: the d 192 default suites (test_bf16_d192 / f16_d192:
# the 128-row kernel is the default there), test_sm90hs_d192_d256 (wide_q_d192's cases, 128 x 64
# tiles: RING with windows, softcap, ALiBi, GQA, padded 136 / 160 / 176, Sq 1 / 64 / 300: the
# second half empty or partial), test_padded_dims_bf16 / f16, test_deterministic_bitwise,
# test_sm90h2l_d192 (its padded rows on the default's), test_bwd_order; then compute-sanitizer
# racecheck, synccheck and memcheck on test_sm90hs_d192_d256's short cases (the named-barrier
# handshake and the ring's empty / full barriers); then the A/B: bench/gpu/s33_nodq.sh at d 192
# and D 160 on NEW_BUILD (flashc = the ring, flashc_nodq = the ring's dK / dV kernel alone,
# flashc_hs64 = the 64-row kernel with two stages) and on OLD_BUILD (main before it), FA2 beside.
# Builds: packed prebuilds (FLASHC_PREBUILD_TESTS=test_cuda_attn_bwd FLASHC_DEPS=.xfer/deps bash
# bench/gpu/prebuild.sh DIR), carried with .xfer/deps; LD_LIBRARY_PATH=.xfer/deps/lib. Budget
# ~330 s on an H100. $OUT: t.log, san_*.log, new/ and old/ (the tables last).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
OLD=${2:?usage: s36_ring.sh NEW_BUILD OLD_BUILD}
s_begin ring "${1:-}" tests/test_cuda_attn_bwd
T=$B/tests/test_cuda_attn_bwd
t0=$SECONDS
rc_all=0
timeout -k 2 170 env FLASHC_TEST_FILTER='test_bf16_d192,test_f16_d192,test_sm90hs_d192_d256,test_padded_dims_bf16,test_padded_dims_f16,test_deterministic_bitwise,test_sm90h2l_d192,test_bwd_order' \
  "$T" >"$OUT/t.log" 2>&1 || rc_all=1
echo "tests: rc $rc_all, $((SECONDS - t0)) s"
grep -E '^\[ *(OK|FAILED|PASSED) ' "$OUT/t.log" | head -12
for tool in racecheck synccheck memcheck; do
  timeout -k 2 60 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER='test_sm90hs_d192_d256' compute-sanitizer \
    --tool $tool --error-exitcode 9 "$T" >"$OUT/san_$tool.log" 2>&1 || rc_all=1
  echo "$tool: $((SECONDS - t0)) s, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log")"
done
O=$OUT
OUT=$O/new S33_DIMS=192,160 S33_PEERS=flash S33_CONFIGS=flashc,flashc_nodq,flashc_hs64 \
  timeout -k 2 75 bash bench/gpu/s33_nodq.sh "$B" >"$O/new.txt" 2>&1 || rc_all=1
OUT=$O/old S33_DIMS=192,160 S33_PEERS=flash S33_CONFIGS=flashc,flashc_nodq \
  timeout -k 2 60 bash bench/gpu/s33_nodq.sh "$OLD" >"$O/old.txt" 2>&1 || rc_all=1
echo "bench: $((SECONDS - t0)) s"
tail -18 "$O/old.txt"
tail -18 "$O/new.txt"
exit $rc_all
