#!/usr/bin/env bash
# bench/gpu/s11_fwd20.sh BUILD_DIR — issue 11 (helper fwd20): dense Dk != Dv (MLA's 192 / 128
# prefill; 128 / 64, 64 / 128, 96 / 128) on the sm90 TMA-store kernels of max(D, Dv), the V and O
# tensor maps Dv wide (FLASHC_CUDA_SM90_DKDV=1, opt-in; bench/RESULTS.md, "Issue 11: Dk != Dv on
# sm90"). Budget: <= 120 s of wall time in all (every step under `timeout`, a global deadline;
# ~70-90 s expected).
#   1. (<= 60 s, concurrently) tests/test_cuda_serving:
#        t-def   test_prefill_dkdv_sm90, default dispatch: 8 dense cases from seqlen 1024
#                (192/128 x4: GQA 4, MQA, tails of Sq % 128 and Sk % 80, Sq > Sk; 128/64 x2,
#                64/128, 96/128; bf16 and fp16, causal and not), each on the sm90 kernel (its
#                tiles asserted on compute capability 9.0), the sm80 mods instance and the
#                KV-cache kernel, by the 2x rule;
#        t-80    the same under FLASHC_CUDA_KERNEL=sm80 (the first pass must run sm80);
#        t-hw    test_prefill_mods under FLASHC_CUDA_KERNEL=sm90v6hw, FLASHC_CUDA_SM90_DKDV=1:
#                the d 192 kernel at every length, so its dense 192/128 cases (300 x 300 GQA
#                causal, 200 x 330) run on it (short, many tails), the rest as before;
#        t-v6    test_prefill_dkdv_sm90 under FLASHC_CUDA_KERNEL=sm90v6 (the d 128 cases on v6,
#                not on the sm90np defaults);
#      and on the short case (FLASHC_TEST_SMALL=1: 192/128, 1024 x 1040, causal, sm90 only)
#      memcheck (mc) and racecheck (rc).
#   2. (the time left, <= 55 s, alone on the GPU) bench_dkdv.py: flashc_sm90 (DKDV=1), flashc_sm80
#      (DKDV=0: the mods route), SDPA cuDNN / flash / mem-efficient where they take Dk != Dv,
#      bf16 192/128, 16 heads, seqlen 2k and 8k (B = 16384 / S), causal and not; 3 interleaved
#      rounds of do_bench (L2 flush) and the CUPTI kernel time.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_serving); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd20 "${1:-}" tests/test_cuda_serving
TEST=$B/tests/test_cuda_serving
T0=$(date +%s)
left() { echo $((117 - ($(date +%s) - T0))); } # seconds left of the 120

# name timeout omp kernel dkdv small filter [sanitizer tool]
tst() { # name seconds omp family dkdv small filter [tool]
  OMP_NUM_THREADS=$3 tjob "$1" "$2" "${8:-}" -u FLASHC_CUDA_KERNEL -u FLASHC_CUDA_SM90_DKDV \
    ${4:+FLASHC_CUDA_KERNEL=$4} ${5:+FLASHC_CUDA_SM90_DKDV=$5} FLASHC_TEST_SMALL="$6" \
    FLASHC_TEST_VERBOSE=1 FLASHC_TEST_FILTER="$7"
}
tst t-def 60 5 "" "" 0 test_prefill_dkdv_sm90
tst t-80 60 4 sm80 "" 0 test_prefill_dkdv_sm90
tst t-hw 60 3 sm90v6hw 1 0 test_prefill_mods
tst t-v6 60 2 sm90v6 "" 0 test_prefill_dkdv_sm90
tst mc 60 1 "" "" 1 test_prefill_dkdv_sm90 memcheck
tst rc 60 1 "" "" 1 test_prefill_dkdv_sm90 racecheck
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
jobs_summary
for n in "${s_names[@]}"; do # the kernels the SM90_DKDV=1 passes ran (told by their tiles)
  echo "$n: $(grep -c ': o err' "$OUT/$n.log") passes checked; SM90_DKDV=1 passes on sm90: $(grep -c 'SM90_DKDV=1.*: the sm90 kernel' "$OUT/$n.log")," \
    "on sm80 mods: $(grep -c 'SM90_DKDV=1.*: the sm80 mods kernel' "$OUT/$n.log");" \
    "SM90_DKDV=0 passes on sm80 mods: $(grep -c 'SM90_DKDV=0.*: the sm80 mods kernel' "$OUT/$n.log");" \
    "test_prefill_mods' dense Dk != Dv: $(grep -E '^  dense .*D/Dv=(192/128|256/8) .*PREFILL_MODS=1 \[prefill kernel, tiles .*: o err' "$OUT/$n.log" |
      grep -oE 'D/Dv=[0-9/]+|tiles [0-9]+x[0-9]+' | paste -d' ' - - | sort | uniq -c | tr -s ' \n' ' ')"
done

BENCH_PY=bench/gpu/bench_dkdv.py fwd11_bench 55 --rounds 3
grep -E 'left out|^    flashc' "$OUT/bench.log" | cut -c1-240 | head -8
sed -n '/^| S | causal/,$p' "$OUT/bench.log"
cat <<'RULE'
Reading: the tests hold if t-def, t-80, t-hw, t-v6 pass (rc 0) and mc / rc report 0 errors /
hazards; on the H200, t-def's "SM90_DKDV=1 passes on sm90" must be 8 (every case) with 0 on sm80
mods, t-80's 0 on sm90 and 8 on sm80 mods, every job's SM90_DKDV=0 passes all on sm80 mods;
t-hw: test_prefill_mods' dense 192/128 cases report tiles 128x80 (sm90v6hw) and its 256/8 one
128x64 (sm80: sm90v6hw's d 256 kernel stores O directly); t-v6: 4 cases on sm90 (the d 128
ones, 128x176 / 128x128), 4 on sm80 mods (192/128: sm90v6 has no d 192 kernel).
The bench's "launched" lines must name attn_fwd_sm90_kernel<..., 192, 80, 2, 7> for flashc_sm90
and attn_fwd_sm80_kernel<..., 192, ...> for flashc_sm80. Decision: the sm90 route by default
(SM90_DKDV_DEFAULT = 1 in attn_fwd_sm90.cu) if every test passed and sm80/sm90 >= 1.03 in every
cell (flush and kernel; the verdict line says it), else it stays opt-in.
RULE
jobs_failed && exit 1
exit $rc
