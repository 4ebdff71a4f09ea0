#!/usr/bin/env bash
# bench/gpu/s14_modsw.sh BUILD_DIR — issue 11 (lead, 2026-12-04 evening): the sm90 mods instances
# at d 192 and 256 (windows, softcap, ALiBi on v6's kernel, 80- / 64-key blocks), tested on the
# H200 (s12_fwd21.sh's t-m: forced passes at d 192 / 256, padded 160 / 200, racecheck) but never
# timed, so the default stops at max(D, Dv) <= 128 (attn.cu, SM90_MODS_DEFAULT_MAX_D). This times
# them: bench_prefill.py --set mods --dims 192,256 (bf16, Hq 32 / Hkv 8, B x S = 16k, S 2k / 8k,
# causal; window 1024, softcap 30, ALiBi; sm90 forced vs the sm80 mods instance vs SDPA).
# Decision: the dense mods default takes d 192 / 256 too (SM90_MODS_DEFAULT_MAX_D = 256; varlen
# keeps 128, not timed there) if no cell is WRONG / refused and sm90 / sm80 >= 1.03 in all 12.
# Budget ~90 s. BUILD_DIR: built (libflashc.so); $OUT gets modsw.json and bench.log.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin modsw "${1:-}"
env PYTHONUNBUFFERED=1 timeout -k 2 100 python3 bench/gpu/bench_prefill.py --lib "$LIB" \
  --set mods --dims 192,256 --rep-ms 40 --out "$OUT/modsw.json" >"$OUT/bench.log" 2>&1
rc=$?
grep -E 'WRONG|error|refused|Traceback' "$OUT/bench.log" | head -8
sed -n '/^cell /,$p' "$OUT/bench.log"
python3 - "$OUT/modsw.json" "$rc" <<'PY'
import json, sys
path, rc = sys.argv[1], sys.argv[2]
try:
    rows = json.load(open(path))
except Exception as ex:
    rows = []
    print(f"bench: no results ({ex})")
ms = {(r["case"], r["variant"].split(",")[0]): r["ms"] for r in rows}
bad = [r["case"] + ": " + r["note"][:60] for r in rows
       if r["variant"].startswith("flashc") and not r.get("ms")]
cells = [f"{m} d {d} S {s}" for d in (192, 256) for s in (2048, 8192)
         for m in ("window", "softcap", "alibi")]
rat = {c: (ms.get((c, "flashc sm80 mods")) or 0) / ms[(c, "flashc sm90 mods")]
       for c in cells if ms.get((c, "flashc sm90 mods"))}
print("sm90 / sm80 per cell: " + ", ".join(f"{c} {r:.2f}" for c, r in rat.items()))
ok = rc == "0" and not bad and len(rat) == 12 and min(rat.values()) >= 1.03
print("DECISION: " + ("SM90_MODS_DEFAULT_MAX_D = 256 (dense; varlen keeps 128): sm90 / sm80 "
                      f"{min(rat.values()):.2f}-{max(rat.values()):.2f}" if ok else
                      f"keep d 192 / 256 mods on sm80 by default (rc {rc}, {len(rat)} cells, "
                      f"bad {bad[:3]}, min {min(rat.values()) if rat else 0:.2f})"))
PY
exit $rc
