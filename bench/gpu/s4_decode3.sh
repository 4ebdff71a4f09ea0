#!/usr/bin/env bash
# bench/gpu/s4_decode3.sh BUILD_DIR — issue 13's decode at B = 1: the ring kernel of
# src/cuda/attn_decode.cu (FLASHC_DECODE_KERNEL = ring: a producer warp, bulk copies into a
# 6-stage shared ring on mbarriers; ring-cpa: the same ring filled by cp.async; ring:N / ring-cpa:N
# at N stages) against the default split kernel (pdl merge), on the H200, in at most 90 s:
#   1. tests/test_cuda_serving forced onto the ring (FLASHC_DECODE_KERNEL=ring, short cases:
#      every test), then test_kvcache_kernel_variants at full size (ring, ring-cpa, ring:1,
#      ring-cpa:2 on split counts 1..64, paged, masks, varlen, graphs; B 1 x 32k auto);
#   2. compute-sanitizer memcheck of the short kernel-variant test (ring and ring-cpa);
#   3. bench_decode.py: bf16 d 128 Hq 32 / Hkv 8 at 1x4k, 1x32k, 16x32k, 1x128k, 64x32k, contiguous
#      and page 16 / 64, the default and the ring variants, SDPA flash and cuDNN and the copy
#      ceiling in the same process (each flashc run checked against SDPA first), then a split
#      sweep of the ring at B 1. The tables are printed last.
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving). Logs in $OUT
# (default BUILD_DIR/out-decode3).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s4_decode3.sh BUILD_DIR}
B=$(realpath "$B")
lib=$B/libflashc.so
[ -f "$lib" ] || { echo "s4_decode3: no $lib"; exit 2; }
OUT=${OUT:-$B/out-decode3}
mkdir -p "$OUT"
t0=$(date +%s)
left() { echo $((88 - ($(date +%s) - t0))); }
T=$B/tests/test_cuda_serving
[ -x "$T" ] || T=$(find "$B" -name test_cuda_serving -type f -perm -u+x | head -1)
summary=()
step() { # name, timeout, command...: runs it, logs to $OUT/name.log, records pass/fail
    local name=$1 lim=$2
    shift 2
    local s0 rc
    s0=$(date +%s)
    timeout -k 2 "$lim" "$@" >"$OUT/$name.log" 2>&1
    rc=$?
    local res="rc $rc"
    [ $rc -eq 0 ] && res=ok
    [ $rc -eq 124 ] && res="TIMED OUT ($lim s)"
    local cnt
    cnt=$(grep -cE '^\[       OK \]' "$OUT/$name.log")
    local bad
    bad=$(grep -cE '^\[  FAILED  \]' "$OUT/$name.log")
    summary+=("| $name | $res | $cnt ok, $bad failed | $(($(date +%s) - s0)) s |")
    if [ $rc -ne 0 ]; then
        echo "--- $name: $res; last lines:"
        grep -E 'FAIL|fail|error|ERROR|WRONG' "$OUT/$name.log" | head -8
        tail -5 "$OUT/$name.log"
    fi
}
if [ -n "$T" ]; then
    FLASHC_DECODE_KERNEL=ring FLASHC_TEST_SMALL=1 step serving_ring_small 22 "$T"
    if grep -q 'TIMED OUT' <<<"${summary[-1]}"; then
        echo "s4_decode3: the short suite on the ring timed out: no further tests"
    else
        FLASHC_TEST_FILTER=test_kvcache_kernel_variants step kernel_variants 28 "$T"
    fi
    if grep -q 'TIMED OUT' <<<"${summary[-1]}"; then
        :
    elif command -v compute-sanitizer >/dev/null; then
        FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_kvcache_kernel_variants \
            step memcheck_ring 25 compute-sanitizer --tool memcheck --report-api-errors no \
            --error-exitcode 1 "$T"
        grep -E 'ERROR SUMMARY' "$OUT/memcheck_ring.log" | tail -1
    else
        echo "s4_decode3: no compute-sanitizer on PATH"
    fi
else
    echo "s4_decode3: no tests/test_cuda_serving in $B"
fi
lim=$(left)
[ "$lim" -lt 15 ] && lim=15
PYTHONUNBUFFERED=1 timeout -k 2 "$lim" python3 bench/gpu/bench_decode.py --lib "$lib" \
    --shapes 1x4096,1x32768,16x32768,1x131072,64x32768 --heads 32/8 --pages 16,64 \
    --variants pdl,ring,ring-cpa,ring:3,ring+fused --sweep 8,16,32 --sweep-variants ring \
    --rep-ms "${FLASHC_DECODE3_REP_MS:-25}" --out "$OUT/s4_decode3.json" >"$OUT/bench.log" 2>&1
rc=$?
[ $rc -eq 124 ] && echo "s4_decode3: bench TIMED OUT after $lim s (partial log: $OUT/bench.log)"
[ $rc -ne 0 ] && { echo "s4_decode3: bench rc $rc"; grep -vE '^\|' "$OUT/bench.log" | tail -12; }
echo
echo "| step | result | tests | time |"
echo "|---|---|---|--:|"
printf '%s\n' "${summary[@]}"
echo
grep -E 'WRONG|^device|^copy' "$OUT/bench.log"
grep -E '^Hq/Hkv' "$OUT/bench.log"
if grep -q '^merge variants' "$OUT/bench.log"; then
    sed -n '/^merge variants/,$p' "$OUT/bench.log"
fi
echo "s4_decode3: $(($(date +%s) - t0)) s"
exit $rc
