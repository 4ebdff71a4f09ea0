#!/usr/bin/env bash
# bench/gpu/s12_bwd16.sh BUILD_DIR — helper bwd16 (issue 12), budget 150 s on the H200 (hard
# timeouts: tests and sanitizers 55 s, all at once; the bench the rest up to 140 s; the tables
# after it, ~2 s; ~140 s expected).
# Question: should the Hopper backward serve the head dims without an instance of their own?
# On the H200 every head dim but 64 and 128 runs the backward on the sm80 (mma.sync) kernels,
# about half sm90v3u's speed at 64 / 128. sm90v3u's padded entries (src/cuda/attn_bwd_sm90v3.cu,
# V3_PAD; opt-in: FLASHC_CUDA_BWD_KERNEL=sm90v3u) take D == Dv, a multiple of 8, 40-56 on its
# d 64 kernels and 72-120 on its d 128 ones (8-32 stay on sm80's d 32 instance): the tensor
# maps of q, k, v, dout are D wide, so the copy engine zero-fills the columns up to the
# instance's; dK, dV stores and the dQ postprocess stop at D. The main loop is sm90v3u's (the
# exact instances' SASS is unchanged); the padded problem pays the instance's FLOPs (d 80 on the
# d 128 kernels: 1.6x d 80's), the table says whether sm90v3u's speed still wins.
#  1. (<= 55 s, side by side; FLASHC_CUDA_BWD_KERNEL=sm90v3u unless named) the padded-dims suites
#     bf16 (1 8 32 40 59 80 111 120 136 ... 250: 40 80 120 on sm90v3u, the rest on sm80's
#     instances: a forced family that does not serve falls back) and fp16 (48 72 104 on
#     sm90v3u), each dim: 4 pairs x causal, GQA, fast and det, a window + softcap + ALiBi, a
#     bhsd layout on a stream with a caller workspace; rows 64 wide in half the cases so that a
#     store past D lands in the row's own NaN poison (the test fails on any, "past the head dim
#     written") and the columns past D hold random numbers a load past D would use; the d 96
#     suites bf16 and fp16 (96 on the d 128 kernels: 1023 x 1024, 2048 x 2048 causal det); the
#     modifiers test (its d 96 cases padded); deterministic bitwise (d 128, 64, 80, 48); k, v
#     broadcast over the batch (stride 0: no tensor map, the launch's fallback: sm80 at 80, 48,
#     112, sm90 / sm90v2s at 128 / 64, against the reference like every case); the d 64
#     bf16 and d 128 fp16 suites (the exact entries, unchanged); compute-sanitizer memcheck on
#     the short fp16 padded cases (FLASHC_TEST_SMALL=1) and the short broadcast ones, racecheck
#     on the short fp16 d 96 ones; bwd_which.py at d 80 and 48 (the kernels launched: F 220 =
#     sm90v3u's fast kernel with V3_PAD, 189 / 253 its det ones at d 64 / 128).
#  2. (the rest of 140 s, alone on the GPU) bench_bwd4.py at d 80, 96, 112, 48, S 2k and 8k
#     (B*S = 16k, H = 2048 / d), causal and not: flashc (the default: sm80 at these dims),
#     flashc_det, flashc_pad / flashc_pad_det (sm90v3u forced: its padded entries), SDPA FA2 and
#     cuDNN, in one process; each flashc configuration checked against SDPA's gradients first.
#  3. the decision tables (LAST; bwd_decide.py), one per head dim.
# Decision rule: a head dim qualifies if every pad-* job passed (0 memcheck errors, 0 racecheck
# hazards, no WRONG cell) and in each of its 4 cells pad / default >= 1.10 and pad det /
# default det >= 1.00. The padding waste shrinks as D grows toward the instance, so the d 128
# padded entries become the default on CC 9.0 (opt_in 0) from the smallest qualifying dim of
# 80, 96, 112 whose larger ones qualify too: all three: head_dim_lo 65 as it is (72-120); 96
# and 112: head_dim_lo 89 (96-120); 112 only: 105 (104-120); the d 64 ones (40-56) if 48
# qualifies.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. $OUT gets
# 3 files: bwd16.json (the bench), bench.log, logs.tgz (every job's log and rc).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd16 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch bwd16

# ---- 1. tests, sanitizers, kernel check (<= 55 s wall, all jobs at once) ----
F=FLASHC_TEST_FILTER
for t in padded_dims_bf16 padded_dims_f16 bf16_d96 f16_d96 modifiers deterministic_bitwise \
  broadcast_kv bf16_d64 f16_d128; do
  FAM=sm90v3u tjob "pad-$t" 55 - $F="test_$t"
done
FAM=sm90v3u tjob pad-memcheck 55 memcheck $F=test_padded_dims_f16 FLASHC_TEST_SMALL=1
FAM=sm90v3u tjob pad-memcheck-bcast 55 memcheck $F=test_broadcast_kv FLASHC_TEST_SMALL=1
FAM=sm90v3u tjob pad-racecheck 55 racecheck $F=test_f16_d96 FLASHC_TEST_SMALL=1
for d in 80 48; do
  job pad-which$d 55 "${PY[@]}" python3 bench/gpu/bwd_which.py --lib "$LIB" --d $d \
    --families ",sm90v3u"
done
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s12_bwd16: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of 140 s) ----
left=$((140 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd16.json" --dims 80,96,112,48 --seqlens 2048,8192 --budget-ms 60 \
  --configs flashc,flashc_det,flashc_pad,flashc_pad_det >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s12_bwd16: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v3u but pad-which*)"
echo "$summary"
echo "== kernels launched (sm90v3_kernel<T, D, F>: F 128 = V3_PAD, 220 its fast kernel)"
cat "$OUT"/pad-which80.log "$OUT"/pad-which48.log 2>/dev/null | grep -E '^which|Error|error' |
  cut -c1-260 | head -12
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
else
  echo "s12_bwd16: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 3. the decision tables (from the bench's JSON and the jobs' exit codes) ----
for d in 80 96 112 48; do
  python3 bench/gpu/bwd_decide.py "$OUT/bwd16.json" "$OUT" --cand flashc_pad --base flashc \
    --jobs pad --dims $d --fast-min 1.10 --det-min 1.00 --rows decided \
    --adopt "d $d qualifies for sm90v3u's padded entries (the rule in s12_bwd16.sh's header)"
done
s_pack "$OUT/bwd16.json" "$OUT/bench.log"
echo "s12_bwd16: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
