/*
 * cuda_common.h — what the CUDA test programs (tests/test_cuda_*.c) share: the CUDA call check,
 * FLASHC_TEST_SMALL (the short cases compute-sanitizer runs), 16-bit storage round trips, and
 * device buffers. Include it after common.h, inside the program's #ifdef FLASHC_HAVE_CUDA.
 */
#ifndef FLASHC_TESTS_CUDA_COMMON_H
#define FLASHC_TESTS_CUDA_COMMON_H

#include "internal.h" /* bf16 / fp16 conversions */

#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A failed CUDA runtime call fails the test with the runtime's message. */
#define CUDA_OK(call)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            fail_msg("%s failed: %s", #call, cudaGetErrorString(e_));                              \
    } while (0)

/* A variable's value saved (strdup'ed; NULL: unset) and put back by env_restore (which frees
 * it): a device script may force a kernel variable on every test, and a test that sets its own
 * hands the script's value back. */
static inline char *env_save(const char *name)
{
    const char *e = getenv(name);
    return e ? strdup(e) : NULL;
}
static inline void env_restore(const char *name, char *was)
{
    if (was)
        setenv(name, was, 1);
    else
        unsetenv(name);
    free(was);
}

/* FLASHC_TEST_SMALL=1: only the short cases (compute-sanitizer runs them). */
static inline int small_only(void)
{
    const char *s = getenv("FLASHC_TEST_SMALL");
    return s && s[0] == '1';
}

/* A float rounded to the storage dtype (bf16 or fp16) and back. */
static inline float rnd(flashc_dtype dt, float x)
{
    return dt == FLASHC_BF16 ? flashc__bf16_to_f32(flashc__f32_to_bf16(x))
                             : flashc__f16_to_f32(flashc__f32_to_f16(x));
}
static inline uint16_t to_bits(flashc_dtype dt, float x)
{
    return dt == FLASHC_BF16 ? flashc__f32_to_bf16(x) : flashc__f32_to_f16(x);
}
static inline float from_bits(flashc_dtype dt, uint16_t h)
{
    return dt == FLASHC_BF16 ? flashc__bf16_to_f32(h) : flashc__f16_to_f32(h);
}
/* One unit in the last place of the storage dtype at |x| (bf16: 8 significant bits, fp16: 11,
 * its subnormal step 2^-24 the floor): what two roundings of nearly equal values may differ by. */
static inline double ulp_of(flashc_dtype dt, double x)
{
    int e = 0;
    frexp(fabs(x), &e);
    const double u = ldexp(1.0, e - (dt == FLASHC_BF16 ? 8 : 11));
    return dt == FLASHC_BF16 || u > 0x1.0p-24 ? u : 0x1.0p-24;
}
static inline const char *dtname(flashc_dtype dt) { return dt == FLASHC_BF16 ? "bf16" : "fp16"; }

/* Device memory (16 bytes for an empty request, so that every tensor has an address). */
static inline void *dalloc(size_t bytes)
{
    void *p = NULL;
    CUDA_OK(cudaMalloc(&p, bytes ? bytes : 16));
    return p;
}
static inline void *dupload(const void *h, size_t bytes)
{
    void *p = dalloc(bytes);
    CUDA_OK(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    return p;
}
/* The descriptor t, marked as CUDA device memory. */
static inline flashc_tensor dev(flashc_tensor t)
{
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

#endif /* FLASHC_TESTS_CUDA_COMMON_H */
