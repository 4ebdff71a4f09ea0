#!/usr/bin/env bash
# bench/gpu/stage.sh DEST — prepares DEST for a GPU machine that has nvcc, CMake and PyTorch but
# no cmocka and no network (the lent H200 image): the source tree as git tracks it (with
# uncommitted edits, without build outputs) plus cmocka's header, library and a relocatable
# pkg-config file under DEST/.deps, taken from this machine. There, run
#   FLASHC_DEPS=$PWD/.deps bench/gpu/run.sh
# and run.sh builds with them. DEST is emptied first.
set -euo pipefail
dest=${1:?usage: bench/gpu/stage.sh DEST}
cd "$(dirname "$0")/../.."
rm -rf "$dest"
mkdir -p "$dest/.deps/include" "$dest/.deps/lib/pkgconfig"
git ls-files -z | xargs -0 tar -c | tar -x -C "$dest"

# Debian's cmocka.pc names no includedir/libdir variables: read them off -I and -L.
incdir=$(PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 pkg-config --cflags-only-I cmocka | sed -n 's/^ *-I\([^ ]*\).*/\1/p')
libdir=$(PKG_CONFIG_ALLOW_SYSTEM_LIBS=1 pkg-config --libs-only-L cmocka | sed -n 's/^ *-L\([^ ]*\).*/\1/p')
cp -L "${incdir:-/usr/include}/cmocka.h" "$dest/.deps/include/"
cp -L "${libdir:-/usr/lib}/libcmocka.so.0" "$dest/.deps/lib/"
ln -sf libcmocka.so.0 "$dest/.deps/lib/libcmocka.so"
cat >"$dest/.deps/lib/pkgconfig/cmocka.pc" <<EOF
prefix=\${pcfiledir}/../..
Name: cmocka
Description: cmocka, staged for a machine without it
Version: $(pkg-config --modversion cmocka)
Libs: -L\${prefix}/lib -lcmocka
Cflags: -I\${prefix}/include
EOF
du -sh "$dest"

# FLASHC_STAGE_ONEDNN=1: oneDNN (Debian's libdnnl, 38 MB) for `flashc bench --ceiling`'s bf16
# gemm row on the GPU host's CPU (the image has none; the bench dlopen's it through
# LD_LIBRARY_PATH, which run.sh / final_check.sh point at .deps/lib).
if [ "${FLASHC_STAGE_ONEDNN:-0}" = 1 ]; then
  for lib in libdnnl.so.3 libdnnl.so.2 libOpenCL.so.1; do
    f=$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')
    [ -n "$f" ] && cp -L "$f" "$dest/.deps/lib/$lib"
  done
  du -sh "$dest"
fi
