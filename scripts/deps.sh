#!/usr/bin/env bash
# Installs what flashc needs to build, test and benchmark, from Debian's packages.
# Idempotent: installs nothing when everything is present. Needs root (or sudo) only then.
set -euo pipefail

need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
for pkg in cmake make gcc pkg-config libcmocka-dev libopenblas0 python3 python3-venv python3-pip \
           clang libomp-dev qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross libcmocka-dev:arm64 \
           libgomp1:arm64; do
    have_pkg "$pkg" || need+=("$pkg")
done
# oneDNN (bf16 gemm) for the bench's --ceiling row as well: libdnnl3 on Debian 13, libdnnl2 on 12.
if ! have_pkg libdnnl3 && ! have_pkg libdnnl2; then
    if apt-cache show libdnnl3 >/dev/null 2>&1; then need+=(libdnnl3); else need+=(libdnnl2); fi
fi
# NCCL (context parallelism's transport, src/cp/cp_nccl.cu): only its header is needed to build,
# the library is opened at run time. The CUDA toolkit ships it (include/nccl.h, lib/libnccl.so.2);
# where a toolkit lacks it, Debian's libnccl-dev (contrib/non-free) when the sources offer it.
# Without either the build simply has no NCCL transport (CI: no CUDA, nothing to do).
if command -v nvcc >/dev/null 2>&1; then
    cuda_inc="$(dirname "$(dirname "$(command -v nvcc)")")/include"
    if [ ! -f "$cuda_inc/nccl.h" ] && [ ! -f /usr/include/nccl.h ] && ! have_pkg libnccl-dev &&
       apt-cache show libnccl-dev >/dev/null 2>&1; then
        need+=(libnccl-dev)
    fi
fi
# OpenMP comes with gcc (libgomp); cmocka is the test framework; OpenBLAS and oneDNN only for the
# bench's --ceiling rows (dlopen'ed at run time); python3-venv for the binding's tests. clang (with
# its libomp) builds the libFuzzer targets and the ThreadSanitizer build; qemu-user, the aarch64
# cross gcc (with its libc6-dev-arm64-cross: crt files and headers, only a Recommends of the
# compiler) and the arm64 multiarch cmocka and libgomp build and run the NEON suite.
if [ ${#need[@]} -eq 0 ]; then
    exit 0
fi
echo "deps.sh: installing ${need[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
case " ${need[*]} " in
*":arm64 "*)
    dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64 ;;
esac
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
