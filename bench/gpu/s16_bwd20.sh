#!/usr/bin/env bash
# bench/gpu/s16_bwd20.sh BUILD_DIR — helper bwd20 (issue 12), budget 150 s on the H200 (hard
# timeouts: tests and sanitizers 60 s, all at once; the bench the rest up to 140 s; the table
# after it, ~1 s; ~140 s expected).
# Question: should the head dims above 128 run the wgmma backward sm90h on compute capability
# 9.0? Today they run sm80p (mma.sync: one thread block of 8 warps per 64 keys) at 0.39-0.83x
# SDPA-FA2. sm90h (src/cuda/attn_bwd_sm90h.cu; opt-in: FLASHC_CUDA_BWD_KERNEL=sm90h) is a d 256
# and a d 192 kernel (D == Dv in 136..184 / 200..248, multiples of 8, padded into them by the
# copy engine): 64 queries x 64 keys, a producer warpgroup (TMA; one stage of Q / dO at d 256,
# two at d 192) and two consumer warpgroups, each with S^T, dP^T of 64 keys x 32 queries, P and
# dS through shared memory; d 256: dK and dV of the 64 keys x its 128 features (64 + 64 floats
# a thread); d 192: warpgroup 0 dV, 1 dK, all 192 features (96 floats); dQ by panels of 64
# features in bulk reduce-adds (deterministic mode: sm90v3's per-warp turns). ptxas: 168
# registers at launch (240 consumers by setmaxnreg), 0 spills, no C7515 / C7518 warnings.
# NOT YET RUN ON A GPU before this script: the suites below are its first correctness check.
#  1. (<= 60 s, side by side; FLASHC_CUDA_BWD_KERNEL=sm90h) the d 256 and d 192 suites, bf16 and
#     fp16 (every short pair x causal x head layout, MHA / GQA / MQA, fast + deterministic on
#     GQA, 256 x 512, 1023 x 1024 both masks); the padded dims suites (bf16 136 160 192 224 on
#     sm90h, fp16 176; 250, 201 are not multiples of 8 and fall back to sm80p, as do the dims
#     <= 128); the
#     modifiers (windows, softcap, ALiBi at 256); deterministic bitwise (256, 160); compute-
#     sanitizer memcheck on the short fp16 d 256 suite and the short bf16 d 192 suite,
#     racecheck on the short bf16 d 256 and fp16 d 192 suites.
#  2. (the rest of 140 s, alone on the GPU) bench_bwd4.py at d 256, 192, S 2k and 8k (B*S = 16k,
#     H = 2048 / d), causal and not: flashc (the default: sm80p), flashc_det, flashc_90h /
#     flashc_90h_det (sm90h forced), SDPA FA2 and cuDNN, in one process; each flashc
#     configuration checked against SDPA's gradients first (WRONG if not).
#  3. the decision table (LAST; bwd_decide.py).
# Decision rule: sm90h becomes the default at d 192 / 256 on compute capability 9.0 (its
# entries opt_in 0) if every h20-* job passed (0 memcheck errors, 0 racecheck hazards, no WRONG
# cell) and at every shape 90h / default >= 1.3 and 90h det / default det >= 1.0.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. $OUT gets
# 3 files: bwd20.json (the bench), bench.log, logs.tgz (every job's log and rc).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd20 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch bwd20

# ---- 1. tests, sanitizers (<= 60 s wall, all jobs at once) ----
F=FLASHC_TEST_FILTER
for t in bf16_d256 f16_d256 bf16_d192 f16_d192 padded_dims_bf16 padded_dims_f16 modifiers \
  deterministic_bitwise; do
  FAM=sm90h tjob "h20-$t" 60 - $F="test_$t"
done
FAM=sm90h tjob h20-memcheck 60 memcheck $F=test_f16_d256 FLASHC_TEST_SMALL=1
FAM=sm90h tjob h20-memcheck-192 60 memcheck $F=test_bf16_d192 FLASHC_TEST_SMALL=1
FAM=sm90h tjob h20-racecheck 60 racecheck $F=test_bf16_d256 FLASHC_TEST_SMALL=1
FAM=sm90h tjob h20-racecheck-192 60 racecheck $F=test_f16_d192 FLASHC_TEST_SMALL=1
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s16_bwd20: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of 140 s) ----
left=$((140 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd20.json" --dims 256,192 --seqlens 2048,8192 --budget-ms 60 \
  --configs flashc,flashc_det,flashc_90h,flashc_90h_det >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s16_bwd20: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90h)"
echo "$summary"
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
else
  echo "s16_bwd20: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 3. the decision table (from the bench's JSON and the jobs' exit codes) ----
python3 bench/gpu/bwd_decide.py "$OUT/bwd20.json" "$OUT" --cand flashc_90h --base flashc \
  --jobs h20 --dims 256,192 --fast-min 1.3 --det-min 1.0 --rows decided \
  --adopt "sm90h the default at d 192 / 256 on compute capability 9.0 (its entries opt_in 0; the rule in s16_bwd20.sh)"
s_pack "$OUT/bwd20.json" "$OUT/bench.log"
echo "s16_bwd20: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
