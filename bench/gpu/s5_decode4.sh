#!/usr/bin/env bash
# bench/gpu/s5_decode4.sh BUILD_DIR — issue 13's decode at B 1..16: the lean split kernels of
# src/cuda/attn_decode.cu (FLASHC_DECODE_KERNEL = lean: the split kernel with its per-row 64-bit
# address arithmetic taken out of the copy loop; lean3: the same with 3 stages a warp; lean-pf:
# lean with the L2::256B prefetch hint) and the whole-wave split rule (FLASHC_DECODE_SPLITS =
# fill), against the default (split kernel, pdl merge, fa2 rule), on the H200, in at most 90 s:
#   1. tests/test_cuda_serving, short cases, every test forced onto lean + fill + the v3 merge
#      (FLASHC_DECODE_MERGE = v3: a block a (row, 32 columns), 16 split groups; the merge test
#      sets its own variants), then onto lean3;
#   2. test_kvcache_kernel_variants at full size for lean, lean3, lean-pf (split counts 1..64,
#      paged, masks, varlen, graphs, Dk != Dv, B 1 x 32k auto, the fill rule);
#   3. compute-sanitizer memcheck of the short kernel-variant test on lean, lean3, lean-pf, with
#      the v3 merge;
#   4. bench_decode.py: bf16 d 128 Hq 32 / Hkv 8 at B {1, 4, 16} x ctx {4k, 32k, 128k},
#      contiguous and page 16 / 64, default vs the variants, SDPA flash and cuDNN and the copy
#      ceiling in the same process (each flashc run checked against SDPA first; lean+fused: the
#      fused merge on lean), then a split sweep (1..49) at B 1 and 16 for lean + v3. Tables
#      last.
# BUILD_DIR: a built tree with tests (libflashc.so, tests/test_cuda_serving). Logs in $OUT
# (default BUILD_DIR/out-decode4).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s5_decode4.sh BUILD_DIR}
B=$(realpath "$B")
lib=$B/libflashc.so
[ -f "$lib" ] || { echo "s5_decode4: no $lib"; exit 2; }
OUT=${OUT:-$B/out-decode4}
mkdir -p "$OUT"
t0=$(date +%s)
left() { echo $((86 - ($(date +%s) - t0))); }
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
    local cnt bad
    cnt=$(grep -cE '^\[       OK \]' "$OUT/$name.log")
    bad=$(grep -cE '^\[  FAILED  \]' "$OUT/$name.log")
    summary+=("| $name | $res | $cnt ok, $bad failed | $(($(date +%s) - s0)) s |")
    if [ $rc -ne 0 ]; then
        echo "--- $name: $res; last lines:"
        grep -E 'FAIL|fail|error|ERROR|WRONG' "$OUT/$name.log" | head -8
        tail -5 "$OUT/$name.log"
    fi
}
if [ -n "$T" ]; then
    FLASHC_DECODE_KERNEL=lean FLASHC_DECODE_SPLITS=fill FLASHC_DECODE_MERGE=v3 \
        FLASHC_TEST_SMALL=1 step serving_lean_fill_v3_small 12 "$T"
    if grep -q 'TIMED OUT' <<<"${summary[-1]}"; then
        echo "s5_decode4: the short suite on lean timed out: no further tests"
    else
        FLASHC_DECODE_KERNEL=lean3 FLASHC_TEST_SMALL=1 step serving_lean3_small 10 "$T"
        FLASHC_TEST_KERNELS=lean,lean3,lean-pf FLASHC_TEST_FILTER=test_kvcache_kernel_variants \
            step kernel_variants 34 "$T"
        if command -v compute-sanitizer >/dev/null; then
            FLASHC_TEST_SMALL=1 FLASHC_TEST_KERNELS=lean,lean3,lean-pf FLASHC_DECODE_MERGE=v3 \
                FLASHC_TEST_FILTER=test_kvcache_kernel_variants \
                step memcheck_lean 12 compute-sanitizer --tool memcheck --report-api-errors no \
                --error-exitcode 1 "$T"
            grep -E 'ERROR SUMMARY' "$OUT/memcheck_lean.log" | tail -1
        else
            echo "s5_decode4: no compute-sanitizer on PATH"
        fi
    fi
else
    echo "s5_decode4: no tests/test_cuda_serving in $B"
fi
lim=$(left)
[ "$lim" -lt 15 ] && lim=15
PYTHONUNBUFFERED=1 timeout -k 2 "$lim" python3 bench/gpu/bench_decode.py --lib "$lib" \
    --batches 1,4,16 --ctx 4096,32768,131072 --heads 32/8 --pages 16,64 \
    --variants pdl,lean,lean3,lean-pf,lean+fill,lean+v3,lean+fill+v3,lean+fused \
    --sweep 1,2,3,6,16,33,49 --sweep-variants lean+v3 --sweep-batches 1,16 \
    --rep-ms "${FLASHC_DECODE4_REP_MS:-12}" --out "$OUT/s5_decode4.json" >"$OUT/bench.log" 2>&1
rc=$?
[ $rc -eq 124 ] && echo "s5_decode4: bench TIMED OUT after $lim s (partial log: $OUT/bench.log)"
[ $rc -ne 0 ] && { echo "s5_decode4: bench rc $rc"; grep -vE '^\|' "$OUT/bench.log" | tail -12; }
echo
echo "| step | result | tests | time |"
echo "|---|---|---|--:|"
printf '%s\n' "${summary[@]}"
echo
grep -E 'WRONG|^device|^copy' "$OUT/bench.log"
if grep -q '^merge variants' "$OUT/bench.log"; then
    sed -n '/^merge variants/,$p' "$OUT/bench.log"
elif [ $rc -eq 124 ]; then
    grep -E '^Hq/Hkv' "$OUT/bench.log" | tail -12
fi
echo "s5_decode4: $(($(date +%s) - t0)) s"
exit $rc
