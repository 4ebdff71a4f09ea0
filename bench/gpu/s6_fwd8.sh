#!/usr/bin/env bash
# bench/gpu/s6_fwd8.sh BUILD_DIR — issue 11, the Hopper forward: the opt-in sm90v9 (v6 with the
# tile boundary overlapped: a tile's last P V issued with the next tile's first S, its O stored
# under that S; the first K loaded before Q, Q prefetched into L2 by a second producer thread),
# against v6 and SDPA flash / cuDNN. (Round 1 of 2026-12-03 also ran sm90v9t, v9 on v7's shape
# at d 64, against v7, and sm90v9n / sm90v6p (v9 with 128-key blocks throughout; v6 with v9's
# loads alone); they were removed after it and round 2, and so were their steps here. The
# round's successor: s7_fwd9.sh.) Budget: <= 100 s of wall time in all (every step
# under `timeout`, a global deadline):
#   1. (<= 45 s, concurrently; correctness only) tests/test_cuda_attn forced to sm90v9: the full
#      cases of bf16 d 128, fp16 d 128 and bf16 d 64, (the 1k
#      pairs, (3, 799), (20000, 16); causal
#      and not; MHA / GQA / MQA), the short cases of d 64 / 128 with every fixed test
#      (test_many_tiles: > 132 tiles through the counter, so a thread block walks several tile
#      boundaries, and empty causal tiles; graph replay, repeatability); compute-sanitizer
#      memcheck (short cases), racecheck and synccheck (test_many_tiles' short cases) on
#      sm90v9 (the tile queue has one more reader in v9: the Q prefetcher).
#      Windows and softcap do not
#      reach the sm90 kernels (they serve plain problems; the rest goes to sm80 whatever
#      FLASHC_CUDA_KERNEL says), so there is nothing of them to test here.
#   2. (<= 48 s, alone on the GPU) bench_sdpa.py --kernels sm90v9,sm90v6
#      (v9 if its tests and sanitizers passed, and v6), SDPA flash and cuDNN in the
#      same process, d 128 and 64, causal and not, seqlens 1k/2k/4k/16k (the convention: batch x
#      seqlen = 16384, hidden 2048), 25 ms of timing per cell; then a short table: TFLOP/s, ratio
#      to cuDNN, and v9 / v6.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_attn); no rebuild.
# Logs in $OUT (default BUILD_DIR/out-fwd8); what matters is printed, failing lines included.
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s6_fwd8.sh BUILD_DIR}
B=$(realpath "$B")
lib=$B/libflashc.so TEST=$B/tests/test_cuda_attn
[ -f "$lib" ] && [ -x "$TEST" ] || { echo "s6_fwd8: $lib or $TEST not found"; exit 2; }
OUT=${OUT:-$B/out-fwd8}
mkdir -p "$OUT"
T0=$(date +%s)
left() { echo $((98 - ($(date +%s) - T0))); } # seconds left of the 100

