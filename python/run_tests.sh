#!/usr/bin/env bash
# Runs the Python binding's tests against an already built libflashc. Builds nothing.
#
#   FLASHC_LIBRARY=$PWD/build/libflashc.so python/run_tests.sh [pytest args...]
#   FLASHC_LIBRARY=$PWD/build-asan/libflashc.so python/run_tests.sh   # ASan+UBSan build: preloaded
#
# The library: $FLASHC_LIBRARY if set, else <repo>/build/libflashc.so (the package's own lookup).
# The interpreter: a venv at $FLASHC_VENV (default <repo>/build/pyvenv), created with
# --system-site-packages so a system torch (the GPU machine's) is used by the torch tests;
# numpy, pytest and ml_dtypes (numpy bfloat16) are installed from PyPI into it when missing. Exits non-zero on any failure,
# including "no tests collected" (pytest's status 5), which means the tests went missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(dirname "$here")"

lib="${FLASHC_LIBRARY:-$repo/build/libflashc.so}"
if [ ! -f "$lib" ]; then
    echo "run_tests.sh: no libflashc at $lib; build it first (cmake -S . -B build && cmake --build build) or set FLASHC_LIBRARY" >&2
    exit 1
fi
export FLASHC_LIBRARY="$lib"

venv="${FLASHC_VENV:-$repo/build/pyvenv}"
py=python3
[ -n "${PYTHON:-}" ] && py="$PYTHON"
if [ ! -x "$venv/bin/python" ]; then
    "$py" -m venv --system-site-packages "$venv"
fi
# a no-op (no network) when the venv or the system already satisfies these
"$venv/bin/python" -m pip install -q --disable-pip-version-check "numpy>=1.22" "pytest>=7" "ml_dtypes>=0.3"

# A sanitizer build of the library (cmake -DFLASHC_SANITIZE=ON) can only be loaded into Python
# with its runtimes preloaded; Python's own allocations are not leaks of ours.
preload=$(ldd "$lib" 2>/dev/null | awk '/lib(asan|ubsan)\.so/ {print $3}' | paste -sd: -)
if [ -n "$preload" ]; then
    echo "run_tests.sh: $lib is a sanitizer build; preloading $preload"
    export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}"
    export LD_PRELOAD="$preload${LD_PRELOAD:+:$LD_PRELOAD}"
fi

cd "$repo"
set +e
"$venv/bin/python" -m pytest "$here/tests" -rs "$@"
status=$?
set -e
if [ "$status" -eq 5 ]; then
    echo "run_tests.sh: pytest collected no tests under $here/tests" >&2
    exit 1
fi
exit "$status"
