#!/usr/bin/env bash
# bench/gpu/s12_bwd18.sh BUILD_DIR — helper bwd18 (issue 12), budget 150 s on the H200 (hard
# timeouts: tests and sanitizers 60 s, all at once; the bench the rest up to 140 s; the table
# after it, ~1 s; ~140 s expected).
# Question: should the mma.sync backward above d 128 run without recomputing S^T and dP^T?
# Every head dim above 128 runs the backward on sm80's two-slice instances (129-192 on d 192,
# 193-256 on d 256: SPLIT 2 thread blocks per K/V block, each recomputing S^T and dP^T over the
# full head dim: 7 GEMM units for 5; 4 warps; 255 registers with spills): 0.39-0.51x FA2 on the
# H200 (RESULTS.md, afternoon call 1). sm80p (src/cuda/attn_bwd_sm80.cu, QS = 2; opt-in:
# FLASHC_CUDA_BWD_KERNEL=sm80p) is FlashAttention-2's layout: one thread block of 8 warps per
# K/V block of 64 keys, warps w and w + 4 share the 16 keys [16 (w mod 4), +16), each
# computing S^T, dP^T for half the 64 queries; P^T and dS^T go through shared memory and each
# warp accumulates dK, dV of its 16 keys over all 64 queries for its half of the head dim's
# columns. The same float operations in the same order as sm80: test_sm80p_bits asserts the
# same bits in deterministic mode and the same dk, dv in fast mode. ptxas: 244-255 registers,
# 30 of 64 kernels without spills, among them the dense plain ones on sm_90a that the bench
# times (d 192 / 256, fast and det); the others 4-36 bytes (loop invariants, a few spill loads
# per Q block: the modifiers, varlen and sm_80 ones; RESULTS.md, bwd18's section).
#  1. (<= 60 s, side by side; FLASHC_CUDA_BWD_KERNEL=sm80p) the d 256 suites bf16 and fp16
#     (every short pair x causal x head layout, 256 x 512, 1023 x 1024 both masks); the padded
#     dims suites (136 160 192 224 250 / 176 201 on sm80p; the dims <= 128 fall back to the
#     default, as a forced family that does not serve); Dk != Dv (192 / 128 and 128 / 192 on the
#     d 192 instance); the varlen suite (256, 192), varlen Dk != Dv, varlen modifiers (256); the
#     modifiers (windows, softcap, ALiBi at 256); deterministic bitwise (256, 160 added);
#     test_sm80p_bits (sm80p against sm80 at 256 and 160, the d 192 instance padded:
#     bit-identical dq, dk, dv in det mode, dk, dv in fast mode; it sets the family itself);
#     compute-sanitizer memcheck on the short fp16 d 256 suite and padded fp16 dims (176 on
#     sm80p), racecheck on the short bf16 d 256 suite.
#  2. (the rest of 140 s, alone on the GPU) bench_bwd4.py at d 160, 192, 256, S 2k and 8k
#     (B*S = 16k, H = 2048 / d), causal and not: flashc (the default: sm80's slices),
#     flashc_det, flashc_80p / flashc_80p_det (sm80p forced), SDPA FA2 and cuDNN, in one
#     process; each flashc configuration checked against SDPA's gradients first (WRONG if not).
#  3. the decision table (LAST; bwd_decide.py).
# Decision rule: sm80p becomes the default above d 128 (its four table entries opt_in 0 and
# listed before sm80's d 192 / 256 ones: among equals the dispatcher takes the first; the sm80
# slices stay for the devices whose shared memory does not hold sm80p's 209 KB at d 256, e.g.
# the A100's 163 KB: the dispatcher skips an entry that does not fit) if every p18-* job
# passed (0 memcheck errors, 0 racecheck hazards, no WRONG cell) and at every shape
# 80p / default >= 1.05 and 80p det / default det >= 1.00.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. $OUT gets
# 3 files: bwd18.json (the bench), bench.log, logs.tgz (every job's log and rc).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd18 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch bwd18

# ---- 1. tests, sanitizers (<= 60 s wall, all jobs at once) ----
F=FLASHC_TEST_FILTER
for t in bf16_d256 f16_d256 padded_dims_bf16 padded_dims_f16 dkdv varlen_suite varlen_dkdv \
  varlen_modifiers modifiers deterministic_bitwise sm80p_bits; do
  FAM=sm80p tjob "p18-$t" 60 - $F="test_$t"
done
FAM=sm80p tjob p18-memcheck 60 memcheck $F=test_f16_d256 FLASHC_TEST_SMALL=1
FAM=sm80p tjob p18-memcheck-pad 60 memcheck $F=test_padded_dims_f16 FLASHC_TEST_SMALL=1
FAM=sm80p tjob p18-racecheck 60 racecheck $F=test_bf16_d256 FLASHC_TEST_SMALL=1
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s12_bwd18: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of 140 s) ----
left=$((140 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd18.json" --dims 256,192,160 --seqlens 2048,8192 --budget-ms 60 \
  --configs flashc,flashc_det,flashc_80p,flashc_80p_det >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s12_bwd18: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm80p)"
echo "$summary"
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
else
  echo "s12_bwd18: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 3. the decision table (from the bench's JSON and the jobs' exit codes) ----
python3 bench/gpu/bwd_decide.py "$OUT/bwd18.json" "$OUT" --cand flashc_80p --base flashc \
  --jobs p18 --dims 256,192,160 --fast-min 1.05 --det-min 1.00 --rows decided \
  --adopt "sm80p the default above d 128 (its entries opt_in 0; the rule in s12_bwd18.sh)"
s_pack "$OUT/bwd18.json" "$OUT/bench.log"
echo "s12_bwd18: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
