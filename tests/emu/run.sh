#!/bin/sh
# tests/emu/run.sh [BUILD] — compiles src/cpu/kernels/amx.c and avx512bf16.c against the
# intrinsic models of tests/emu/immintrin.h (ASan + UBSan) and runs tests/emu/emu_test.c, then
# tests/test_attn_v2.c and test_attn_bwd_v2.c on each emulated unit (emu_v2.c), on any x86-64
# (no AVX-512 or AMX needed). BUILD: a configured build with libflashc.a (default build).
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
out=$build/emu_test
# what libflashc.a itself needs (a CUDA build adds the static CUDA runtime and libstdc++): the
# build's generated flashc.pc says
private=$(sed -n 's/^Libs.private: *//p' "$build/flashc.pc" 2>/dev/null || true)
ren="-Dcpu_mm_bf16_amx=emu_mm_amx -Dcpu_mm_bf16_avx512=emu_mm_avx512 \
-Dcpu_mm_avx512_pack_b=emu_pack_b -Dcpu_mm_avx512_pack_bt=emu_pack_bt \
-Dcpu_mm_avx512_split=emu_split -Dcpu_mm_avx512_split_cvt=emu_split_cvt \
-Dcpu_mm_avx512_pack_at=emu_pack_at -Dcpu_mm_avx512_transpose=emu_transpose \
-Dcpu_mm_avx512_p_ds_split=emu_p_ds_split \
-Dcpu_kernels_avx512_mm_softmax=cpu_kernels_avx2_mm_softmax \
-Dcpu_kernels_avx512_mm_p_ds=cpu_kernels_avx2_mm_p_ds"
# shellcheck disable=SC2086
${CC:-gcc} -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fopenmp \
  -Wall -Wextra -Wno-unused-parameter -Wno-psabi \
  -I"$root/tests/emu" -I"$root/include" -I"$build/include" -I"$root/src/core" -I"$root/src/cpu/kernels" -I"$root/tests" $ren \
  "$root/src/cpu/kernels/amx.c" "$root/src/cpu/kernels/avx512bf16.c" "$root/tests/emu/emu_test.c" \
  "$build/tests/libflashc_testutil.a" "$build/libflashc.a" $(pkg-config --cflags --libs cmocka) \
  $private -lm -o "$out"
OMP_NUM_THREADS=2 "$out"
# test_attn_v2 and test_attn_bwd_v2 through the emulated units (emu_v2.c): every layout and
# modifier of the forward's and the backward's bf16 paths on the units' code
for t in attn_v2 attn_bwd_v2; do
  # shellcheck disable=SC2086
  ${CC:-gcc} -std=c11 -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fopenmp \
    -Wall -Wextra -Wno-unused-parameter -Wno-psabi -DEMU_TEST="\"../test_$t.c\"" \
    -I"$root/tests/emu" -I"$root/include" -I"$build/include" -I"$root/src/core" -I"$root/src/cpu/kernels" -I"$root/tests" $ren \
    "$root/src/cpu/kernels/amx.c" "$root/src/cpu/kernels/avx512bf16.c" "$root/tests/emu/emu_v2.c" \
    "$build/tests/libflashc_testutil.a" "$build/libflashc.a" $(pkg-config --cflags --libs cmocka) \
    $private -lm -o "$out.$t"
  # the backward on the units' own schedule (attn_bwd.c mm_*, opt-in: FLASHC_CPU_BWD_MM=1)
  mm=; [ $t = attn_bwd_v2 ] && mm=1
  FLASHC_CPU_BWD_MM=$mm OMP_NUM_THREADS=2 "$out.$t" amx
  # the forward's fused AMX tile (amx.c fwd_tile) with both products between the softmax rows
  [ $t = attn_v2 ] && FLASHC_CPU_AMX_FWD=3 OMP_NUM_THREADS=2 "$out.$t" amx
  FLASHC_CPU_BWD_MM=$mm OMP_NUM_THREADS=2 "$out.$t" avx512bf16
done
