#!/usr/bin/env bash
# bench/gpu/s4_decode3.sh BUILD_DIR — issue 13's decode at B = 1: the ring kernel of
# src/cuda/attn_decode.cu (FLASHC_DECODE_KERNEL = ring-cpa: a producer warp fills a 6-stage
# shared ring by cp.async on mbarriers, 4 consumer warps; ring-cpa:N at N stages; `ring`, the
# bulk-copy producer, streamed at ~0.9 TB/s in round 1 and is left out) against the default
# split kernel (pdl merge), on the H200, in at most 45 s:
#   1. tests/test_cuda_serving forced onto ring-cpa (short cases: every test), then
#      test_kvcache_kernel_variants at full size for ring-cpa (split counts 1..64, paged, masks,
#      varlen, graphs; B 1 x 32k auto);
#   2. compute-sanitizer memcheck of the short kernel-variant test on ring-cpa and ring-cpa:2;
#   3. bench_decode.py: bf16 d 128 Hq 32 / Hkv 8 at 1x4k, 1x32k, 16x32k, 1x128k, 64x32k, contiguous
#      and page 16 / 64, pdl (the default) and ring-cpa(:3), SDPA flash and cuDNN and the copy
#      ceiling in the same process (each flashc run checked against SDPA first), then a split
#      sweep at B 1 (pdl at 16 / 33 / 49: 128 / 264 / 392 blocks, even on 132 SMs). Tables last.
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
left() { echo $((43 - ($(date +%s) - t0))); }
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
    # round 2: the coalesced ring-cpa producer is the code that changed since round 1 (where
    # ring, ring-cpa, ring:1, ring-cpa:2 passed every case and memcheck)
    FLASHC_DECODE_KERNEL=ring-cpa FLASHC_TEST_SMALL=1 step serving_ringcpa_small 10 "$T"
    if grep -q 'TIMED OUT' <<<"${summary[-1]}"; then
        echo "s4_decode3: the short suite on ring-cpa timed out: no further tests"
    else
        FLASHC_TEST_KERNELS=ring-cpa FLASHC_TEST_FILTER=test_kvcache_kernel_variants \
            step kernel_variants 16 "$T"
        if command -v compute-sanitizer >/dev/null; then
            FLASHC_TEST_SMALL=1 FLASHC_TEST_KERNELS=ring-cpa,ring-cpa:2 \
                FLASHC_TEST_FILTER=test_kvcache_kernel_variants \
                step memcheck_ringcpa 8 compute-sanitizer --tool memcheck --report-api-errors no \
                --error-exitcode 1 "$T"
            grep -E 'ERROR SUMMARY' "$OUT/memcheck_ringcpa.log" | tail -1
        else
            echo "s4_decode3: no compute-sanitizer on PATH"
        fi
    fi
else
    echo "s4_decode3: no tests/test_cuda_serving in $B"
fi
lim=$(left)
[ "$lim" -lt 12 ] && lim=12
PYTHONUNBUFFERED=1 timeout -k 2 "$lim" python3 bench/gpu/bench_decode.py --lib "$lib" \
    --shapes 1x4096,1x32768,16x32768,1x131072,64x32768 --heads 32/8 --pages 16,64 \
    --variants pdl,ring-cpa,ring-cpa:3 --sweep 16,33,49 --sweep-variants pdl,ring-cpa \
    --rep-ms "${FLASHC_DECODE3_REP_MS:-20}" --out "$OUT/s4_decode3.json" >"$OUT/bench.log" 2>&1
rc=$?
[ $rc -eq 124 ] && echo "s4_decode3: bench TIMED OUT after $lim s (partial log: $OUT/bench.log)"
[ $rc -ne 0 ] && { echo "s4_decode3: bench rc $rc"; grep -vE '^\|' "$OUT/bench.log" | tail -12; }
echo
echo "| step | result | tests | time |"
echo "|---|---|---|--:|"
printf '%s\n' "${summary[@]}"
echo
grep -E 'WRONG|^device|^copy' "$OUT/bench.log"
if grep -q '^merge variants' "$OUT/bench.log"; then
    sed -n '/^merge variants/,$p' "$OUT/bench.log"
fi
echo "s4_decode3: $(($(date +%s) - t0)) s"
exit $rc
