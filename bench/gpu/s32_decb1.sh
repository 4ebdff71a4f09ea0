#!/usr/bin/env bash
# bench/gpu/s32_decb1.sh BUILD_DIR — issue 13's B = 1 decode on whatever card the call got
# (budget ~90 s): on the H100 of 2026-12-07 the B = 1 cells ran at 0.67-0.76x SDPA cuDNN while
# the batched ones ran at 0.96-0.99x and the H200 of 2026-12-04 had 0.91-0.97x at B = 1. Were the
# loaders and split rules (tuned on the H200) the H100's best? bench_decode.py, bf16, d 128, 32/8
# heads: (1) every loader and split rule at 1 x 4k, 1 x 32k, 4 x 32k, 16 x 32k (contiguous and
# page 16), each / the default; (2) explicit num_splits at B 1 for the default and lean5;
# (3) the same default under a clean flush (a 256 MB read) at 1 x 4k and 1 x 32k; (4) ncu of the
# default and of SDPA cuDNN at 1 x 4k and 1 x 32k under the bench's dirty L2: every kernel of a
# call (name, grid, duration, DRAM bytes), to see where flashc's extra microseconds go.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin decb1 "${1:-}"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
PY=(env PYTHONUNBUFFERED=1 timeout -k 2)
"${PY[@]}" 60 python3 bench/gpu/bench_decode.py --lib "$LIB" --shapes 1x4096,1x32768,4x32768,16x32768 \
  --heads 32/8 --pages 16 --rep-ms 20 --variants auto,lean3,lean5,wide,base,fa2,deep \
  --ratio-to auto --out "$OUT/var.json" >"$OUT/var.log" 2>&1 || echo "variants: rc $?"
"${PY[@]}" 45 python3 bench/gpu/bench_decode.py --lib "$LIB" --shapes 1x4096,1x32768 --heads 32/8 \
  --pages 16 --rep-ms 20 --variants auto --sweep 8,16,24,33,48,64 --sweep-variants auto,lean5 \
  --clean-shapes 1x4096,1x32768 --out "$OUT/sweep.json" >"$OUT/sweep.log" 2>&1 || echo "sweep: rc $?"
if command -v ncu >/dev/null; then
  for sh in 1x4096 1x32768; do
    PYTHONUNBUFFERED=1 timeout -k 2 40 ncu --cache-control none --clock-control none --csv --page raw \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size \
      python3 bench/gpu/bench_decode.py --lib "$LIB" --ncu-drive --shapes $sh --heads 32/8 \
      --variants auto,lean5,sdpa_cudnn >"$OUT/ncu_$sh.csv" 2>"$OUT/ncu_$sh.err" || echo "ncu $sh: rc $?"
  done
fi
for f in var sweep; do
  echo "== $f"
  grep -E 'WRONG|Traceback|Error' "$OUT/$f.log" | head -5
  grep -E '^\||sweep|GB/s' "$OUT/$f.log" | tail -40
done
for sh in 1x4096 1x32768; do
  [ -s "$OUT/ncu_$sh.csv" ] || continue
  echo "== ncu $sh (dirty L2; each call's kernels; zero_ rows left out)"
  python3 bench/gpu/prof_table.py kernels "$OUT/ncu_$sh.csv"
  grep -h "ncu-drive" "$OUT/ncu_$sh.csv" "$OUT/ncu_$sh.err" | head -4
done
