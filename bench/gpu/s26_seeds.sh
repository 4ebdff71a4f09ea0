#!/usr/bin/env bash
# bench/gpu/s26_seeds.sh BUILD_DIR — issue 12's "benchmark from the seeds" with today's kernels
# (bench_bwd.py part 1: forward + backward of causal attention, B 4, H 16, d 64, bf16, T 1k-16k;
# median ms and measured peak GPU memory for flashc fast / deterministic through the Python
# binding's autograd, and SDPA math, flash, mem_eff, cuDNN; OOM reported as such). The table in
# bench/RESULTS.md ("The seeds' sdpa_bench") measured the kernels of 2026-11-29. Budget 100 s.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin seeds "${1:-}"
s_scratch seeds
"${PY[@]}" timeout -k 2 95 python3 bench/gpu/bench_bwd.py --lib "$LIB" --part 1 \
  --out "$OUT/seeds.json" >"$OUT/bench.log" 2>&1
rc=$?
s_pack "$OUT/seeds.json" "$OUT/bench.log"
cat "$OUT/bench.log" | tail -12
exit $rc
