/* runtime.c — thread count, dtype helpers, build information. */
#include "internal.h"
#include "kernels.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* 0: OpenMP's default. Atomic: any thread may set it while others run calls that read it (a
 * relaxed load suffices: a call takes whichever value it sees, nothing else is published). */
static _Atomic int default_threads;

void flashc_set_num_threads(int n)
{
    n = n > FLASHC_MAX_THREADS ? FLASHC_MAX_THREADS : n;
    atomic_store_explicit(&default_threads, n > 0 ? n : 0, memory_order_relaxed);
}

int flashc_get_num_threads(void)
{
    const int n = atomic_load_explicit(&default_threads, memory_order_relaxed);
    if (n > 0)
        return n;
#ifdef _OPENMP
    const int m = omp_get_max_threads(); /* OMP_NUM_THREADS may say anything */
    return m > FLASHC_MAX_THREADS ? FLASHC_MAX_THREADS : m;
#else
    return 1;
#endif
}

int flashc__threads(int requested) { return requested > 0 ? requested : flashc_get_num_threads(); }

size_t flashc_dtype_size(flashc_dtype dtype)
{
    switch (dtype) {
    case FLASHC_F32: return 4;
    case FLASHC_F16: return 2;
    case FLASHC_BF16: return 2;
    case FLASHC_I32: return 4;
    default: return 0;
    }
}

const char *flashc__dtype_name(flashc_dtype dtype)
{
    static _Thread_local char other[24];
    switch (dtype) {
    case FLASHC_F32: return "float32";
    case FLASHC_F16: return "float16";
    case FLASHC_BF16: return "bfloat16";
    case FLASHC_I32: return "int32";
    default: snprintf(other, sizeof other, "dtype(%d)", (int)dtype); return other;
    }
}

int flashc_cuda_available(void)
{
#ifdef FLASHC_HAVE_CUDA
    return cuda_device_available();
#else
    return 0;
#endif
}

const char *flashc_version(void) { return FLASHC_VERSION_STRING; }

/* Written once, then only read: safe to hand to any number of threads (a buffer formatted on
 * every call was a data race between two callers). */
static char build_info[512];
static pthread_once_t build_info_once = PTHREAD_ONCE_INIT;

static void format_build_info(void)
{
    char *info = build_info;
    const char *name = cpu_kernels_get()->name; /* first: the choice probes AMX */
    const char *note = cpu_kernels_note();      /* a refused unit, e.g. AMX without permission */
    snprintf(info, sizeof build_info, "%s (cpu: %s%s%s%s; cuda: %s)", FLASHC_VERSION_STRING, name,
             note[0] ? ", " : "", note,
#ifdef _OPENMP
             ", openmp",
#else
             "",
#endif
#ifdef FLASHC_HAVE_CUDA
             cuda_build_info()
#else
             "not built"
#endif
    );
}

const char *flashc_build_info(void)
{
    pthread_once(&build_info_once, format_build_info);
    return build_info;
}

/* IEEE binary16 <-> binary32, round to nearest even, with subnormals, inf and NaN. */
float flashc__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    union { uint32_t u; float f; } c = {bits};
    return c.f;
}

uint16_t flashc__f32_to_f16(float f)
{
    union { float f; uint32_t u; } c = {f};
    uint32_t u = c.u;
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return sign | 0x7e00u;
    if (a >= 0x477ff000u) /* rounds to >= 65520: inf */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) { /* normal half */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u) - (112u << 23);
        return sign | (uint16_t)(r >> 13);
    }
    if (a < 0x33000000u) /* below half the smallest subnormal */
        return sign;
    /* subnormal half: shift the full mantissa, round to nearest even */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t q = m >> shift;
    uint32_t rem = m & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return sign | (uint16_t)q;
}
