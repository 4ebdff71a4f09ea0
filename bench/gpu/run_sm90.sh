#!/usr/bin/env bash
# bench/gpu/run_sm90.sh — one device call for the Hopper forward's versions (issue 11): check
# every sm90 family, then time them beside sm80 and PyTorch SDPA (flash, cuDNN) in one process.
#   1. libflashc.so and tests/test_cuda_attn: taken from FLASHC_PREBUILT (built on the
#      development machine, carried with the tree, with its libgomp.so.1 in lib/ in case this
#      machine has none) when they load here, else built here
#      (Release, sm_80 + sm_90a, only those two targets); FLASHC_DEPS as for run.sh (cmocka)
#   2. SASS of attn_fwd_sm90.cu.o per kernel: HGMMA count, local memory (LDL/STL), top register
#   3. at the same time (correctness only, so they may share the GPU):
#      the GPU tests with FLASHC_CUDA_KERNEL forced to each family of FLASHC_SM90_FAMILIES
#      (dims 64 and 128, the ones they serve), the default dispatch (dims 59, 64, 128, 256),
#      and compute-sanitizer memcheck, racecheck and synccheck on the short cases
#      (FLASHC_TEST_SMALL=1) of each family of FLASHC_SM90_SANITIZE
#   4. alone on the GPU: bench_sdpa.py with sm80 and every family whose tests passed, at the 12
#      headline cells, d = 256, and the Llama-3.1 shape (64 q / 8 kv heads, B = 1)
# Logs: $OUT/all.log (this output), $OUT/logs.tar.gz (every log), $OUT/bench.json. The device
# tool brings back 8 files at most, hence the archive. The bench's table is printed last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/build-gpu/out}
mkdir -p "$OUT"
LOGS=$(mktemp -d)
FAMS=${FLASHC_SM90_FAMILIES:-sm90 sm90v3 sm90v4 sm90v4w sm90v5}
SAN=${FLASHC_SM90_SANITIZE:-sm90v3 sm90v4w sm90v5}
T0=$(date +%s)
stamp() { echo; echo "=== $* (+$(($(date +%s) - T0)) s)"; }
pack() { tar -czf "$OUT/logs.tar.gz" -C "$LOGS" . 2>/dev/null; }
exec > >(tee "$OUT/all.log") 2>&1

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu \
  --format=csv,noheader
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

stamp "binaries"
LIB= TEST= OBJ=
pre=${FLASHC_PREBUILT:-}
# OpenMP's runtime of the development machine, carried in $pre/lib, where this one lacks it
if [ -n "$pre" ] && ldd "$pre/libflashc.so" 2>/dev/null | grep -q "libgomp.*not found"; then
  export LD_LIBRARY_PATH="$pre/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "(libgomp.so.1 from $pre/lib)"
fi
if [ -n "$pre" ] && [ -f "$pre/libflashc.so" ] && [ -x "$pre/test_cuda_attn" ] &&
   ! ldd "$pre/libflashc.so" "$pre/test_cuda_attn" | grep -q "not found" &&
   python3 -c "import ctypes, sys; ctypes.CDLL(sys.argv[1])" "$pre/libflashc.so"; then
  LIB=$pre/libflashc.so TEST=$pre/test_cuda_attn OBJ=$pre/attn_fwd_sm90.cu.o
  echo "prebuilt binaries load here: $pre"
else
  echo "building here"
  { cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release &&
    cmake --build build-gpu -j "$(nproc)" --target flashc test_cuda_attn; } >"$LOGS/build.log" 2>&1 ||
    { tail -30 "$LOGS/build.log"; pack; echo "build failed"; exit 1; }
  grep -E "spill|C75" "$LOGS/build.log" | sort -u | head
  LIB=build-gpu/libflashc.so TEST=build-gpu/tests/test_cuda_attn
  OBJ=build-gpu/CMakeFiles/flashc_cuda.dir/src/cuda/attn_fwd_sm90.cu.o
