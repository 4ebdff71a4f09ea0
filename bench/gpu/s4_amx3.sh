#!/usr/bin/env bash
# bench/gpu/s4_amx3.sh BUILD_DIR — issue 16 on the H200 host's CPU (AMX-BF16), the CPU lane of a
# device call (cores 8-15: tests on 12-15, the peer on 10-11, benches on 8-9; beside the GPU jobs), <= 45 s in all (round 2):
#   (a) the forward's tests on the AMX table with the default path (since round 1 the fused
#       tile, src/cpu/kernels/amx.c fwd_tile, for max(D, Dv) >= 128), test_attn_lowp (the 2x
#       rule on every table) and test_cpu_kernels (the mm softmax of every instance), then
#       the chunked path (FLASHC_CPU_AMX_FWD=0);
#   (b) bench/amx_phases.c (flashc_amx_phases): each phase of one key tile alone, the chunked
#       path and the fused variants, 2 threads at once, d 128 and 64;
#   (c) `flashc bench --ceiling` (the oneDNN bf16 gemm ceiling: libdnnl on LD_LIBRARY_PATH) and
#       the bf16 flash forward, default against =0 interleaved, 2 threads on two cores, d 128
#       (n 2048 / 4096, causal and not) and d 64 (=1 against =0);
#   (d) meanwhile on two other cores bench/cpu_sdpa_peer.py (torch CPU SDPA against flashc's
#       default path, same process, same inputs), d 128 (causal and not) and d 64.
# BUILD_DIR: built with tests on (libflashc.so, flashc, flashc_amx_phases, tests/); no rebuild.
# Logs under $OUT (default BUILD_DIR/out-amx3); the table last (GFLOP/s, and the fraction of
# the same run's oneDNN bf16 gemm ceiling). FLASHC_AMX3_CORES (8-15), FLASHC_AMX3_BENCH_CORES
# (8,9), FLASHC_AMX3_PEER_CORES (10,11), FLASHC_AMX3_LIMIT (44 s).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s4_amx3.sh BUILD_DIR}
B=$(realpath "$B")
OUT=${OUT:-$B/out-amx3}
mkdir -p "$OUT"
cores=${FLASHC_AMX3_CORES:-12-15}     # tests
bc2=${FLASHC_AMX3_BENCH_CORES:-8,9}   # phases, flashc bench
pc2=${FLASHC_AMX3_PEER_CORES:-10,11}  # the torch peer, concurrently
T0=$SECONDS
LIMIT=${FLASHC_AMX3_LIMIT:-44}
# (smaller for a smoke test; FLASHC_AMX3_TESTS=0 skips (a))
N2=${FLASHC_AMX3_N:-2048,4096} N1=${FLASHC_AMX3_N1:-4096} CN=${FLASHC_AMX3_CN:-4096}
left() { echo $((LIMIT - (SECONDS - T0))); }
fl="$B/flashc"
[ -x "$fl" ] || fl="$B/bin/flashc"
[ -x "$fl" ] || { echo "s4_amx3: no flashc CLI in $B"; exit 2; }

{
  date -u
  lscpu | grep -E 'Model name|^CPU\(s\)|MHz|L1d|L2'
  grep -o -w -E 'amx_tile|amx_bf16|avx512_bf16' /proc/cpuinfo | sort | uniq -c
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
} >"$OUT/machine.txt" 2>&1

# (d) first, in the background on its own two cores: bench/cpu_sdpa_peer.py (torch CPU SDPA
# and flashc's default path on the same inputs, interleaved rounds: a same-run ratio while the
# tests and benches load the other cores)
export FLASHC_LIBRARY=$B/libflashc.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
( timeout -k 2 $((LIMIT - 4)) python3 bench/cpu_sdpa_peer.py --threads 2 --cores "$pc2" --d 128 \
    --n "$N2" --causal 0,1 --rounds 3 --ceiling-n 0 --no-check --label default \
    --json "$OUT/peer.jsonl" >"$OUT/peer.log" 2>&1
  echo "peer d 128: rc $?" >"$OUT/peer.sum"
  t2=$((LIMIT - 4 - (SECONDS - T0)))
  if [ "$t2" -gt 8 ]; then
    timeout -k 2 "$t2" python3 bench/cpu_sdpa_peer.py --threads 2 --cores "$pc2" --d 64 \
      --n "$N2" --causal 0 --rounds 3 --ceiling-n 0 --no-check --label default \
      --json "$OUT/peer.jsonl" >>"$OUT/peer.log" 2>&1
    echo "peer d 64: rc $?" >>"$OUT/peer.sum"
  fi ) &
peer_pid=$!

