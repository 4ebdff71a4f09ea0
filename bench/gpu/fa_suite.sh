#!/usr/bin/env bash
# bench/gpu/fa_suite.sh BUILD_DIR — flash-attention's own test file (tests/test_flash_attn.py of
# its source distribution) run against flashc's Python binding on the GPU: how much of the peer's
# suite flashc passes, and why the rest fails. Nothing of the peer's is kept in this tree: the
# caller gives its unpacked sdist (FA_SDIST, a folder with tests/ and flash_attn/; e.g. pip
# download --no-deps --no-binary :all: flash-attn, then tar xzf), and this script assembles, in
# $OUT/fa (or BUILD_DIR/fa_suite), a package `flash_attn` whose attention entry points are
# flashc's (fa_suite/flash_attn_shim.py) beside the peer's own pure-Python helpers that the test
# file's references use (bert_padding, layers/rotary + its triton kernel), with
# fa_suite/conftest.py beside the test file.
# FA_SAMPLE=N (default 100) runs one case in N of each test function, a fixed choice (a hash of
# the case's id); FA_NODROPOUT=1 (default) leaves out the dropout_p > 0 cases (flashc serves no
# dropout: they would fail on its refusal); FA_K: a pytest -k expression; FA_LIMIT (default 240):
# seconds for pytest. einops comes from FLASHC_WHEELS when the image lacks it.
# Output: $OUT/fa_cases.jsonl (one line per case) and the summary table, printed last.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
B=${1:?usage: fa_suite.sh BUILD_DIR}
B=$(cd "$B" && pwd)
SD=${FA_SDIST:?FA_SDIST: an unpacked flash-attn source distribution}
[ -f "$SD/tests/test_flash_attn.py" ] || { echo "fa_suite: no tests/test_flash_attn.py in $SD"; exit 2; }
O=${OUT:-$B} SAMPLE=${FA_SAMPLE:-100}
W=$O/fa
rm -rf "$W" && mkdir -p "$W/pkg/flash_attn/layers" "$W/pkg/flash_attn/ops/triton" "$W/tests" || exit 2
cp bench/gpu/fa_suite/flash_attn_shim.py "$W/pkg/flash_attn/__init__.py"
cp bench/gpu/fa_suite/flash_attn_interface_shim.py "$W/pkg/flash_attn/flash_attn_interface.py"
cp "$SD/flash_attn/bert_padding.py" "$W/pkg/flash_attn/"
cp "$SD/flash_attn/layers/rotary.py" "$W/pkg/flash_attn/layers/"
cp "$SD/flash_attn/ops/triton/rotary.py" "$W/pkg/flash_attn/ops/triton/"
touch "$W/pkg/flash_attn/layers/__init__.py" "$W/pkg/flash_attn/ops/__init__.py" \
  "$W/pkg/flash_attn/ops/triton/__init__.py"
cp "$SD/tests/test_flash_attn.py" bench/gpu/fa_suite/conftest.py "$W/tests/"
PP="$W/pkg:$PWD/python"
need=() # what the image lacks, from FLASHC_WHEELS into $W/lib
for m in einops pytest; do python3 -c "import $m" 2>/dev/null || need+=("$m"); done
if [ ${#need[@]} -gt 0 ]; then
  python3 -m pip install -q --no-index --find-links "${FLASHC_WHEELS:-/nonexistent}" --target "$W/lib" \
    "${need[@]}" >/dev/null 2>&1 || { echo "fa_suite: ${need[*]} missing (FLASHC_WHEELS)"; exit 2; }
  PP="$PP:$W/lib"
fi
LOG=$O/fa_cases.jsonl
rm -f "$LOG"
t0=$SECONDS
env FLASHC_LIBRARY="$B/libflashc.so" PYTHONPATH="$PP" FA_LOG="$LOG" FA_SAMPLE="$SAMPLE" \
  FA_NODROPOUT="${FA_NODROPOUT:-1}" PYTHONUNBUFFERED=1 \
  timeout -k 5 "${FA_LIMIT:-240}" python3 -m pytest "$W/tests/test_flash_attn.py" -q -p no:cacheprovider \
  --tb=short -rN ${FA_K:+-k "$FA_K"} >"$O/fa_pytest.log" 2>&1
rc=$?
echo "fa_suite: pytest rc $rc$([ $rc = 124 ] && echo ' (cut by FA_LIMIT)'), $((SECONDS - t0)) s, sample 1/$SAMPLE, dropout cases $([ "${FA_NODROPOUT:-1}" = 1 ] && echo 'left out' || echo 'run')"
tail -3 "$O/fa_pytest.log"
python3 bench/gpu/fa_suite/summarize.py "$LOG"
