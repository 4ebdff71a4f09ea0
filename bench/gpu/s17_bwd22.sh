#!/usr/bin/env bash
# bench/gpu/s17_bwd22.sh BUILD_DIR — helper bwd22 (issue 12), budget 150 s on the H200 (hard
# timeouts: tests and sanitizers 60 s, all at once; the bench the rest up to 135 s; the table
# after it, ~1 s; ~130 s expected).
# Question: is sm90h2 (src/cuda/attn_bwd_sm90h.cu: sm90h's d 192 kernel in 128 x 64 steps,
# BM = 128; opt-in: FLASHC_CUDA_BWD_KERNEL=sm90h2) or sm90h2e (the same with dV / dK issued
# before dQ and two dQ accumulators, so that the single Q / dO stage goes back before any dQ
# panel) faster at d 192 than the default there (sm80p) and than sm90h's 64 x 64 d 192 kernel
# (0.97-1.00x sm80p on 2026-12-05)? Each consumer
# warpgroup owns 64 of the 128 queries: S^T, dP^T are m64n64 (sm90h's m64n32 at d 192), dV
# (wg 0) / dK (wg 1) m64n192 over 8 query steps, dQ of its own rows (3 panels m64n64 over all
# 64 keys: half sm90h's dQ reduce-adds per FLOP); one Q / dO stage (96 KB), one P / dS buffer;
# 217,128 B of shared memory. ptxas: 168 registers at launch (240 consumers by setmaxnreg),
# 0 spills, no C7515 / C7518 warnings. Deterministic mode: turn counters per 64 rows, one per
# warpgroup (variant field sem_block_q).
# NOT YET RUN ON A GPU before this script: the suites below are its first correctness check.
#  1. (<= 60 s, side by side; FLASHC_CUDA_BWD_KERNEL=sm90h2, jobs h22-e-* sm90h2e) the d 192
#     suites bf16 and fp16 on each family (every short pair x causal x MHA / GQA / MQA, fast +
#     deterministic on GQA, 256 x 512, 1023 x 1024); test_sm90h2_d192 / test_sm90h2e_d192 (tiles
#     128 x 64 requested: fails if the family did not run; windows, softcap, ALiBi, padded 136 /
#     176 / 160, Sq 300 / 64 / 1 (warpgroup 1 without rows), a caller workspace, broadcast K / V
#     (the sm80 fallback), deterministic bitwise); the padded dims suites (bf16 136 160 192 on
#     sm90h2, fp16 176 on sm90h2e; the rest the defaults); deterministic bitwise (160 on sm90h2);
#     one compute-sanitizer memcheck and one racecheck job, each over both families' short case
#     (causal, GQA, softcap, ALiBi, deterministic); the bf16 d 256 suite on the default (sm90h,
#     whose source changed with the BM parameter) and the fp16 d 192 suite on sm90h (64 x 64).
#  2. (the rest of 135 s, alone on the GPU) bench_bwd4.py at d 192, S 2k and 8k (B*S = 16k,
#     H = 2048 / d = 10), causal and not: flashc (the default: sm80p), flashc_det, flashc_90h /
#     _det (sm90h forced), flashc_90h2 / _det, flashc_90h2e / _det, SDPA FA2 and cuDNN, in one
#     process; each flashc configuration checked against SDPA's gradients first (WRONG if not).
#  3. the decision tables (LAST; bwd_decide.py, one per candidate), then one VERDICT line.
# Decision rule: a candidate (sm90h2, sm90h2e) qualifies if every h22-* job passed (0 memcheck
# errors, 0 racecheck hazards, no WRONG cell) and at every shape cand / default >= 1.10 and
# cand det / default det >= 1.0; the VERDICT names the qualifying one with the higher geomean
# of cand / default (its exact d 192 entries the default at d 192 on compute capability 9.0,
# opt_in 0), or none. (The padded entries were not timed: they stay opt-in either way.)
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd; targets flashc and
# test_cuda_attn_bwd suffice); no rebuild. $OUT gets 3 files: bwd22.json (the bench),
# bench.log, logs.tgz (every job's log and rc).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd22 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
s_scratch bwd22

