/* kernels/avx512.c — the SIMD kernels (kernels_simd.h) compiled for AVX-512 F/BW/VL/BF16 + FMA
 * + F16C (bf16 stores use vcvtneps2bf16). Flags: src/cpu/kernels/isa.cmake. Chosen at run time by
 * dispatch.c only on CPUs that report all of these features. */
#if defined(__x86_64__)
#define SIMD_TABLE cpu_kernels_avx512
#define SIMD_NAME "avx512"
#include "kernels_simd.h"

/* The same kernels plus bf16 matrix products for bfloat16 storage: vdpbf16ps (avx512bf16.c) and
 * AMX tiles (amx.c). dispatch.c offers them only where the CPU (and, for AMX, Linux) allows. */
const cpu_kernels cpu_kernels_avx512bf16 = {
    .name = "avx512bf16",
    .bf16 = &cpu_mm_bf16_avx512,
    SIMD_ENTRIES,
};

const cpu_kernels cpu_kernels_amx = {
    .name = "amx",
    .bf16 = &cpu_mm_bf16_amx,
    SIMD_ENTRIES,
};
#endif
