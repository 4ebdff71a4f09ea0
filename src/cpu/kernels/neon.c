/* kernels/neon.c — the SIMD kernels (kernels_simd.h) compiled for AArch64 NEON (baseline on
 * AArch64, no extra flags). */
#if defined(__aarch64__)
#define SIMD_TABLE cpu_kernels_neon
#define SIMD_NAME "neon"
#include "kernels_simd.h"
#endif
