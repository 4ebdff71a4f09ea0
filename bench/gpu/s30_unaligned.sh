#!/usr/bin/env bash
# bench/gpu/s30_unaligned.sh BUILD_DIR — the unaligned branch's first GPU run (~200 s): D or Dv %
# 8 != 0 under masks / modifiers / varlen on the sm80 prefill kernel's unvectorised mods
# instance. 1. test_cuda_serving's test_prefill_mods_unaligned (full) beside its memcheck and
# racecheck (short cases) and test_prefill_mods (the aligned routes unchanged); 2. fa_suite.sh
# (FA_SDIST given by the caller) when set, whose d 59 / 111 dense and varlen refusals should be
# gone. Tables last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin unaligned "${1:-}" tests/test_cuda_serving
TEST=$B/tests/test_cuda_serving
T0=$SECONDS
tjob unaligned 120 - FLASHC_TEST_FILTER=test_prefill_mods_unaligned
tjob mods 150 - FLASHC_TEST_FILTER=test_prefill_mods
tjob memcheck 150 memcheck FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_prefill_mods_unaligned
tjob racecheck 150 racecheck FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_prefill_mods_unaligned
tests_done unaligned
if [ -n "${FA_SDIST:-}" ]; then
  OUT=$OUT FA_LIMIT=${FA_LIMIT:-120} bash bench/gpu/fa_suite.sh "$B" | tail -30
fi
exit ${rc_all:-0}
