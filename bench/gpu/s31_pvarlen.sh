#!/usr/bin/env bash
# bench/gpu/s31_pvarlen.sh BUILD_DIR — paged varlen's first GPU run (~150 s): flashc_varlen's
# block_table on the KV-cache kernel. test_cuda_serving's test_varlen_paged (full) beside its
# memcheck and racecheck (short cases) and test_varlen (the packed routes unchanged); then the
# binding's test_varlen_paged_cuda (torch). Tables last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin pvarlen "${1:-}" tests/test_cuda_serving
TEST=$B/tests/test_cuda_serving
T0=$SECONDS
tjob paged 120 - FLASHC_TEST_FILTER=test_varlen_paged
tjob varlen 120 - FLASHC_TEST_FILTER=test_varlen
tjob memcheck 140 memcheck FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_varlen_paged
tjob racecheck 140 racecheck FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_varlen_paged
job pytest 120 env FLASHC_LIBRARY="$PWD/$B/libflashc.so" PYTHONPATH="$PWD/python" \
  python3 python/tests/test_cuda_serving.py
tests_done pvarlen
exit ${rc_all:-0}
