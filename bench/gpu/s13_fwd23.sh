#!/usr/bin/env bash
# bench/gpu/s13_fwd23.sh BUILD_DIR — issue 11 (helper fwd23): the sm90vl kernel isolates its
# sequences (attn_fwd_sm90.cu, VL: the V rows past a sequence's end zeroed in shared memory by a
# warp of the producer's warpgroup before any P V reads them; the kernel's comment), so that
# varlen may go to it by default. Opt-in FLASHC_CUDA_SM90_VARLEN=1 until this run says otherwise;
# "force" in the tests and the bench (refused where no sm90vl instance serves the problem).
# Budget: <= 200 s of wall time in all (every step under `timeout`, a global deadline; ~130-170 s
# expected).
#   1. (<= 100 s, concurrently) tests/test_cuda_serving:
#        t-iso   test_varlen_isolation (new): 7 varlen cases whose sequences sit beside rows of
#                NaN / +inf / -inf / -NaN (the next sequence's K / V rows after every problem's
#                keys, the next one's Q rows after its query rows, 40 such rows of no sequence at
#                the end; d 64 / 128 / 192 / 256, padded 96, causal, no mask, window (37, 19),
#                sliding 256, softcap, ALiBi, MHA / GQA / MQA), each forced on the sm90vl instance,
#                on the sm80 mods instance and on the KV-cache kernel, finite and by the 2x rule
#                against float64 (on main before fwd23 every forced sm90vl pass here fails: the
#                next sequence's V rows reached O as P = 0 x NaN / inf);
#        t-vl    test_prefill_varlen_sm90 (fwd22's 15 cases: 14 forced sm90vl passes, the 192 /
#                128 one on sm80; each also on the sm80 mods instance and the KV-cache kernel;
#                then =force refusing D 36);
#        t-pm    test_prefill_mods with FLASHC_CUDA_SM90_VARLEN=1 (its varlen cases from 64 rows
#                on the sm90vl instances where they serve them);
#        t-var   test_varlen with FLASHC_CUDA_SM90_VARLEN=1;
#      and on the short cases (FLASHC_TEST_SMALL=1, forced sm90vl only), test_varlen_isolation's
#      first three (-iso: d 128 causal GQA, d 64 window (37, 19) + ALiBi MQA, d 256 causal
#      softcap, beside poison) and test_prefill_varlen_sm90's (-vl: the same shapes, fwd22's
#      layout), memcheck (mc-*), racecheck (rc-*) and synccheck (sc-*), six jobs side by side:
#      the V fixer's zeros (generic stores into a slot the copy engine filled, read by wgmma after
#      fence.proxy.async and two mbarriers) and the tile queue's second word.
#   2. (the time left, <= 75 s, alone on the GPU) bench_prefill.py --set varlen, as s12_fwd22.sh (since removed)
#      ran it: sm90vl (forced) vs sm80 mods vs SDPA cuDNN (the batch padded to 16 x 4096, and a
#      loop per sequence), bf16, Hq 32 / Hkv 8, 16 sequences of 512-4096 rows (35,008 tokens),
#      d 128 causal, d 64 causal, d 128 without the mask.
#   3. The decision, printed last (below).
# Decision: varlen goes to sm90vl by default (where it serves: compute capability 9.0, bf16 / fp16,
# D == Dv, max(D, Dv) <= SM90_MODS_DEFAULT_MAX_D = 128, as sm90_mods_variant already limits a
# default) if every job passed (rc 0, sanitizers 0 errors / hazards, the forced sm90vl passes all
# there: t-iso 7, t-vl 14, 3 in each sanitizer job) and vl/80 (the sm80 route's time over sm90vl's) >=
# 1.05 in every cell of the bench. The flip, prepared, not applied: in src/cuda/attn.cu
#     enum { SM90_VARLEN_DEFAULT = 0 };   ->   enum { SM90_VARLEN_DEFAULT = 1 };
# (and its comment above sm90_varlen_family: "unset: SM90_VARLEN_DEFAULT, on at max(D, Dv) <= 128
# since the H200 run of <date>, s13_fwd23.sh"); nothing else changes: sm90_mods_variant already
# keeps varlen Dk != Dv and, for a default, max(D, Dv) > 128 on sm80, and FLASHC_CUDA_SM90_VARLEN=0
# stays the way back.
# Files in $OUT: fwd23_logs.tgz (every job's log and the bench's), fwd23_bench.json.
# BUILD_DIR: built already with tests (libflashc.so, tests/test_cuda_serving); no rebuild.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin fwd23 "${1:-}" tests/test_cuda_serving
TEST=$B/tests/test_cuda_serving
FINAL=$OUT
OUT=$(mktemp -d) # the jobs' logs, packed into one file of $FINAL at the end
T0=$(date +%s)
left() { echo $((197 - ($(date +%s) - T0))); } # seconds left of the 200

