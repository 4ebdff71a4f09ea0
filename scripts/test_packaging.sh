#!/usr/bin/env bash
# The packages as a user gets them (issue 15), from a configured and built build folder:
#   1. cmake --install to a fresh prefix;
#   2. examples/c built against that prefix through find_package (shared and static library)
#      and through pkg-config, and run with the CUDA runtime hidden from the loader (no
#      LD_LIBRARY_PATH but the prefix, no /etc/ld.so.cache: only the system's own directories);
#      when the build has the CUDA backend, that is the check that a CUDA-enabled libflashc
#      loads and runs its CPU paths on a host without CUDA;
#   3. flashc configured as a FetchContent subproject (tests/subproject): nothing leaks into the
#      parent, no tests or tools, no cmocka lookup, BUILD_SHARED_LIBS honoured;
#   4. pip install ./python into a fresh venv (no FLASHC_LIBRARY; CPU-only: FLASHC_CUDA=OFF,
#      to keep CI short), then python -m flashc and examples/python/example.py from outside the
#      tree, on the library the package bundles.
#
#   scripts/test_packaging.sh [build-dir]      (default: build; scripts/test.sh runs it)
#
# Needs network for pip (scikit-build-core and numpy from PyPI). Work files go to
# <build-dir>/packaging. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=$(cd "${1:-build}" && pwd)
work=$build/packaging
rm -rf "$work"
mkdir -p "$work"
t0=$(date +%s)
step() { echo "-- packaging: $* ($(($(date +%s) - t0)) s)"; }

# Runs a program the way a host without the CUDA toolkit would: no ld.so.cache (which lists
# libcudart on a machine with the toolkit), only the given library path.
ldso=$(readelf -l /bin/sh | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
hidden() {
    local libpath=$1
    shift
    env -u LD_LIBRARY_PATH -u LD_PRELOAD "$ldso" --inhibit-cache --library-path "$libpath" "$@"
}

step "cmake --install $build -> $work/prefix"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/flashc.h include/flashc_version.h lib/libflashc.a lib/pkgconfig/flashc.pc \
         lib/cmake/flashc/flashcConfig.cmake lib/cmake/flashc/flashcConfigVersion.cmake; do
    [ -f "$prefix/$f" ] || { echo "packaging: $prefix/$f was not installed" >&2; exit 1; }
done
cuda=$(sed -n 's/^set(flashc_HAVE_CUDA \(.*\))$/\1/p' "$prefix/lib/cmake/flashc/flashcConfig.cmake")
lib=$(readlink -f "$prefix/lib/libflashc.so")
python3 tests/check_shared_lib.py exports "$lib" "$prefix/include/flashc.h"
python3 tests/check_shared_lib.py loads "$lib"

step "examples/c through find_package (shared and static)"
cmake -S examples/c -B "$work/example-cmake" -DCMAKE_PREFIX_PATH="$prefix" -DFLASHC_EXAMPLE_STATIC=ON \
      -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/example-cmake" -j2 >/dev/null
if ldd "$work/example-cmake/flashc_example" | grep -q "libcud"; then
    echo "packaging: the example needs a CUDA library:" >&2
    ldd "$work/example-cmake/flashc_example" >&2
    exit 1
fi
hidden /nonexistent "$work/example-cmake/flashc_example"       # libflashc through its RUNPATH
hidden /nonexistent "$work/example-cmake/flashc_example_static" | tail -n 1

step "examples/c through pkg-config"
mkdir -p "$work/example-pc"
(cd "$work/example-pc" && PKG_CONFIG_PATH="$prefix/lib/pkgconfig" make -s -f "$repo/examples/c/Makefile")
hidden "$prefix/lib" "$work/example-pc/flashc_example" | tail -n 1

step "flashc as a subproject (FetchContent): configure only"
for shared in "" "-DBUILD_SHARED_LIBS=OFF"; do
    # shellcheck disable=SC2086
    cmake -S tests/subproject -B "$work/subproject${shared:+-static}" -DFLASHC_CUDA=OFF $shared \
          -DPKG_CONFIG_EXECUTABLE=/nonexistent/pkg-config --no-warn-unused-cli | grep "flashc as a subproject"
done

step "pip install ./python into a fresh venv (FLASHC_CUDA=OFF)"
python3 -m venv "$work/venv"
venv_py=$work/venv/bin/python
(unset FLASHC_LIBRARY; FLASHC_CUDA=OFF "$venv_py" -m pip install -q --disable-pip-version-check ./python)
step "python -m flashc and examples/python/example.py, outside the tree"
(
    unset FLASHC_LIBRARY PYTHONPATH
    cd "$work"
    "$venv_py" -m flashc
    where=$("$venv_py" -c 'import flashc; print(flashc.library_path())')
    case "$where" in
        "$work/venv/"*) ;;
        *) echo "packaging: the installed package loaded $where, not its own library" >&2; exit 1 ;;
    esac
    "$venv_py" "$repo/examples/python/example.py"
)
step "done (C build: CUDA backend $cuda)"
