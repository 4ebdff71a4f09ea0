#!/usr/bin/env bash
# bench/gpu/fused_run.sh — issue 14's GPU check in one device call (the lent H200, 4 minutes):
#   1. build (Release; FLASHC_DEPS = the cmocka folder made by bench/gpu/stage.sh), unless
#      FLASHC_BUILD names a finished build directory
#   2. tests/test_cuda_rows (RMSNorm, SwiGLU, RoPE and the backwards vs the float64 references)
#   3. flashc bench --device cuda (the seeds' exercise on the GPU; JSON and markdown to $OUT)
#   4. bench/gpu/bench_rows.py (the row ops vs PyTorch and a copy ceiling, same run)
#   5. the Python tests of the fused ops (torch CPU + CUDA; pytest from $FLASHC_WHEELS if given)
#   6. compute-sanitizer memcheck on test_cuda_rows, if time is left
# Every step has its own timeout; a failing step does not stop the later ones.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
status=0
step() { echo; echo "=== $* ($(date -u +%H:%M:%S), ${SECONDS}s)"; }
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
B=${FLASHC_BUILD:-build-gpu}
if [ -z "${FLASHC_BUILD:-}" ]; then
  step build
  { cmake -S . -B $B -DCMAKE_BUILD_TYPE=Release -DFLASHC_INSTALL=OFF &&
    cmake --build $B -j "$(nproc)" --target flashc flashc_cli test_cuda_rows; } >"$OUT/build.log" 2>&1 ||
    { tail -30 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
  grep -E "rows|rope" "$OUT/build.log" | grep -E "spill|registers" | sort -u | head
fi

step "test_cuda_rows"
timeout 60 $B/tests/test_cuda_rows >"$OUT/test_cuda_rows.log" 2>&1 || { status=1; echo "TEST_CUDA_ROWS FAILED"; }
grep -E "PASSED|FAILED|error|Failure" "$OUT/test_cuda_rows.log" | head -20

# the row ops first (seconds), then attention (longest): each run writes its own JSON
for part in rows attn; do
  step "flashc bench --device cuda ($part)"
  ops=rmsnorm,rmsnorm_bwd,swiglu,swiglu_bwd,rope,copy; lim=40
  [ $part = attn ] && { ops=attn; lim=100; }
  timeout $lim $B/flashc bench --device cuda --op $ops --format json ${FLASHC_BENCH_ARGS:-} \
    >"$OUT/bench_cuda_$part.json" 2>"$OUT/bench_cuda_$part.err" ||
    { status=1; echo "BENCH ($part) rc != 0"; tail -5 "$OUT/bench_cuda_$part.err"; }
  grep -vE "^\[" "$OUT/bench_cuda_$part.err" | head -10
  python3 - "$OUT/bench_cuda_$part.json" <<'PY' | tee "$OUT/bench_cuda_$part.md"
import json, sys
d = json.load(open(sys.argv[1]))
print("| op | impl | n | d | ms | rate | peak MiB | device MiB | traffic MiB | err | speedup |")
print("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
for r in d["results"]:
    if "error" in r:
        print(f"| {r['op']} | {r['impl']} | {r['n']} | {r['d']} | {r['error']} |||||||"); continue
    g = lambda k: -1 if r.get(k) is None else r[k]
    rate = f"{g('gflops')/1e3:.1f} TFLOP/s" if g("gflops") >= 0 else f"{g('gbps'):.0f} GB/s"
    sp = f"{g('speedup'):.2f}x" if g("speedup") > 0 else "-"
    err = f"{g('max_err'):.1e}" if g("max_err") >= 0 else "-"
    print(f"| {r['op']} | {r['impl']} | {r['n']} | {r['d']} | {r['ms']:.3f} | {rate} | {r['peak_mib']:.0f} | {r['rss_mib']:.0f} | {r['traffic_mib']:.0f} | {err} | {sp} |")
for n in d["meta"]["notes"]:
    print("-", n)
PY
done

step "bench_rows.py (vs PyTorch)"
FLASHC_LIBRARY="$PWD/$B/libflashc.so" PYTHONPATH=python timeout 60 python3 bench/gpu/bench_rows.py --out "$OUT/bench_rows.json" \
  >"$OUT/bench_rows.log" 2>&1 || { status=1; echo "BENCH_ROWS FAILED"; }
tail -12 "$OUT/bench_rows.log"

step "pytest (fused ops, torch)"
if ! python3 -c "import pytest" 2>/dev/null && [ -n "${FLASHC_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --find-links "$FLASHC_WHEELS" --target "$PWD/.pytest-lib" pytest >"$OUT/pip.log" 2>&1
  export PYTHONPATH="$PWD/.pytest-lib${PYTHONPATH:+:$PYTHONPATH}"
fi
FLASHC_LIBRARY="$PWD/$B/libflashc.so" timeout 40 python3 -m pytest python/tests/test_fused.py python/tests/test_torch.py -q -rs -p no:cacheprovider \
  >"$OUT/pytest.log" 2>&1 || { status=1; echo "PYTEST FAILED"; }
tail -5 "$OUT/pytest.log"

if command -v compute-sanitizer >/dev/null && [ "$SECONDS" -lt 170 ]; then
  step "compute-sanitizer memcheck test_cuda_rows"
  timeout $((225 - SECONDS)) compute-sanitizer --tool memcheck --error-exitcode 9 $B/tests/test_cuda_rows >"$OUT/memcheck.log" 2>&1
  rc=$?; tail -3 "$OUT/memcheck.log"; [ $rc = 0 ] || { echo "MEMCHECK rc $rc"; [ $rc = 124 ] || status=1; }
fi
step done
exit $status