pids=()
tst() { # name family dims small omp timeout [only-tests]
  FLASHC_CUDA_KERNEL=$2 FLASHC_TEST_SMALL=$4 OMP_NUM_THREADS=$5 FLASHC_TEST_DIMS=$3 \
    FLASHC_TEST_ONLY=${7:-} timeout -k 1 "$6" "$TEST" >"$OUT/tests-$1.log" 2>&1 &
  pids+=("$!:tests-$1")
}
san() { # family tool only-tests timeout
  FLASHC_CUDA_KERNEL=$1 FLASHC_TEST_SMALL=1 FLASHC_TEST_DIMS=64,128 FLASHC_TEST_ONLY=$3 \
    OMP_NUM_THREADS=1 timeout -k 1 "$4" compute-sanitizer --tool "$2" --error-exitcode 9 \
    --report-api-errors no "$TEST" >"$OUT/san-$2-$1.log" 2>&1 &
  pids+=("$!:san-$2-$1")
}
tst sm90v9-bf16-d128 sm90v9 128 0 3 45 test_bf16_d128
tst sm90v9-fp16-d128 sm90v9 128 0 3 45 test_fp16_d128
tst sm90v9-bf16-d64 sm90v9 64 0 2 45 test_bf16_d64
tst sm90v9-short sm90v9 64,128 1 1 40
san sm90v9 memcheck "" 38
san sm90v9 racecheck test_many_tiles 38
san sm90v9 synccheck test_many_tiles 32
declare -A bad=() # family -> a test run of it failed
ran=()
summary=()
for pr in "${pids[@]}"; do
  pid=${pr%%:*} what=${pr#*:}
  wait "$pid"; rc=$?
  log=$OUT/$what.log
  case $what in
    tests-*)
      k=${what#tests-} fam=${k%%-*}
      ran+=("$fam")
      line="$what: rc $rc, $(grep -c ': o err' "$log") cases, $(grep -c 'not served' "$log") not served, $(grep -E '^\[  (PASSED|FAILED)  \] [0-9]' "$log" | tr '\n' ' ')"
      if [ $rc != 0 ]; then
        bad[$fam]=1
        line="$line
    last test: $(grep -E '^\[ RUN' "$log" | tail -1)
    $(grep -iE 'fail|error|assert|mismatch|differ|0x|no test' "$log" | grep -v 'pending\|^\[' | head -4)"
      fi;;
    san-*)
      k=${what#san-*-}
      line="$what: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)  \] [0-9]' "$log" | tr '\n' ' ')"
      if [ $rc != 0 ]; then
        bad[$k]=1
        line="$line
    last test: $(grep -E '^\[ RUN' "$log" | tail -1)
    $(grep -E '^========= (Error|Warning|Race|Barrier|    at|Invalid|  )' "$log" | head -8)"
      fi;;
  esac
  summary+=("$line")
done
passed=()
for f in "${ran[@]}"; do
  [ -z "${bad[$f]:-}" ] && [[ " ${passed[*]} " != *" $f "* ]] && passed+=("$f")
done
echo "(tests and sanitizers +$(($(date +%s) - T0)) s; clean: ${passed[*]:-none})"

kern=
for k in "${passed[@]}" sm90v6; do kern="$kern${kern:+,}$k"; done
tb=$(left)
[ "$tb" -gt 48 ] && tb=48
if [ "$tb" -gt 8 ]; then
  FLASHC_LIBRARY="$lib" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 \
    timeout -k 1 "$tb" python3 bench/gpu/bench_sdpa.py --lib "$lib" --kernels "$kern" \
    --dims 128,64 --seqlens 1024,2048,4096,16384 --rep-ms "${FLASHC_REP_MS:-25}" \
    --out "$OUT/bench.json" >"$OUT/bench.log" 2>&1
  rc=$?
else
  echo "no time left for the bench" >"$OUT/bench.log"
  rc=1
fi
echo "bench ($kern) rc $rc (+$(($(date +%s) - T0)) s)"
printf '%s\n' "${summary[@]}"
grep -E 'WRONG|Error|error' "$OUT/bench.log" | cut -c1-240 | head -6
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
names = [n for n in rows[0][3]]
libs = [n for n in names if n.startswith("flashc")]
short = lambda n: n.replace("flashc_sm90", "").replace("sdpa_", "")
print("| d | causal | S | " + " | ".join(short(n) for n in names)
      + " | v9/v6 |")
print("|---" * (4 + len(names)) + "|")
for d, c, S, v in rows:
    cu = num(v.get("sdpa_cudnn"))
    cell = lambda n: ("-" if num(v.get(n)) is None else
                      f"{num(v[n]):.0f}" + (f" ({num(v[n]) / cu:.2f})" if cu and n in libs else ""))
    rel = lambda n, m: (f"{num(v[n]) / num(v[m]):.3f}" if num(v.get(m)) and num(v.get(n))
                        else "-")
    print(f"| {d} | {'yes' if c else 'no'} | {S} | " + " | ".join(cell(n) for n in names)
          + " | " + rel("flashc_sm90v9", "flashc_sm90v6") + " |")
EOF
exit $rc
