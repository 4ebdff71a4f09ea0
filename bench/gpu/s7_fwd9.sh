#!/usr/bin/env bash
# bench/gpu/s7_fwd9.sh BUILD_DIR — issue 11: the new default at d 128 under the causal mask
# (sm90v9 where Sq, Sk >= 4096, v6 elsewhere: round 1 of 2026-12-03, bench/RESULTS.md "Issue 11:
# sm90 forward v9"). (sm90v9n and sm90v6p, run here in round 2, were removed after it.)
# Budget: <= 60 s of wall time in all (every step under `timeout`, a global deadline):
#   1. (<= 32 s, concurrently; correctness) tests/test_cuda_attn on the default dispatch: the full
#      cases of bf16 and fp16 d 128 (both masks; the 1k pairs, (3, 799), (20000, 16)) and
#      test_long_causal (d 128 causal at (4096, 4096) and (4100, 4097), 192 / 165 tiles: the
#      default takes sm90v9 there, thread blocks cross tile boundaries, tails, empty rows);
#      compute-sanitizer racecheck of forced sm90v9 on test_many_tiles' short cases (the short
#      cases never reach v9 by default, which starts at 4k; forced, they run the very kernel the
#      default now takes, <bf16/fp16, 128, 128, 2, 11>, over 240 tiles and empty causal tiles).
#   2. (<= 26 s, alone on the GPU) bench_sdpa.py: the default and forced sm90v6, beside SDPA
#      flash and cuDNN, d 128, causal and not,
#      2k / 4k / 16k (the convention: batch x seqlen = 16384, hidden 2048), 25 ms a cell; then a
#      short table: TFLOP/s, default / v6 (the switch: causal 4k / 16k; elsewhere the default is
#      v6 itself, so that ratio is the run's noise), default / cuDNN.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
# Logs in $OUT (default BUILD_DIR/out-fwd9); what matters is printed, failing lines included.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd9 "${1:-}" tests/test_cuda_attn
lib=$LIB TEST=$B/tests/test_cuda_attn
T0=$(date +%s)
left() { echo $((58 - ($(date +%s) - T0))); } # seconds left of the 60

# name timeout family(- = the default) small dims only-tests [sanitizer tool]
tst() {
  local n=$1 t=$2 fam=$3 small=$4 dims=$5 only=$6 tool=${7:-} san=()
  [ "$fam" = - ] && fam=
  [ -n "$tool" ] && san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no)
  job "$n" "$t" env FLASHC_CUDA_KERNEL="$fam" FLASHC_TEST_SMALL="$small" FLASHC_TEST_DIMS="$dims" \
    FLASHC_TEST_ONLY="$only" "${san[@]}" "$TEST"
}
OMP_NUM_THREADS=4 tst def-d128 32 - 0 128 test_bf16_d128,test_fp16_d128
OMP_NUM_THREADS=4 tst def-long 32 - 0 128 test_long_causal
OMP_NUM_THREADS=1 tst rc-v9 32 sm90v9 1 128 test_many_tiles racecheck
wait_jobs
echo "(tests and racecheck +$(($(date +%s) - T0)) s)"
kern=default,sm90v6
for n in "${s_names[@]}"; do
  log=$OUT/$n.log rc=$(cat "$OUT/$n.rc" 2>/dev/null || echo '?')
  echo "$n: rc $rc$([ "$rc" = 124 ] && echo ' (timed out)'), $(grep -c ': o err' "$log") cases," \
    "$(grep -c 'not served' "$log") not served, $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$log" |
      tr '\n' ' ')$(grep -E 'RACECHECK SUMMARY' "$log" | sed 's/^========= //')"
  if [ "$rc" != 0 ]; then # cmocka's own failure lines ("[  ERROR   ] --- ...", the failed names)
    grep -E '^\[ +(ERROR|FAILED|LINE) +\]|^\[ RUN|Race reported|(Read|Write) access' "$log" |
      grep -vE 'FAILED  \] [0-9]' | tail -8 | cut -c1-240 | sed 's/^/    /'
  fi
done

tb=$(left)
[ "$tb" -gt 26 ] && tb=26
if [ "$tb" -gt 8 ]; then
  FLASHC_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout -k 1 "$tb" python3 bench/gpu/bench_sdpa.py --lib "$lib" --kernels "$kern" \
    --dims 128 --seqlens 2048,4096,16384 --rep-ms "${FLASHC_REP_MS:-25}" \
    --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  rc=$?
else
  echo "no time left for the bench" >"$OUT/bench.log"
  rc=1
fi
echo "bench ($kern) rc $rc (+$(($(date +%s) - T0)) s)"
grep -E 'WRONG|Error|error|^device' "$OUT/bench.log" | cut -c1-240 | head -6
# the rows printed so far (all of them when the bench finished), as one short table
python3 - "$OUT/bench.log" <<'EOF'
import re, sys
rows = []
for ln in open(sys.argv[1]):
    m = re.match(r"conv d=\s*(\d+) causal=(\d) S=\s*(\d+): (.*)", ln)
    if m:
        vals = dict(re.findall(r"(\S+)\s+([\d.]+|n/s|-)(?=\s|$)", m.group(4)))
        rows.append((int(m.group(1)), int(m.group(2)), int(m.group(3)), vals))
if not rows:
    print("no bench rows")
    sys.exit(0)
num = lambda v: float(v) if v and re.match(r"^[\d.]+$", v) else None
names = list(rows[0][3])
short = lambda n: ("default" if n == "flashc" else
                   n.replace("flashc_sm90", "").replace("sdpa_", ""))
pairs = (("flashc", "flashc_sm90v6"), ("flashc", "sdpa_cudnn"))
print("| d | causal | S | " + " | ".join(short(n) for n in names) + " | "
      + " | ".join(f"{short(x)}/{short(y)}" for x, y in pairs) + " |")
print("|---" * (3 + len(names) + len(pairs)) + "|")
for d, c, S, v in rows:
    cell = lambda n: "-" if num(v.get(n)) is None else f"{num(v[n]):.0f}"
    rel = lambda n, m: (f"{num(v[n]) / num(v[m]):.3f}" if num(v.get(m)) and num(v.get(n))
                        else "-")
    print(f"| {d} | {'yes' if c else 'no'} | {S} | " + " | ".join(cell(n) for n in names)
          + " | " + " | ".join(rel(x, y) for x, y in pairs) + " |")
EOF
jobs_failed && exit 1
exit $rc
