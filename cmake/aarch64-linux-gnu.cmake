# Cross build for AArch64 (the NEON kernel table) with Debian's cross gcc, its tests run under
# qemu-user: scripts/test.sh's "neon" step, or
#   cmake -S . -B build-neon -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DFLASHC_CUDA=OFF
#   ctest --test-dir build-neon
# Packages: gcc-aarch64-linux-gnu, qemu-user, libcmocka-dev:arm64 and libgomp1:arm64
# (dpkg --add-architecture arm64);
# scripts/deps.sh installs them.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
# The tests run on Debian's multiarch AArch64 runtime (libc6:arm64, libgomp1:arm64,
# libcmocka0:arm64 in /lib/aarch64-linux-gnu and /usr/lib/aarch64-linux-gnu), found by
# qemu-aarch64 through the binaries' own /lib/ld-linux-aarch64.so.1. Not "-L /usr/aarch64-linux-gnu":
# under qemu 7.2 the cross toolchain's libc (2.36-8cross1) hangs in every program that creates
# a thread, OpenMP included; the multiarch libc (2.36-9+deb12u*) does not.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig)
set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