fi

# FLASHC_SM90_BENCH_ONLY=1: steps 1 and 4 only (every family of FLASHC_SM90_FAMILIES timed)
only=${FLASHC_SM90_BENCH_ONLY:-}
if [ -z "$only" ] && [ -f "$OBJ" ] && command -v cuobjdump >/dev/null; then
  cuobjdump --dump-sass "$OBJ" >"$LOGS/sm90.sass" 2>&1
  python3 - "$LOGS/sm90.sass" <<'EOF'
import re, sys
txt = open(sys.argv[1]).read()
for f in re.split(r"\n\s+Function : ", txt)[1:]:
    name = f.split("\n")[0]
    m = re.search(r"kernelI(\w+?)Li(\d+)ELi(\d+)ELi(\d+)ELi(\d+)E", name)
    regs = [int(x) for x in re.findall(r"\bR(\d+)\b", f)]
    print(f"  {m.groups() if m else name[:60]}: HGMMA {f.count('HGMMA')}, "
          f"LDL/STL {len(re.findall(r'[^A-Z](LDL|STL)[. ]', f))}, top register R{max(regs)}")
EOF
fi

passed=()
pids=()
[ -n "$only" ] && passed=($FAMS)
[ -z "$only" ] && stamp "GPU tests and sanitizers (concurrently)"
for k in $FAMS default; do
  [ -n "$only" ] && break
  if [ "$k" = default ]; then dims=59,64,128,256; kenv=(); else dims=64,128; kenv=(FLASHC_CUDA_KERNEL=$k); fi
  env "${kenv[@]}" OMP_NUM_THREADS=3 FLASHC_TEST_DIMS=$dims timeout 120 "$TEST" \
    >"$LOGS/tests-$k.log" 2>&1 &
  pids+=("$!:tests-$k")
done
for k in $SAN; do
  [ -n "$only" ] && break
  for tool in memcheck racecheck synccheck; do
    FLASHC_CUDA_KERNEL=$k FLASHC_TEST_SMALL=1 FLASHC_TEST_DIMS=64,128 OMP_NUM_THREADS=1 \
      timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 --report-api-errors no \
      "$TEST" >"$LOGS/san-$tool-$k.log" 2>&1 &
    pids+=("$!:san-$tool-$k")
  done
done
for pr in "${pids[@]}"; do
  pid=${pr%%:*} what=${pr#*:}
  wait "$pid"; rc=$?
  log=$LOGS/$what.log
  case $what in
    tests-*)
      k=${what#tests-}
      echo "$what: rc $rc, $(grep -c ': o err' "$log") cases, $(grep -c 'not served' "$log") not served," \
        "$(grep -E '^\[  (PASSED|FAILED)' "$log" | tr '\n' ' ')"
      [ $rc = 0 ] || grep -E "FAIL|error|Assert" "$log" | head -5
      [ $rc = 0 ] && [ "$k" != default ] && passed+=("$k");;
    san-*)
      echo "$what: rc $rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|SYNCCHECK SUMMARY|PASSED|FAILED' "$log" | tr '\n' ' ')";;
  esac
done
pack

stamp "benchmark (alone on the GPU): sm80 and the families that passed: ${passed[*]:-none}"
kern=sm80; for k in "${passed[@]}"; do kern="$kern,$k"; done
PYTHONUNBUFFERED=1 timeout "${FLASHC_BENCH_TIMEOUT:-120}" python3 bench/gpu/bench_sdpa.py \
  --lib "$LIB" --kernels "$kern" --dims 64,128,256 --seqlens 1024,4096,16384 \
  --llama-seqlens 1024,4096,16384 --rep-ms "${FLASHC_REP_MS:-100}" --out "$OUT/bench.json" \
  2>&1 | tee "$LOGS/bench.log"
echo "bench rc ${PIPESTATUS[0]} (+$(($(date +%s) - T0)) s)"
pack