# (a) tests: the default (fused tile for d >= 128 since round 1) and the chunked path (=0)
sum="$OUT/summary.txt"
: >"$sum"
tests() { # VARIANT SECONDS REGEX
  local v=$1 lim=$2 re=$3 t=$SECONDS
  [ "${FLASHC_AMX3_TESTS:-1}" = 1 ] || return
  [ "$(left)" -gt $((lim + 20)) ] || { echo "tests FLASHC_CPU_AMX_FWD=$v: skipped (time)" >>"$sum"; return; }
  if [ "$v" = default ]; then unset FLASHC_CPU_AMX_FWD; else export FLASHC_CPU_AMX_FWD=$v; fi
  timeout -k 2 "$lim" taskset -c "$cores" \
    ctest --test-dir "$B" -j 4 \
    --timeout "$lim" -R "$re" --output-on-failure >"$OUT/ctest$v.log" 2>&1
  echo "tests FLASHC_CPU_AMX_FWD=$v: rc $?, $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest$v.log" | tail -1)" >>"$sum"
  grep -E 'Failed|\*\*\*' "$OUT/ctest$v.log" | head -5 >>"$sum"
  unset FLASHC_CPU_AMX_FWD
}
tests default 22 '^(test_attn_v2|test_attn_fwd|test_findings_attn|test_cases)\.amx$|^test_attn_lowp$|^test_cpu_kernels$'
tests 0 8 '^(test_attn_v2|test_attn_fwd)\.amx$'

# (b) the phases of one key tile (bench/amx_phases.c), 2 threads at once, d 128 and 64
ph="$B/flashc_amx_phases"
[ -x "$ph" ] || ph="$B/bin/flashc_amx_phases"
if [ -x "$ph" ]; then
  for a in "--d 128 --threads 2" "--d 64 --threads 2"; do
    [ "$(left)" -gt 20 ] || break
    # shellcheck disable=SC2086
    timeout -k 2 8 taskset -c "$bc2" "$ph" $a >>"$OUT/phases.log" 2>&1
    echo "phases $a: rc $?" >>"$sum"
  done
fi

# (c) benches: one CSV of every row, variant in the first column (d: the default)
csv="$OUT/bench.csv"
: >"$csv"
bench() { # VARIANT TAG ARGS...
  local v=$1 tag=$2
  shift 2
  [ "$(left)" -gt 5 ] || { echo "bench $v $tag: skipped (time)" >>"$sum"; return; }
  if [ "$v" = d ]; then unset FLASHC_CPU_AMX_FWD; else export FLASHC_CPU_AMX_FWD=$v; fi
  timeout -k 2 $(($(left) - 2)) taskset -c "$bc2" "$fl" bench --threads 2 \
    --op attn --impl flash --dtype bf16 --heads 8 --ref-rows 64 --format csv "$@" \
    2>>"$OUT/bench.err" | grep -v '^#' | grep -v '^op,' | sed "s/^/$v,$tag,/" >>"$csv"
  unset FLASHC_CPU_AMX_FWD
}
bench d ceil --ceiling --ceiling-n $CN --n "$N2" --d 128 --reps 5
for r in 1 2; do
  bench 0 d128 --n "$N2" --d 128 --reps 5
  bench d d128 --n "$N2" --d 128 --reps 5
done
bench 0 d128c --causal --n "$N2" --d 128 --reps 5
bench d d128c --causal --n "$N2" --d 128 --reps 5
bench 0 d64 --n "$N2" --d 64 --reps 5
bench 1 d64 --n "$N2" --d 64 --reps 5

wait "$peer_pid"
cat "$OUT/peer.sum" >>"$sum" 2>/dev/null
echo "total $((SECONDS - T0)) s" >>"$sum"
cat "$sum"
grep -E '^amx_phases|^\| [a-z]' "$OUT/phases.log" 2>/dev/null
grep -h -E '^\| (label|default)' "$OUT"/peer.log 2>/dev/null | awk '!/label/ || !h++'
python3 - "$csv" <<'EOF'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
ceil = {}
for r in rows:
    if len(r) > 15 and r[2] == "gemm_bf16" and r[15]:
        ceil[r[1]] = float(r[15])
c = ceil.get("ceil") or ceil.get("ceil2")
print("oneDNN bf16 gemm ceiling: " + ", ".join(f"{k} {v:.0f}" for k, v in ceil.items()) + " GFLOP/s")
print("| FWD | tag | shape | Br x Bc | ms | GFLOP/s | of ceiling | max_err |")
print("|--:|---|---|---|--:|--:|--:|--:|")
for r in rows:
    if len(r) < 21 or r[2] != "attn" or not r[15]:
        continue
    g = float(r[15])
    frac = f"{g / c:.2f}" if c else "-"
    print(f"| {r[0]} | {r[1]} | {r[5]} | {r[8]}x{r[9]} | {float(r[13]):.2f} | {g:.0f} | {frac} | {r[20]} |")
EOF
