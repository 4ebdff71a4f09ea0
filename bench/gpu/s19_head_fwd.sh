#!/usr/bin/env bash
# bench/gpu/s19_head_fwd.sh BUILD_DIR — issue 11's headline cells on the forward defaults as they
# stand after 2026-12-06 (HGEVEN and SKIPDEAD on, sm90h2 at d 192), on whatever card the call
# got, against SDPA cuDNN and FA2 in the same process. Budget 150 s (hard timeouts 70 + 75 s):
#  1. bench_fwd11.py --set np --rounds 2: d 128 at 1k..16k, d 64 at 1k / 2k / 4k / 16k, causal
#     and not (B*S = 16k, H = 2048 // d);
#  2. bench_fwd11.py --set wide --rounds 2: d 256 and 192 at 1k..16k, causal and not.
# Every flashc call is checked against SDPA flash first (WRONG if not). $OUT: np.json, wide.json,
# np.log, wide.log; the two tables LAST (flush / CUPTI kernel TFLOP/s and x cuDNN per cell).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
. bench/gpu/s_common.sh
s_begin head_fwd "${1:-}"
PY=(env FLASHC_LIBRARY="$LIB" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1)
rc_all=0
for s in np:70 wide:75; do
  n=${s%:*} lim=${s#*:}
  "${PY[@]}" timeout -k 2 "$lim" python3 bench/gpu/bench_fwd11.py --lib "$LIB" --set "$n" \
    --rounds 2 --out "$OUT/$n.json" >"$OUT/$n.log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && rc_all=1 && echo "s19_head_fwd: --set $n rc $rc$([ $rc = 124 ] && echo ' (timed out)')"
done
for n in np wide; do
  echo "== --set $n"
  grep -E 'WRONG|Traceback|Error' "$OUT/$n.log" | head -5
  # every cell's flashc row (its TFLOP/s and x cuDNN; cuDNN's and FA2's own rows are in the log)
  grep -E '^\| d \|' "$OUT/$n.log" | tail -1
  grep -E '^\| [0-9]+ \| [0-9]+ \| [01] \| flashc \|' "$OUT/$n.log"
done
exit $rc_all
