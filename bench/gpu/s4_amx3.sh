#!/usr/bin/env bash
# bench/gpu/s4_amx3.sh BUILD_DIR — issue 16 on the H200 host's CPU (AMX-BF16), the CPU lane of a
# device call (cores 8-15 by default, beside the GPU jobs), <= 120 s in all:
#   (a) the forward's tests on the AMX table with the fused tile forced (FLASHC_CPU_AMX_FWD=3,
#       then =2 and =1: src/cpu/kernels/amx.c fwd_tile, bit-identical to the chunked path by
#       tests/emu's test_mm_fused), plus test_attn_lowp (the 2x rule on every table);
#   (b) `flashc bench --ceiling` (the oneDNN bf16 gemm ceiling: libdnnl on LD_LIBRARY_PATH) and
#       the bf16 flash forward for FLASHC_CPU_AMX_FWD = 0 (the chunked path, main's default),
#       1, 2, 3, interleaved in rounds, 2 threads on two cores; d 128 and 64, n 2048 / 4096,
#       causal and not; Bc / Br around the default for the fused variants;
#       and bench/amx_phases.c (flashc_amx_phases: each phase of one key tile alone, and the
#       fused variants, 1 and 2 threads);
#   (c) if time is left, bench/cpu_sdpa_peer.py (torch CPU SDPA, same process, same inputs)
#       for the default and the fused path.
# BUILD_DIR: built with tests on (libflashc.so, flashc, tests/); no rebuild. Logs under $OUT
# (default BUILD_DIR/out-amx3); the table last (GFLOP/s, and the fraction of the same run's
# oneDNN bf16 gemm ceiling). FLASHC_AMX3_CORES (8-15), FLASHC_AMX3_BENCH_CORES (8,9).
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${1:?usage: s4_amx3.sh BUILD_DIR}
B=$(realpath "$B")
OUT=${OUT:-$B/out-amx3}
mkdir -p "$OUT"
cores=${FLASHC_AMX3_CORES:-8-15}
bc2=${FLASHC_AMX3_BENCH_CORES:-8,9}
T0=$SECONDS
LIMIT=${FLASHC_AMX3_LIMIT:-115}
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

# (a) tests, fused tile forced (the default path's amx tests run in the lead's CPU suite)
sum="$OUT/summary.txt"
: >"$sum"
tests() { # VARIANT SECONDS REGEX
  local v=$1 lim=$2 re=$3 t=$SECONDS
  [ "${FLASHC_AMX3_TESTS:-1}" = 1 ] || return
  [ "$(left)" -gt $((lim + 60)) ] || { echo "tests FLASHC_CPU_AMX_FWD=$v: skipped (time)" >>"$sum"; return; }
  FLASHC_CPU_AMX_FWD=$v timeout -k 2 "$lim" taskset -c "$cores" \
    ctest --test-dir "$B" -j 8 \
    --timeout "$lim" -R "$re" --output-on-failure >"$OUT/ctest$v.log" 2>&1
  echo "tests FLASHC_CPU_AMX_FWD=$v: rc $?, $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest$v.log" | tail -1)" >>"$sum"
}
tests 3 40 '^(test_attn_v2|test_attn_fwd|test_findings_attn|test_cases|test_threads)\.amx$|^test_attn_lowp$'
tests 2 15 '^(test_attn_v2|test_attn_fwd)\.amx$'
tests 1 15 '^(test_attn_v2|test_attn_fwd)\.amx$'

# (b) benches: one CSV of every row, variant in the first column
csv="$OUT/bench.csv"
: >"$csv"
bench() { # VARIANT TAG ARGS...
  local v=$1 tag=$2
  shift 2
  [ "$(left)" -gt 8 ] || { echo "bench $v $tag: skipped (time)" >>"$sum"; return; }
  FLASHC_CPU_AMX_FWD=$v timeout -k 2 $(($(left) - 3)) taskset -c "$bc2" "$fl" bench --threads 2 \
    --op attn --impl flash --dtype bf16 --heads 8 --ref-rows 64 --format csv "$@" \
    2>>"$OUT/bench.err" | grep -v '^#' | grep -v '^op,' | sed "s/^/$v,$tag,/" >>"$csv"
}
bench 0 ceil --ceiling --ceiling-n $CN --n "$N2" --d 128 --reps 5
# the phases of one key tile against one item's rows (bench/amx_phases.c), 1 and 2 threads
ph="$B/flashc_amx_phases"
[ -x "$ph" ] || ph="$B/bin/flashc_amx_phases"
if [ -x "$ph" ]; then
  for a in "--d 128" "--d 128 --threads 2" "--d 64 --threads 2" "--d 128 --cols 384 --threads 2"; do
    [ "$(left)" -gt 40 ] || break
    # shellcheck disable=SC2086
    timeout -k 2 10 taskset -c "$bc2" "$ph" $a >>"$OUT/phases.log" 2>&1
    echo "phases $a: rc $?" >>"$sum"
  done
fi
for r in 1 2; do
  for v in 3 2 1 0; do
    bench $v d128 --n "$N2" --d 128 --reps 5
  done
done
for v in 3 1 0; do
  bench $v d128c --causal --n "$N2" --d 128 --reps 5
  bench $v d64 --n "$N2" --d 64 --reps 5
done
for t in "--bc 128" "--bc 256" "--bc 384" "--br 576" "--br 288 --bc 384"; do
  bench 3 "${t// /}" $t --n "$N1" --d 128 --reps 5
done
bench 0 ceil2 --ceiling --ceiling-n $CN --n "${N2%%,*}" --d 128 --reps 3

# (c) the torch peer, if time is left (about 25 s each)
export FLASHC_LIBRARY=$B/libflashc.so PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
for v in 3 0; do
  [ "$(left)" -gt 30 ] || { echo "peer $v: skipped (time)" >>"$sum"; continue; }
  FLASHC_CPU_AMX_FWD=$v timeout -k 2 $(($(left) - 3)) python3 bench/cpu_sdpa_peer.py --threads 2 \
    --cores "$bc2" --d 128 --n "$N2" --causal 0 --rounds 3 --ceiling-n 0 --no-check \
    --label "fwd$v" --json "$OUT/peer.jsonl" >"$OUT/peer$v.log" 2>&1
  echo "peer FLASHC_CPU_AMX_FWD=$v: rc $?" >>"$sum"
done

echo "total $((SECONDS - T0)) s" >>"$sum"
cat "$sum"
grep -E '^amx_phases|^\| [a-z]' "$OUT/phases.log" 2>/dev/null
grep -h -E 'peer|flashc|torch' "$OUT"/peer*.log 2>/dev/null | grep -v '^#' | tail -12
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