# name timeout omp varlen small filter [sanitizer tool]
tst() {
  local n=$1 t=$2 omp=$3 vl=$4 small=$5 filter=$6 tool=${7:-} san=()
  [ -n "$tool" ] && san=(compute-sanitizer --tool "$tool" --error-exitcode 9 --report-api-errors no)
  OMP_NUM_THREADS=$omp job "$n" "$t" env -u FLASHC_CUDA_KERNEL -u FLASHC_CUDA_SM90_DKDV \
    -u FLASHC_CUDA_SM90_MODS -u FLASHC_TEST_SM90_MODS -u FLASHC_CUDA_SM90_VARLEN \
    ${vl:+FLASHC_CUDA_SM90_VARLEN=$vl} FLASHC_TEST_SMALL="$small" \
    FLASHC_TEST_VERBOSE=1 FLASHC_TEST_FILTER="$filter" "${san[@]}" "$TEST"
}
tst t-iso 90 3 "" 0 test_varlen_isolation
tst t-vl 90 4 "" 0 test_prefill_varlen_sm90
tst t-pm 90 3 1 0 test_prefill_mods
tst t-var 70 1 1 0 test_varlen
for tool in memcheck racecheck synccheck; do
  tst "${tool:0:1}c-iso" 100 1 "" 1 test_varlen_isolation "$tool"
  tst "${tool:0:1}c-vl" 100 1 "" 1 test_prefill_varlen_sm90 "$tool"
done
wait_jobs
echo "(tests and sanitizers +$(($(date +%s) - T0)) s)"
fwd_jobs_summary
declare -A forced=() # each job's forced sm90vl passes (told by the route and its tiles)
for n in "${s_names[@]}"; do
  l=$OUT/$n.log
  forced[$n]=$(grep -c 'SM90_VARLEN=force.*: the sm90 mods kernel' "$l")
  echo "$n: forced sm90vl passes: ${forced[$n]} (beside poison: $(grep 'varlen-poison' "$l" |
    grep -c 'SM90_VARLEN=force.*: the sm90 mods kernel')), SM90_VARLEN=0 on sm80:" \
    "$(grep -c 'SM90_VARLEN=0.*: the sm80 mods kernel' "$l"), KV-cache passes beside poison:" \
    "$(grep -E '^  varlen-poison .*PREFILL_MODS=0' "$l" | grep -c ': o err')"
done
grep -h 'FAILED CASE' "$OUT"/*.log | head -6 | cut -c1-400
grep -h 'SM90_VARLEN=force, D 36' "$OUT"/t-vl.log | head -2 | cut -c1-240

BENCH_PY=bench/gpu/bench_prefill.py fwd11_bench 75 --set varlen
brc=$rc
sed -n '/^cell /,$p' "$OUT/bench.log"
cp "$OUT/bench.json" "$FINAL/fwd23_bench.json" 2>/dev/null

# ---- the decision (last) ----
jobs_ok=1
jobs_failed && jobs_ok=0
for n in "${s_names[@]}"; do # a sanitizer that found something exits 9, but say so anyway
  grep -qE 'ERROR SUMMARY: [1-9]|RACECHECK SUMMARY: [1-9]' "$OUT/$n.log" && jobs_ok=0
done
counts_ok=1
[ "${forced[t-iso]}" = 7 ] && [ "${forced[t-vl]}" = 14 ] || counts_ok=0
for n in mc-iso mc-vl rc-iso rc-vl sc-iso sc-vl; do [ "${forced[$n]}" = 3 ] || counts_ok=0; done
python3 - "$OUT/bench.json" "$jobs_ok" "$counts_ok" "$brc" <<'PY'
import json, sys
path, jobs_ok, counts_ok, brc = sys.argv[1], sys.argv[2] == "1", sys.argv[3] == "1", sys.argv[4]
cells = ("varlen d 128 causal", "varlen d 64 causal", "varlen d 128 full")
try:
    rows = json.load(open(path))
except Exception as ex:  # no bench: no decision to flip
    rows = []
    print(f"bench: no results ({ex})")
ms = {(r["case"], r["variant"].split(",")[0]): r["ms"] for r in rows if r.get("ms")}
ratios = {}
for c in cells:
    vl, s8 = ms.get((c, "flashc sm90 varlen")), ms.get((c, "flashc sm80 mods"))
    ratios[c] = s8 / vl if vl and s8 else None
print("vl/80 per cell: " + ", ".join(f"{c[7:]} {r:.3f}" if r else f"{c[7:]} -"
                                    for c, r in ratios.items()))
why = []
if not jobs_ok:
    why.append("a test or sanitizer job failed")
if not counts_ok:
    why.append("forced sm90vl passes missing (want t-iso 7, t-vl 14, each sanitizer job 3)")
if brc != "0":
    why.append(f"the bench failed (rc {brc}: WRONG / error / refused / timed out)")
slow = [c for c, r in ratios.items() if r is None or r < 1.05]
if slow:
    why.append("vl/80 < 1.05 (or missing) in: " + ", ".join(slow))
if why:
    print("DECISION: keep FLASHC_CUDA_SM90_VARLEN opt-in (SM90_VARLEN_DEFAULT 0): " +
          "; ".join(why))
else:
    print("DECISION: varlen to sm90vl by default: SM90_VARLEN_DEFAULT = 1 in src/cuda/attn.cu "
          "(max(D, Dv) <= 128, D == Dv; the header of this script)")
PY
tar czf "$FINAL/fwd23_logs.tgz" -C "$OUT" . && rm -rf "$OUT"
[ "$jobs_ok" = 1 ] || exit 1 # (the jobs' rc files are gone with $OUT: jobs_ok holds them)
exit "$brc"
