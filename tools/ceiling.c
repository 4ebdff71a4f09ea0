/* ceiling.c — sgemm and stream-copy ceilings for `flashc bench --ceiling` (see ceiling.h). */
#define _POSIX_C_SOURCE 200809L /* unsetenv, clock_gettime */
#include "ceiling.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median and fastest of times[0..n), n >= 1 (sorts times). */
static void summarize(double *times, int n, ceiling_result *r)
{
    qsort(times, (size_t)n, sizeof(double), cmp_double);
    r->reps = n;
    r->ms = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    r->ms_min = times[0];
}

enum { MAX_REPS = 64 };

/* The CBLAS entry point: cblas_sgemm(order, transA, transB, M, N, K, alpha, A, lda, B, ldb,
 * beta, C, ldc) with CblasRowMajor = 101, CblasNoTrans = 111. */
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);

int ceiling_sgemm(int threads, int64_t n, int reps, ceiling_result *r)
{
    memset(r, 0, sizeof *r);
    r->gbps = -1.0;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
    const char *name = getenv("FLASHC_OPENBLAS");
    if (!name || !*name)
        name = "libopenblas.so.0";
    void *lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(r->error, sizeof r->error,
                 "OpenBLAS not found (%s); install libopenblas0 (Debian) for the sgemm ceiling",
                 dlerror());
        return -1;
    }
    const sgemm_fn sgemm = (sgemm_fn)dlsym(lib, "cblas_sgemm");
    void (*set_threads)(int) = (void (*)(int))dlsym(lib, "openblas_set_num_threads");
    char *(*config)(void) = (char *(*)(void))dlsym(lib, "openblas_get_config");
    char *(*corename)(void) = (char *(*)(void))dlsym(lib, "openblas_get_corename");
    if (!sgemm || !set_threads) {
        snprintf(r->error, sizeof r->error, "libopenblas.so.0 lacks cblas_sgemm/openblas_set_num_threads");
        dlclose(lib);
        return -1;
    }
    if (threads > 0)
        set_threads(threads);
    const size_t elems = (size_t)n * (size_t)n;
    float *a = malloc(elems * sizeof(float)), *b = malloc(elems * sizeof(float));
    float *c = malloc(elems * sizeof(float));
    if (!a || !b || !c) {
        snprintf(r->error, sizeof r->error, "out of memory for three %lld^2 matrices", (long long)n);
        free(a), free(b), free(c);
        dlclose(lib);
        return -1;
    }
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < elems; i++) {
        s = s * 6364136223846793005u + 1442695040888963407u;
        a[i] = (float)(s >> 40) * (1.0f / 16777216.0f);
        b[i] = (float)((s >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    }
    double times[MAX_REPS];
    const int ni = (int)n;
    for (int i = -1; i < reps; i++) { /* i = -1: warm-up (thread pool, page faults) */
        const double t0 = now_ms();
        sgemm(101, 111, 111, ni, ni, ni, 1.0f, a, ni, b, ni, 0.0f, c, ni);
        if (i >= 0)
            times[i] = now_ms() - t0;
    }
    summarize(times, reps, r);
    r->gflops = 2.0 * (double)n * (double)n * (double)n / (r->ms * 1e-3) * 1e-9;
    snprintf(r->detail, sizeof r->detail, "%s; core %s; %d threads",
             config ? config() : "OpenBLAS", corename ? corename() : "?", threads);
    free(a), free(b), free(c);
    dlclose(lib);
    return 0;
}

/* oneDNN's row-major gemm on bf16 operands with a float32 C:
 *   dnnl_gemm_bf16bf16f32(transa, transb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc). */
typedef int (*gemm_bf16_fn)(char, char, int64_t, int64_t, int64_t, float, const uint16_t *,
                            int64_t, const uint16_t *, int64_t, float, float *, int64_t);
typedef struct dnnl_version_t {
    int major, minor, patch;
    const char *hash;
    unsigned cpu_runtime, gpu_runtime;
} dnnl_version_t;

int ceiling_gemm_bf16(int threads, int64_t n, int reps, ceiling_result *r)
{
    memset(r, 0, sizeof *r);
    r->gbps = -1.0;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    const char *env = getenv("FLASHC_ONEDNN");
    const char *names[3] = {env && *env ? env : "libdnnl.so.3", env && *env ? NULL : "libdnnl.so.2",
                            NULL};
    void *lib = NULL;
    for (int i = 0; names[i] && !lib; i++)
        lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(r->error, sizeof r->error,
                 "oneDNN not found (%s); install libdnnl3 or libdnnl2 (Debian) for the bf16 "
                 "gemm ceiling",
                 dlerror());
        return -1;
    }
    const gemm_bf16_fn gemm = (gemm_bf16_fn)dlsym(lib, "dnnl_gemm_bf16bf16f32");
    const dnnl_version_t *(*version)(void) =
        (const dnnl_version_t *(*)(void))dlsym(lib, "dnnl_version");
    if (!gemm) {
        snprintf(r->error, sizeof r->error, "oneDNN lacks dnnl_gemm_bf16bf16f32");
        dlclose(lib);
        return -1;
    }
#ifdef _OPENMP
    if (threads > 0) /* Debian's oneDNN runs on OpenMP: this process's libgomp pool */
        omp_set_num_threads(threads);
#endif
    const size_t elems = (size_t)n * (size_t)n;
    uint16_t *a = malloc(elems * 2), *b = malloc(elems * 2);
    float *c = malloc(elems * sizeof(float));
    if (!a || !b || !c) {
        snprintf(r->error, sizeof r->error, "out of memory for three %lld^2 matrices", (long long)n);
        free(a), free(b), free(c);
        dlclose(lib);
        return -1;
    }
    uint64_t s = 0x9e3779b97f4a7c15u;
    for (size_t i = 0; i < elems; i++) { /* bf16 of uniform [0, 1): the high half of a float */
        s = s * 6364136223846793005u + 1442695040888963407u;
        const float x = (float)(s >> 40) * (1.0f / 16777216.0f);
        const float y = (float)((s >> 16) & 0xffffff) * (1.0f / 16777216.0f);
        uint32_t ux, uy;
        memcpy(&ux, &x, 4), memcpy(&uy, &y, 4);
        a[i] = (uint16_t)(ux >> 16), b[i] = (uint16_t)(uy >> 16);
    }
    double times[MAX_REPS];
    for (int i = -1; i < reps; i++) { /* i = -1: warm-up (JIT, thread pool, page faults) */
        const double t0 = now_ms();
        const int st = gemm('N', 'N', n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        if (st != 0) {
            snprintf(r->error, sizeof r->error, "dnnl_gemm_bf16bf16f32 returned status %d%s", st,
                     st == 3 ? " (unimplemented: this oneDNN has no bf16 gemm for this CPU, "
                               "which needs AVX-512)"
                             : "");
            free(a), free(b), free(c);
            dlclose(lib);
            return -1;
        }
        if (i >= 0)
            times[i] = now_ms() - t0;
    }
    summarize(times, reps, r);
    r->gflops = 2.0 * (double)n * (double)n * (double)n / (r->ms * 1e-3) * 1e-9;
    const dnnl_version_t *v = version ? version() : NULL;
    snprintf(r->detail, sizeof r->detail, "oneDNN %d.%d.%d bf16 x bf16 -> f32; %d threads",
             v ? v->major : 0, v ? v->minor : 0, v ? v->patch : 0, threads);
    free(a), free(b), free(c);
    dlclose(lib);
    return 0;
}

int ceiling_copy(int threads, int64_t bytes, int reps, ceiling_result *r)
{
    memset(r, 0, sizeof *r);
    r->gflops = -1.0;
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    enum { BLOCK = 1 << 20 };
    const int64_t blocks = bytes / BLOCK > 0 ? bytes / BLOCK : 1;
    char *src = malloc((size_t)(blocks * BLOCK)), *dst = malloc((size_t)(blocks * BLOCK));
    if (!src || !dst) {
        snprintf(r->error, sizeof r->error, "out of memory for 2 x %lld bytes",
                 (long long)(blocks * BLOCK));
        free(src), free(dst);
        return -1;
    }
    if (threads <= 0) {
#ifdef _OPENMP
        threads = omp_get_max_threads();
#else
        threads = 1;
#endif
    }
    /* first touch by the threads that copy, as the timed loop splits it */
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < blocks; i++) {
        memset(src + i * BLOCK, (int)(i & 0x7f) + 1, BLOCK);
        memset(dst + i * BLOCK, 0, BLOCK);
    }
    double times[MAX_REPS];
    for (int k = -1; k < reps; k++) {
        const double t0 = now_ms();
#pragma omp parallel for schedule(static) num_threads(threads)
        for (int64_t i = 0; i < blocks; i++)
            memcpy(dst + i * BLOCK, src + i * BLOCK, BLOCK);
        if (k >= 0)
            times[k] = now_ms() - t0;
    }
    if (memcmp(dst, src, BLOCK) != 0) { /* the copy happened */
        snprintf(r->error, sizeof r->error, "copy check failed");
        free(src), free(dst);
        return -1;
    }
    summarize(times, reps, r);
    r->gbps = 2.0 * (double)(blocks * BLOCK) / (r->ms * 1e-3) * 1e-9;
    snprintf(r->detail, sizeof r->detail, "memcpy 1 MiB blocks, %lld MiB, %d threads",
             (long long)(blocks * BLOCK >> 20), threads);
    free(src), free(dst);
    return 0;
}
