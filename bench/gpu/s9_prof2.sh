#!/usr/bin/env bash
# bench/gpu/s9_prof2.sh BUILD_DIR — Nsight Compute over the CURRENT default kernels of flashc and
# the same-run cuDNN kernels (torch SDPA) on the same inputs (helper prof2): what limits issues 11
# (sm90 forward), 12 (backward) and 13 (decode). Profiling only: no build, no tests.
# Budget: <= 120 s of wall time (hard `timeout`s, a global deadline; ~60-75 s expected):
#   1. (<= 15 s) `ncu --query-metrics` (base and all-suffix listings) -> prof_table.py pick: only
#      metric names this ncu knows (ncu refuses a run with an unknown one): time, grid / block /
#      registers / shared memory, tensor pipe % (hmma cycles, as in the 2026-12-01 profile, and the
#      Hopper gmma equivalent if listed), issue slots %, achieved occupancy, DRAM % and bytes, L2
#      hit rate, the warp stall reasons (cycles per issued instruction). No section sets.
#   2. (<= ~100 s, three ncu processes in turn, each under its own timeout: fwd, bwd, decode)
#      `ncu --clock-control none --profile-from-start off` over bench/gpu/prof_drive.py --ranges:
#      per case and side 4 warm-up calls, then ONE call inside cudaProfilerStart/Stop, after a
#      marker kernel, so each kernel is profiled once (caches flushed by ncu, as on 12-01).
#      Cases (bf16; fwd / bwd: batch x seqlen = 16384, hidden 2048):
#        fwd d128 non-causal 2k (B8 H16) and 16k (B1 H16), fwd d128 causal 4k (B4 H16),
#        fwd d64 non-causal 4k (B4 H32); bwd d128 and d64 non-causal 4k (flashc autograd vs
#        cuDNN autograd: every kernel of the backward call);
#        decode Hq32 / Hkv8 d128, 16 x 32k and 1 x 32k (flash_attn_with_kvcache vs SDPA cuDNN GQA).
#      If the first run fails with no kernel rows (a metric refused), it is retried once with the
#      2026-12-01 metric list (known to work there).
#   3. prof_table.py table (each run's kernels named by its own driver's SEG lines): per case, the
#      two sides' summed ncu time and cudnn/flashc ratio, then one line a kernel (kernels under 2%
#      of their side folded). LAST block of the output.
# PROF2_NAME / PROF2_GROUPS (bench/gpu/s28_prof_bwd.sh): the output's name and the ncu groups, one
# "name cap case..." a line, in place of the three below.
# Files in $OUT (default BUILD_DIR/out-prof2): ncu_raw.csv (the three runs' raw CSV pages) and
# prof2.log (the metric list, the drivers' output, ncu's messages).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin "${PROF2_NAME:-prof2}" "${1:-}"
export FLASHC_LIBRARY=$LIB PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
T0=$(date +%s)
left() { echo $((117 - ($(date +%s) - T0))); } # seconds left of the 120
RAW=$OUT/ncu_raw.csv LOG=$OUT/prof2.log
TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT
: >"$RAW"
: >"$LOG"
command -v ncu >/dev/null || { echo "prof2: no ncu on PATH"; exit 2; }

# 1. the metric names this ncu knows
timeout -k 2 12 ncu --query-metrics --query-metrics-mode all >"$TMPD/q_all.txt" 2>&1 &
timeout -k 2 12 ncu --query-metrics >"$TMPD/q_base.txt" 2>&1
wait
M=$(python3 bench/gpu/prof_table.py pick "$TMPD/q_all.txt" "$TMPD/q_base.txt")
M0=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread,launch__shared_mem_per_block_dynamic,sm__warps_active.avg.pct_of_peak_sustained_active,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,dram__bytes_write.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
[ -n "$M" ] || M=$M0
{
  echo "ncu: $(ncu --version 2>/dev/null | tail -1); query: $(wc -l <"$TMPD/q_all.txt") / $(wc -l <"$TMPD/q_base.txt") lines"
  echo "metrics ($(echo "$M" | tr , '\n' | wc -l)): $M"
  grep -oE '[a-z0-9_]*(gmma|tensor_op|pipe_tensor)[a-z0-9_]*' "$TMPD/q_base.txt" | sort -u | tr '\n' ' '
  echo
} | tee -a "$LOG" | cut -c1-400
echo "step 1: $(($(date +%s) - T0)) s"

# 2. one ncu process a group; CAP: its own ceiling in seconds
PAIRS=()
prof() { # name cap case...
  local name=$1 cap=$2 t1 n rc
  shift 2
  t1=$(date +%s)
  n=$(left)
  [ "$n" -lt "$cap" ] && cap=$n
  [ "$cap" -lt 8 ] && { echo "ncu $name: skipped, ${n} s left"; return; }
  run1() { # metrics case...
    local m=$1
    shift
    timeout -s INT -k 4 "$cap" ncu --clock-control none --profile-from-start off --print-units base \
      --csv --page raw --metrics "$m" --log-file "$TMPD/$name.csv" \
      python3 bench/gpu/prof_drive.py --ranges "$@" >"$TMPD/$name.drive" 2>&1
  }
  run1 "$M" "$@"
  rc=$?
  if [ "$rc" != 124 ] && [ "$M" != "$M0" ] && ! grep -q spin_kernel "$TMPD/$name.csv" 2>/dev/null; then
    echo "ncu $name: rc $rc, no kernel rows: $(grep -m2 -iE 'error|unknown|fail' "$TMPD/$name.csv" "$TMPD/$name.drive" | tr '\n' ' ' | cut -c1-300)"
    n=$(left)
    [ "$n" -lt "$cap" ] && cap=$n
    [ "$cap" -ge 8 ] && { run1 "$M0" "$@"; rc=$?; }
    M=$M0 # the later groups go straight to the known list
  fi
  cat "$TMPD/$name.csv" >>"$RAW" 2>/dev/null
  { echo "=== $name: rc $rc"; cat "$TMPD/$name.drive" "$TMPD/$name.csv" 2>/dev/null | grep -v '^"'; } >>"$LOG"
  PAIRS+=("$TMPD/$name.csv" "$TMPD/$name.drive")
  echo "ncu $name: rc $rc, $(($(date +%s) - t1)) s, $(grep -c '^"' "$TMPD/$name.csv" 2>/dev/null) csv rows$(grep -m1 FAILED "$TMPD/$name.drive" | cut -c1-200 | sed 's/^/, /')"
}
if [ -n "${PROF2_GROUPS:-}" ]; then # another script's groups, one "name cap case..." a line
  while read -r g; do
    # shellcheck disable=SC2086
    [ -n "$g" ] && prof $g
  done <<<"$PROF2_GROUPS"
else
  prof fwd 45 fwd:S=2048,D=128 fwd:S=16384,D=128 fwd:S=4096,D=128,CAUSAL=1 fwd:S=4096,D=64
  prof bwd 40 bwd:S=4096,D=128 bwd:S=4096,D=64
  prof decode 30 decode:B=16,CTX=32768 decode:B=1,CTX=32768
fi

# 3. the table
echo "=== prof2: Nsight Compute, defaults vs cuDNN ($(($(date +%s) - T0)) s; raw CSV: $RAW)"
[ ${#PAIRS[@]} -gt 0 ] && timeout 10 python3 bench/gpu/prof_table.py table "${PAIRS[@]}"
