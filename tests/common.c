/* common.c — see common.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getpid under -std=c11 */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t seed_used, state[4];

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(void) /* xoshiro256** */
{
    uint64_t r = rotl(state[1] * 5, 7) * 9, t = state[1] << 17;
    state[2] ^= state[0], state[3] ^= state[1], state[1] ^= state[2], state[0] ^= state[3];
    state[2] ^= t, state[3] = rotl(state[3], 45);
    return r;
}

void tu_seed_from_env(void)
{
    const char *s = getenv("FLASHC_TEST_SEED");
    if (s && *s)
        seed_used = strtoull(s, NULL, 0);
    else {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        seed_used = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    }
    uint64_t x = seed_used;
    for (int i = 0; i < 4; i++)
        state[i] = splitmix(&x);
    fprintf(stderr, "# FLASHC_TEST_SEED=%llu\n", (unsigned long long)seed_used);
}

uint64_t tu_seed(void) { return seed_used; }

double tu_uniform(void) { return (double)(next_u64() >> 11) * 0x1.0p-53; }

double tu_normal(void)
{
    double u1 = tu_uniform(), u2 = tu_uniform();
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void tu_fill_normal(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)tu_normal() * scale;
}

float *tu_alloc_normal(int64_t n, float scale)
{
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    tu_fill_normal(x, n, scale);
    return x;
}

float *tu_poisoned(int64_t n)
{
    float *x = malloc((size_t)n * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n; i++)
        x[i] = NAN;
    return x;
}

float *tu_copy(const float *x, int64_t n)
{
    float *y = malloc((size_t)n * sizeof *y);
    assert_non_null(y);
    memcpy(y, x, (size_t)n * sizeof *y);
    return y;
}

int tu_has_nan(const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (isnan(x[i]))
            return 1;
    return 0;
}

/* Equal values (infinities included) differ by 0; NaN anywhere gives +inf, so NaN never
 * passes a tolerance check. */
double tu_max_abs_diff(const float *a, const float *b, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if ((double)a[i] == (double)b[i]) /* equal, infinities included */
            continue;
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(d))
            return INFINITY;
        if (d > m)
            m = d;
    }
    return m;
}

double tu_max_abs_diff64(const float *a, const double *b, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if ((double)a[i] == b[i])
            continue;
        double d = fabs((double)a[i] - b[i]);
        if (isnan(d))
            return INFINITY;
        if (d > m)
            m = d;
    }
    return m;
}

void tu_attn_ref64(const float *q, const float *k, const float *v, int64_t B, int64_t Sq,
                   int64_t Sk, int64_t Hq, int64_t Hkv, int64_t D, double scale, int causal,
                   double *o64, double *lse64)
{
    double *s = malloc((size_t)Sk * sizeof *s);
    assert_non_null(s);
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++) {
            int64_t hk = h / (Hq / Hkv);
            for (int64_t i = 0; i < Sq; i++) {
                int64_t kend = causal ? i + 1 + Sk - Sq : Sk;
                if (kend > Sk)
                    kend = Sk;
                double *o = o64 + ((b * Sq + i) * Hq + h) * D;
                double m = -INFINITY, l = 0.0;
                for (int64_t j = 0; j < kend; j++) {
                    double acc = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        acc += (double)q[((b * Sq + i) * Hq + h) * D + d] *
                               (double)k[((b * Sk + j) * Hkv + hk) * D + d];
                    s[j] = acc * scale;
                    if (s[j] > m)
                        m = s[j];
                }
                for (int64_t d = 0; d < D; d++)
                    o[d] = 0.0;
                for (int64_t j = 0; j < kend; j++) {
                    double e = exp(s[j] - m);
                    l += e;
                    for (int64_t d = 0; d < D; d++)
                        o[d] += e * (double)v[((b * Sk + j) * Hkv + hk) * D + d];
                }
                for (int64_t d = 0; d < D; d++)
                    o[d] = l > 0.0 ? o[d] / l : 0.0;
                lse64[(b * Hq + h) * Sq + i] = l > 0.0 ? m + log(l) : -INFINITY;
            }
        }
    free(s);
}
