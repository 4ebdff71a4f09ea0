/* kernels/avx2.c — the SIMD kernels (kernels_simd.h) compiled for AVX2 + FMA + F16C.
 * Flags: src/cpu/kernels/isa.cmake. Chosen at run time by dispatch.c. */
#if defined(__x86_64__)
#define SIMD_TABLE cpu_kernels_avx2
#define SIMD_NAME "avx2"
#include "kernels_simd.h"
#endif
