#!/usr/bin/env bash
# bench/gpu/s9_amx9.sh BUILD_DIR — issue 16's "bf16 backward >= 3x flashc's f32 backward" on the
# H200 host's CPU (16-core Xeon, AMX-BF16; CPU only, the GPU stays with the other jobs), helper
# amx9, budget 90 s (hard timeouts inside; FLASHC_AMX9_LIMIT, default 86). What it checks there
# (bench/RESULTS.md "Issue 16: the split by vcvtne2ps2bf16 (helper amx9)"): split_cvt, the split
# of P and dS into hi + lo bf16 operands by vcvtne2ps2bf16, bit for bit the scalar split
# (the default since 2026-12-04; FLASHC_CPU_BWD_SPLIT=0 takes the scalar split):
#   (a) on cores 12-15: test_cpu_kernels (test_mm_split: split and split_cvt of the amx and
#       avx512bf16 tables against the scalar model, bit for bit, on the real units) and
#       test_attn_bwd(_v2).amx with FLASHC_CPU_BWD_SPLIT=1 (the backward through split_cvt under
#       the 2x rule; the worst-ratio lines);
#   (b) meanwhile on cores 8,9 (2 threads, H 8): bench/cpu_bwd_peer.py in one process,
#       interleaved rounds: flashc bf16 with split (mm1), with split_cvt (mm1+s), flashc f32 on
#       the same values; d 128 / 64, n 2048 / 4096, causal and not;
#   (c) after both, on cores 0-15 (16 threads, H 16: the fused schedule, one item a thread) the
#       same table at d 128 / 64, n 2048 / 4096. The GPU lane may hold cores 0-7 meanwhile:
#       read the ratios of the same process (new / old, f32 / bf16), not the absolute times.
# BUILD_DIR: built with tests (libflashc.so, tests/); no rebuild. Logs in $OUT (default
# BUILD_DIR/out-amx9); the short table LAST on stdout: per (threads, d, n, causal) the bf16 ms of
# split and split_cvt, new / old speed (old ms / new ms) and f32 ms / bf16 ms of each.
# FLASHC_AMX9_BENCH_CORES (8,9), FLASHC_AMX9_TEST_CORES (12-15), FLASHC_AMX9_WIDE_CORES
# (0,...,15) move the lanes.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin amx9 "${1:-}" tests/test_cpu_kernels tests/test_attn_bwd_v2
T0=$SECONDS
LIMIT=${FLASHC_AMX9_LIMIT:-86}
BC=${FLASHC_AMX9_BENCH_CORES:-8,9}
TC=${FLASHC_AMX9_TEST_CORES:-12-15}
WC=${FLASHC_AMX9_WIDE_CORES:-$(seq -s, 0 15)}
sum="$OUT/summary.txt"
: >"$sum"
s_machine
export FLASHC_LIBRARY=$LIB PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
unset FLASHC_CPU_BWD_MM FLASHC_CPU_BWD_SPLIT FLASHC_CPU_AMX_FWD FLASHC_ISA
peer() { # label threads cores heads seconds
  timeout -k 2 "$5" python3 bench/cpu_bwd_peer.py --threads "$2" --cores "$3" --heads "$4" \
    --d 128,64 --n 2048,4096 --causal 0,1 --rounds 3 --mm 1,1+s --no-default --no-torch \
    --label "$1" >"$OUT/$1.log" 2>&1
  echo "$1 (bf16 split / split_cvt vs f32, $2 threads): rc $?, $((SECONDS - T0)) s" >"$OUT/$1.sum"
}

# (b) 2 threads on cores 8,9, beside the tests
peer t2 2 "$BC" 8 40 &
peer_pid=$!

# (a) tests on the real units, cores 12-15 (-V: the worst-ratio lines of passing runs too)
t=$SECONDS
FLASHC_CPU_BWD_SPLIT=1 timeout -k 2 38 taskset -c "$TC" ctest --test-dir "$B" -j 4 --timeout 36 -V \
  -R '^test_cpu_kernels$|^test_attn_bwd(_v2)?\.amx$' >"$OUT/ctest.log" 2>&1
echo "tests (split_cvt kernels; backward amx with FLASHC_CPU_BWD_SPLIT=1): rc $?, $((SECONDS - t)) s, $(grep -E 'tests passed' "$OUT/ctest.log" | tail -1)" >>"$sum"
grep -E '^ *[0-9]+/[0-9]+ Test' "$OUT/ctest.log" | sed 's/  */ /g' >>"$sum"
grep -E 'worst ratio.* bf16 ' "$OUT/ctest.log" | sed 's/^[0-9]*: //' | cut -c1-170 >>"$sum"
grep -E 'mm split: (amx|avx512bf16) split|mm split \[|FLASHC_TEST_SEED' "$OUT/ctest.log" |
  sed 's/^[0-9]*: //' | sort -u | head -8 >>"$sum"
wait "$peer_pid"

# (c) 16 threads, what is left of the budget
left=$((LIMIT - (SECONDS - T0) - 2))
if [ "$left" -ge 10 ]; then
  peer t16 16 "$WC" 16 "$left"
else
  echo "t16: skipped ($left s left)" >"$OUT/t16.sum"
fi
cat "$OUT/t2.sum" "$OUT/t16.sum" >>"$sum" 2>/dev/null

echo "total $((SECONDS - T0)) s" >>"$sum"
cat "$sum"
grep -h -E '^# flashc' "$OUT/t2.log" | head -1 | cut -c1-200
# one row per (threads, d, n, causal): cpu_bwd_peer.py's columns 2 label, 3 variant, 4 d, 5 n,
# 6 causal, 7 ms, 8 f32 ms
echo "| threads | d | n | causal | split ms | split_cvt ms | new / old | f32 / split | f32 / split_cvt |"
echo "|---|---|---|---|--:|--:|--:|--:|--:|"
cat "$OUT/t2.log" "$OUT/t16.log" 2>/dev/null | awk -F'|' '
  $2 ~ /t(2|16)/ { gsub(/ /, "", $2); gsub(/ /, "", $3); k = $2 "|" $4 "|" $5 "|" $6
    if ($3 == "mm1") { o[k] = $7; f[k] = $8; if (!(k in seen)) { seen[k] = 1; ord[++n] = k } }
    if ($3 == "mm1+s") { w[k] = $7; if (!(k in seen)) { seen[k] = 1; ord[++n] = k } } }
  END { for (i = 1; i <= n; i++) { k = ord[i]; split(k, a, "|"); sub(/^t/, "", a[1])
      if ((k in o) && (k in w) && w[k] > 0 && o[k] > 0)
        printf "| %s |%s|%s|%s| %.1f | %.1f | %.3f | %.2f | %.2f |\n", a[1], a[2], a[3], a[4],
          o[k], w[k], o[k] / w[k], f[k] / o[k], f[k] / w[k]
      else printf "| %s |%s|%s|%s| (incomplete) |\n", a[1], a[2], a[3], a[4] } }'
