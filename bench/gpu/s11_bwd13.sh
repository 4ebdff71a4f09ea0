#!/usr/bin/env bash
# bench/gpu/s11_bwd13.sh BUILD_DIR — helper bwd13 (issue 12), budget 170 s on the H200 (hard
# timeouts: tests and sanitizers 50 s, all at once; bench the rest up to 160 s; ~150 s expected).
# Question: does sm90v3o (src/cuda/attn_bwd_sm90v3.cu, opt-in through FLASHC_CUDA_BWD_KERNEL,
# d 64 only) beat the default (sm90v3wg) at d 64? sm90v3o is sm90v3wg whose consumer warpgroups
# issue the next Q block's S^T = K Q^T and dP^T = V dO^T right after this block's dQ epilogue,
# before they wait for its dV, dK wgmmas (the default issues them at the loop's top, after that
# wait and the stage's hand-back), so the tensor cores have 2 more products queued across each
# iteration's end and the softmax of the next block finds S^T, dP^T (usually) done. Same
# products, same order: fast-mode dK, dV and deterministic dQ, dK, dV are sm90v3wg's bits
# (test_overlap_bits). Not at d 128: there the next S^T, dP^T beside dK, dV spill 400+ bytes.
#  1. in parallel (<= 50 s): racecheck of sm90v3o on the short fp16 d 64 cases and synccheck on
#     the short bf16 d 64 ones (FLASHC_TEST_SMALL=1: GQA, causal, fast + det); the forced tests
#     (full cases): bf16 / fp16 d 64 suites (fast + det, GQA, Sq != Sk), modifiers (windows,
#     softcap, ALiBi; their d 128 cases fall back to the default), deterministic bitwise,
#     strided + stream + workspace, graph capture; test_overlap_bits (sets the families itself:
#     sm90v3o against sm90v3wg, bit for bit); bwd_which.py at d 64 (the kernel launched: the
#     last template argument true = sm90v3o).
#  2. bench_bwd4.py (the time left, alone on the GPU): d 64 default fast / det and sm90v3o fast /
#     det, d 128 default fast / det, S 1k / 2k / 8k / 16k (B*S = 16k, hidden 2048), causal and
#     not, against SDPA FA2 and cuDNN in one process.
#  3. the decision table (LAST; bwd_decide.py). Rule: sm90v3o becomes the d 64 default on
#     CC 9.0 (fast and det) only if every v3o job passed, v3o / default >= 1.02 at every d 64
#     cell (both masks, 1k-16k) and v3o det / default det >= 0.98 at every d 64 cell.
# BUILD_DIR: built with tests (libflashc.so, tests/test_cuda_attn_bwd); no rebuild. $OUT gets
# 3 files: bwd13.json (the bench), bench.log, logs.tgz (every job's log and rc).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin bwd13 "${1:-}" tests/test_cuda_attn_bwd
TEST=$B/tests/test_cuda_attn_bwd
T0=$SECONDS
rc_all=0
PY=(env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1)
FINAL=$OUT                            # few files come back: the job logs go to a scratch folder
OUT=$(mktemp -d "${TMPDIR:-/tmp}/bwd13.XXXXXX") || exit 2

# ---- 1. sanitizers, tests, kernel check (<= 50 s wall, all jobs at once) ----
if command -v compute-sanitizer >/dev/null; then
  FAM=sm90v3o job rc-v3o-f16_d64 50 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_f16_d64 \
    compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 9 "$TEST"
  FAM=sm90v3o job sc-v3o-bf16_d64 50 env FLASHC_TEST_SMALL=1 FLASHC_TEST_FILTER=test_bf16_d64 \
    compute-sanitizer --tool synccheck --report-api-errors no --error-exitcode 9 "$TEST"
else
  echo "s11_bwd13: no compute-sanitizer on PATH: racecheck / synccheck not run"
fi
for s in bf16_d64 f16_d64; do
  FAM=sm90v3o job "v3o-$s" 50 env FLASHC_TEST_FILTER="test_$s" "$TEST"
done
FAM=sm90v3o job v3o-mods 50 env FLASHC_TEST_FILTER=test_modifiers "$TEST"
FAM=sm90v3o job v3o-det 50 env FLASHC_TEST_FILTER=test_deterministic_bitwise "$TEST"
FAM=sm90v3o job v3o-strided 50 env FLASHC_TEST_FILTER=test_strided_stream_workspace "$TEST"
FAM=sm90v3o job v3o-graph 50 env FLASHC_TEST_FILTER=test_graph_capture "$TEST"
job v3o-bits 50 env FLASHC_TEST_FILTER=test_overlap_bits "$TEST" # sets the families itself
job v3o-which 50 "${PY[@]}" python3 bench/gpu/bwd_which.py --lib "$LIB" --d 64 \
  --families ",sm90v3wg,sm90v3o"
wait_jobs
summary=$(jobs_summary)
jobs_failed && rc_all=1
echo "s11_bwd13: tests took $((SECONDS - T0)) s"

# ---- 2. bench (the rest of the 170 s) ----
left=$((160 - (SECONDS - T0)))
[ $left -lt 5 ] && left=5
"${PY[@]}" timeout -k 2 "$left" python3 bench/gpu/bench_bwd4.py --lib "$LIB" \
  --out "$OUT/bwd13.json" --dims 64,128 --seqlens 1024,2048,8192,16384 --budget-ms 50 \
  --configs flashc,flashc_det,flashc_v3o,flashc_v3o_det --configs-d128 flashc,flashc_det \
  >"$OUT/bench.log" 2>&1
brc=$?
[ $brc -eq 124 ] && echo "s11_bwd13: bench TIMED OUT after $left s (partial log below)"
[ $brc -ne 0 ] && rc_all=1
echo "== tests (FLASHC_CUDA_BWD_KERNEL=sm90v3o but v3o-bits, v3o-which; rc-*: racecheck,"
echo "   sc-*: synccheck, short cases)"
echo "$summary"
echo "== kernels launched (the last template argument: OV, true only for sm90v3o)"
grep -E '^which|Error|error' "$OUT/v3o-which.log" 2>/dev/null | cut -c1-220 | head -8
grep -E 'WRONG|^device' "$OUT/bench.log"
if grep -q '^bwd alone' "$OUT/bench.log"; then
  [ $brc -ne 0 ] && grep -vE '^\|' "$OUT/bench.log" | grep -v '^bwd alone' | tail -6
else
  echo "s11_bwd13: bench rc $brc:"; tail -12 "$OUT/bench.log"
fi

# ---- 3. the decision table (from the bench's JSON and the jobs' exit codes) ----
python3 bench/gpu/bwd_decide.py "$OUT/bwd13.json" "$OUT" --cand flashc_v3o --base flashc \
  --jobs v3o --dims 64 --fast-min 1.02 --det-min 0.98 \
  --adopt "sm90v3o the d 64 default on CC 9.0 (fast and det)"
cp "$OUT/bwd13.json" "$OUT/bench.log" "$FINAL/" 2>/dev/null
tar -czf "$FINAL/logs.tgz" -C "$OUT" . 2>/dev/null
echo "s11_bwd13: rc $rc_all, $((SECONDS - T0)) s"
exit $rc_all
