#!/usr/bin/env bash
# bench/cpu_amx_run.sh — the bf16 matrix-unit check on a CPU that has them (the H200 host's Xeon:
# AVX-512 BF16 + AMX-BF16), in one go: CPU-only build, the tests on the amx and avx512bf16 tables
# (cores 2 ..), and meanwhile bench/cpu_sdpa_peer.py (flashc vs torch CPU SDPA, same process, same
# inputs, 2 threads on cores 0, 1), the avx512bf16 table against flashc's float32 path, and the
# AMX path's block sizes. Logs under $OUT (default ./amx_out); the short table last. Needs cmake, gcc, cmocka (FLASHC_DEPS from bench/gpu/stage.sh) and torch.
#   FLASHC_DEPS=$PWD/.deps bench/cpu_amx_run.sh
# FLASHC_TEST_TIMEOUT / FLASHC_PEER_TIMEOUT: seconds per test / per peer call.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/amx_out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-amx}
if [ -n "${FLASHC_DEPS:-}" ]; then
  export PKG_CONFIG_PATH="$FLASHC_DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export LD_LIBRARY_PATH="$FLASHC_DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
{
  date -u
  uname -r
  lscpu | grep -E 'Model name|^CPU\(s\)|Thread|Core|Socket|L1d|L2|L3|MHz'
  grep -o -w -E 'amx_tile|amx_bf16|avx512_bf16|avx512f' /proc/cpuinfo | sort | uniq -c
  gcc --version | head -1
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

t0=$(date +%s)
{ cmake -S . -B "$BUILD" -DFLASHC_CUDA=OFF -DCMAKE_BUILD_TYPE=Release &&
  cmake --build "$BUILD" -j "$(nproc)"; } >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"

# The tests: every test binary under FLASHC_ISA=amx and under FLASHC_ISA=avx512bf16 (ctest's
# isa_run variants) plus the two that iterate over the tables themselves (test_attn_lowp,
# test_cpu_kernels). (The emulated units, tests/emu, are for CPUs without the units: not run
# here.) To fit one short device call they run on cores 2 .. N-1 while the peer bench runs on
# cores 0 and 1 (compute-bound shapes; both libraries are timed under the same conditions,
# interleaved: the ratios hold, the absolute figures may be a little below an idle machine's).
ncpu=$(nproc)
t_tests=$(date +%s)
(cd "$BUILD" && taskset -c 2-$(( ncpu - 1 )) ctest -j "$(( (ncpu - 2) / 2 ))" --timeout ${FLASHC_TEST_TIMEOUT:-120} \
   -R '\.(amx|avx512bf16)$|^test_attn_lowp$|^test_cpu_kernels$' --output-on-failure) >"$OUT/ctest.log" 2>&1 &
ctest_pid=$!

export FLASHC_LIBRARY=$PWD/$BUILD/libflashc.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
peer() { timeout ${FLASHC_PEER_TIMEOUT:-60} python3 bench/cpu_sdpa_peer.py --json "$OUT/peer.jsonl" "$@" 2>&1 | tee -a "$OUT/peer.log"; }
: >"$OUT/peer.jsonl"
t0=$(date +%s)
# the targets first: 2 threads (the script pins itself to cores 0, 1), d 128 and 64, n 512 .. 8k
peer --label auto --threads 2 --d 128 --n 512,1024,2048,4096,8192 --causal 0,1
peer --label auto --threads 2 --d 64 --n 512,1024,2048,4096,8192 --causal 0,1 --ceiling-n 0
# the backward: flashc bf16 (AMX) vs flashc float32 on the same values vs torch SDPA backward
timeout ${FLASHC_PEER_TIMEOUT:-60} python3 bench/cpu_bwd_peer.py --threads 2 --d 128,64 --n 1024,2048 \
  --causal 0,1 --json "$OUT/bwd.jsonl" 2>&1 | tee -a "$OUT/peer.log"
# AVX512-BF16 (the table for CPUs without AMX) against flashc's float32 path on the same inputs
# (the table is chosen once per process: one process each)
FLASHC_ISA=avx512bf16 peer --label avx512bf16 --flashc-only --threads 2 --d 128,64 --n 2048,4096 --causal 0,1 --ceiling-n 0
FLASHC_ISA=avx512 peer --label avx512-f32 --flashc-only --dtype f32 --threads 2 --d 128,64 --n 2048,4096 --causal 0,1 --ceiling-n 0
# block sizes of the AMX path on one shape
peer --label tiles --flashc-only --threads 2 --d 128 --n 4096 --causal 0 --ceiling-n 0 \
  --tiles 0x0,576x192,1152x96,1152x384,2304x192
echo "peer: $(( $(date +%s) - t0 )) s"

wait $ctest_pid
ctest_rc=$?
echo "ctest (amx, avx512bf16): rc $ctest_rc, $(( $(date +%s) - t_tests )) s"
grep -E 'tests passed|tests failed|Failed|Skipped|\*\*\*|Timeout' "$OUT/ctest.log" | head -40
# the paths really ran: the tables' own reports
grep -hE 'amx|avx512bf16' "$BUILD"/Testing/Temporary/LastTest.log 2>/dev/null |
  grep -E 'worst flash/naive|mm:|mm softmax|dispatch:|SKIP|kernel path' | sort | uniq -c | head -30
cp "$BUILD"/Testing/Temporary/LastTest.log "$OUT/ctest_LastTest.log" 2>/dev/null

echo
echo "## summary (medians; flashc/torch = torch time / flashc time)"
python3 - "$OUT/peer.jsonl" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print("| label | thr | dtype | d | n | causal | tiles | flashc GFLOP/s | torch GFLOP/s | flashc/torch | of ceiling |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| {r['label']} | {r['threads']} | {r['dtype']} | {r['d']} | {r['n']} | {r['causal']} | {r['block_q']}x{r['block_k']} | "
          f"{r['flashc_gflops']:.0f} | {r['torch_gflops']:.0f} | {r['ratio']:.2f} | {r['of_ceiling']:.2f} |")
EOF
exit $ctest_rc