# ---- 1. tests, sanitizers (<= 60 s wall, all jobs at once) ----
F=FLASHC_TEST_FILTER
for t in bf16_d192 f16_d192 sm90h2_d192 padded_dims_bf16 deterministic_bitwise; do
  FAM=sm90h2 tjob "h22-$t" 60 - $F="test_$t"
done
for t in bf16_d192 f16_d192 sm90h2e_d192 padded_dims_f16; do
  FAM=sm90h2e tjob "h22-e-$t" 60 - $F="test_$t"
done
# the 64-row kernels' source changed too (the BM parameter, one S^T / dP^T loop): the d 256
# default (sm90h) and sm90h's d 192 x 64 kernel once each
tjob h22-default-bf16_d256 60 - $F=test_bf16_d256
FAM=sm90h tjob h22-90h-f16_d192 60 - $F=test_f16_d192
FAM=sm90h2 tjob h22-memcheck 60 memcheck $F='test_sm90h2*_d192' FLASHC_TEST_SMALL=1
FAM=sm90h2 tjob h22-racecheck 60 racecheck $F='test_sm90h2*_d192' FLASHC_TEST_SMALL=1
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s17_bwd22: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of 135 s) ----
bwd_bench bwd22 135 --dims 192 --seqlens 2048,8192 --budget-ms 60 \
  --configs flashc,flashc_det,flashc_90h,flashc_90h_det,flashc_90h2,flashc_90h2_det,flashc_90h2e,flashc_90h2e_det
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90h2; h22-e-*: sm90h2e)"
echo "$summary"
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  # bench_bwd4's own table: 90h2 against 90h too
  sed -n '/^bwd alone/,$p' "$OUT/bench.log" | cut -c1-400
else
  echo "s17_bwd22: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 3. the decision tables (from the bench's JSON and the jobs' exit codes), LAST ----
for c in 90h2 90h2e; do
  python3 bench/gpu/bwd_decide.py "$OUT/bwd22.json" "$OUT" --cand flashc_$c --base flashc \
    --jobs h22 --dims 192 --fast-min 1.10 --det-min 1.0 --rows decided \
    --adopt "sm$c qualifies (the rule in s17_bwd22.sh)"
done
python3 - "$OUT/bwd22.json" "$(jobs_failed && echo 1 || echo 0)" <<'PY'
import json, math, sys
try:
    rows = json.load(open(sys.argv[1]))["rows"]
except (OSError, ValueError, KeyError):
    rows = []
failed = sys.argv[2] == "1"
t = {(r["causal"], r["S"], r["impl"]): r["tflops"] for r in rows
     if r.get("status") == "ok" and r["d"] == 192}
shapes = sorted({(c, S) for c, S, _ in t})
best = None
for c in ("flashc_90h2", "flashc_90h2e"):
    try:
        f = [t[k + (c,)] / t[k + ("flashc",)] for k in shapes]
        d = [t[k + (c + "_det",)] / t[k + ("flashc_det",)] for k in shapes]
    except KeyError:
        continue
    gm = math.exp(sum(map(math.log, f)) / len(f)) if f else 0.0
    if f and not failed and min(f) >= 1.10 and min(d) >= 1.0 and (not best or gm > best[1]):
        best = (c, gm, min(f))
print("VERDICT: " + (f"sm{best[0][7:]} the d 192 default on compute capability 9.0 (geomean "
                     f"{best[1]:.2f}x sm80p, min {best[2]:.2f}x)" if best else
                     "no change at d 192 (no candidate passed every job and >= 1.10x / det "
                     ">= 1.0x sm80p at every shape)"))
PY
s_pack "$OUT/bwd22.json" "$OUT/bench.log"
echo "s17_bwd22: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
