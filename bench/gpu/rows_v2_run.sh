#!/usr/bin/env bash
# bench/gpu/rows_v2_run.sh — the row-op kernels v2 (issue 14's speed targets) in one device call:
#   1. build (Release; FLASHC_DEPS = the cmocka folder of bench/gpu/stage.sh; FLASHC_SM90_ONLY=1
#      drops the sm_80 objects to halve nvcc's time: sm_80 is compiled on the dev machine)
#   2. tests/test_cuda_rows (v2 default dispatch), then again with FLASHC_CUDA_ROWS=v1
#   3. flashc bench --device cuda for the row ops and copy, v2 and v1 (FLASHC_CUDA_ROWS=v1)
#   4. bench/gpu/bench_rows.py: v2 against F.rms_norm, autograd, torch copy in one process
#   5. compute-sanitizer memcheck on test_cuda_rows (--report-api-errors no), time permitting
# A short table last. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
step() { echo "=== $* (${SECONDS}s)"; }
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader | tee "$OUT/gpu.txt"
B=build-gpu
[ "${FLASHC_SM90_ONLY:-0}" = 1 ] && sed -i '/code=sm_80/d' src/cuda/cuda.cmake
step build
{ cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFLASHC_INSTALL=OFF &&
  cmake --build $B -j "$(nproc)" --target flashc flashc_cli test_cuda_rows; } >"$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
step test_cuda_rows
timeout 40 $B/tests/test_cuda_rows >"$OUT/test_cuda_rows.log" 2>&1; echo "rc $?" >>"$OUT/test_cuda_rows.log"
grep -E "PASSED|FAILED|Failure|error|^rc" "$OUT/test_cuda_rows.log" | head -8
ops=rmsnorm,rmsnorm_bwd,swiglu,rope,copy
for v in v2 v1; do
  step "bench $v"
  FLASHC_CUDA_ROWS=$v timeout 25 $B/flashc bench --device cuda --op $ops --reps 7 --format json \
    >"$OUT/bench_$v.json" 2>"$OUT/bench_$v.err" || { echo "bench $v rc $?"; tail -3 "$OUT/bench_$v.err"; }
done
step bench_rows.py
FLASHC_LIBRARY="$PWD/$B/libflashc.so" PYTHONPATH=python timeout 30 python3 bench/gpu/bench_rows.py \
  --out "$OUT/bench_rows.json" >"$OUT/bench_rows.log" 2>&1 || { echo "bench_rows rc $?"; tail -4 "$OUT/bench_rows.log"; }
step "test_cuda_rows FLASHC_CUDA_ROWS=v1"
FLASHC_CUDA_ROWS=v1 timeout 20 $B/tests/test_cuda_rows >"$OUT/test_cuda_rows_v1.log" 2>&1; echo "rc $?" >>"$OUT/test_cuda_rows_v1.log"
grep -E "PASSED|FAILED|^rc" "$OUT/test_cuda_rows_v1.log" | head -4
if command -v compute-sanitizer >/dev/null; then
  left=$(( ${FLASHC_DEADLINE:-85} - SECONDS ))
  step "memcheck test_cuda_rows (${left}s left)"
  [ $left -gt 5 ] && timeout $left compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    $B/tests/test_cuda_rows >"$OUT/memcheck.log" 2>&1
  echo "memcheck rc $?" | tee -a "$OUT/memcheck.log"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/memcheck.log" | tail -3
fi
step table
python3 - "$OUT" <<'PY'
import json, os, sys
o = sys.argv[1]
def load(n):
    try: return json.load(open(os.path.join(o, n)))
    except Exception as e: return None
print("| op | impl | v2 GB/s | v1 GB/s | v2 us |")
print("|---|---|--:|--:|--:|")
b2, b1 = load("bench_v2.json"), load("bench_v1.json")
if b2:
    one = {(r["op"], r["impl"]): r for r in (b1 or {"results": []})["results"] if "error" not in r}
    for r in b2["results"]:
        if "error" in r: print(f"| {r['op']} | {r['impl']} | {r['error']} |"); continue
        q = one.get((r["op"], r["impl"]))
        print(f"| {r['op']} | {r['impl']} | {r['gbps']:.0f} | {q['gbps'] if q else float('nan'):.0f} | {r['ms']*1e3:.1f} |")
p = load("bench_rows.json")
if p:
    print("| py op | impl | us | TB/s | of copy | vs torch |")
    for r in p["rows"]:
        print(f"| {r['op']} | {r['impl']} | {r['ms']*1e3:.1f} | {r['tbps']:.2f} | {100*r['of_copy']:.0f}% | {r.get('vs_torch', 0):.2f} |")
PY
