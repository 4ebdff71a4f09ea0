/* kernels/avx512.c — the SIMD kernels (kernels_simd.h) compiled for AVX-512 F/BW/VL/BF16 + FMA
 * + F16C (bf16 stores use vcvtneps2bf16). Flags: src/cpu/kernels/isa.cmake. Chosen at run time by
 * dispatch.c only on CPUs that report all of these features. */
#if defined(__x86_64__)
#define SIMD_TABLE cpu_kernels_avx512
#define SIMD_NAME "avx512"
#include "kernels_simd.h"
#endif
