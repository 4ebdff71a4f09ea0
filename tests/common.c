/* common.c — see common.h. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, getpid under -std=c11 */
#include "common.h"
#include "internal.h" /* the storage dtypes' rounding */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <fnmatch.h>

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

double tu_max_row_norm(const float *x, int64_t rows, int64_t D)
{
    double m = 0.0;
    for (int64_t r = 0; r < rows; r++) {
        double n2 = 0.0;
        for (int64_t d = 0; d < D; d++)
            n2 += (double)x[r * D + d] * (double)x[r * D + d];
        m = fmax(m, sqrt(n2));
    }
    return m;
}

double tu_max_abs(const float *x, int64_t n)
{
    double m = 0.0;
    for (int64_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

double tu_f32_logit_floor(double scale, double qnorm, double knorm, double bias, double vmax)
{
    return fmax(0x1p-21, 0x1p-24 * (fabs(scale) * qnorm * knorm + bias) * vmax);
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

/* ---- the plain same-precision ring (the low-precision rule's yardstick) -----------------------
 * What a framework's ring attention computes in the storage dtype (ring-flash-attention with
 * unfused per-block attention): for each (query rank r, key rank s) block, the plain
 * same-precision attention of test_attn_lowp.c / test_attn_bwd_v2.c (S = q k^T rounded, scaled
 * and rounded; P rounded; sums in float32, each block's result rounded), the blocks' (O, LSE)
 * merged in float32, and in the backward each block's dQ, dK, dV rounded and summed in float32
 * (P = exp(S - LSE) with the global LSE, D = rowsum(dO O) rounded). The ring rounds once per
 * block and so does this; the plain single-sequence version would round once in all, which no
 * ring over bfloat16 kernels can match (a dQ block of half the keys does not cancel as the
 * whole row does). Contiguous (B, S, H, D) float copies of the rounded inputs. */
static float rnd(flashc_dtype dt, float x)
{
    uint16_t h[2];
    flashc__store(h, dt, 0, x);
    return dt == FLASHC_F32 ? x : flashc__load(h, dt, 0);
}

tu_ring_out tu_naive_ring(const tu_ring_shape *c, const int *owner, const float *q,
                          const float *k, const float *v, const float *dout)
{
    const int64_t B = c->B, S = c->S, Hq = c->Hq, Hkv = c->Hkv, D = c->D, Dv = c->Dv;
    const flashc_dtype dt = c->dt;
    const int N = c->N;
    const float scale = c->scale;
    const int64_t no = B * S * Hq * Dv, nq = B * S * Hq * D, nk = B * S * Hkv * D, nv = B * S * Hkv * Dv;
    tu_ring_out r = {calloc((size_t)no, 4), calloc((size_t)nq, 4), calloc((size_t)nk, 4), calloc((size_t)nv, 4)};
    float *lse = malloc((size_t)(B * S * Hq) * 4);
    float *dq = calloc((size_t)nq, 4), *dk = calloc((size_t)nk, 4), *dv = calloc((size_t)nv, 4);
    float *bk = calloc((size_t)nk, 4), *bv = calloc((size_t)nv, 4);
    float *P = malloc((size_t)S * 4), *acc = malloc((size_t)(D > Dv ? D : Dv) * 4);
    for (int64_t x = 0; x < B * S * Hq; x++)
        lse[x] = -INFINITY;
    /* forward: per (query row, key rank) block, merged */
    for (int64_t b = 0; b < B; b++)
        for (int64_t h = 0; h < Hq; h++)
            for (int64_t i = 0; i < S; i++)
                for (int s = 0; s < N; s++) {
                    const int64_t hk = h / (Hq / Hkv), end = c->causal ? i + 1 : S;
                    const float *qi = q + ((b * S + i) * Hq + h) * D;
                    float mx = -INFINITY, sum = 0.0f;
                    for (int64_t j = 0; j < end; j++) {
                        if (owner[j] != s)
                            continue;
                        float a = 0.0f;
                        for (int64_t d = 0; d < D; d++)
                            a += qi[d] * k[((b * S + j) * Hkv + hk) * D + d];
                        P[j] = rnd(dt, rnd(dt, a) * scale);
                        mx = P[j] > mx ? P[j] : mx;
                    }
                    if (mx == -INFINITY)
                        continue;
                    for (int64_t j = 0; j < end; j++)
                        if (owner[j] == s)
                            sum += P[j] = expf(P[j] - mx);
                    for (int64_t d = 0; d < Dv; d++)
                        acc[d] = 0.0f;
                    for (int64_t j = 0; j < end; j++)
                        if (owner[j] == s)
                            for (int64_t d = 0; d < Dv; d++)
                                acc[d] += rnd(dt, P[j] / sum) * v[((b * S + j) * Hkv + hk) * Dv + d];
                    float *oi = r.o + ((b * S + i) * Hq + h) * Dv, *li = &lse[(b * Hq + h) * S + i];
                    const float l2 = mx + logf(sum), m = *li > l2 ? *li : l2;
                    const float w1 = *li == -INFINITY ? 0.0f : expf(*li - m), w2 = expf(l2 - m);
                    for (int64_t d = 0; d < Dv; d++) /* o holds float32 sums until the end */
                        oi[d] = (w1 * oi[d] + w2 * rnd(dt, acc[d])) / (w1 + w2);
                    *li = m + logf(w1 + w2);
                }
    for (int64_t x = 0; x < no; x++)
        r.o[x] = rnd(dt, r.o[x]);
    /* backward: per (query rank, key rank) block, with the global LSE and O */
    for (int qr = 0; qr < N; qr++)
        for (int s = 0; s < N; s++) {
            memset(bk, 0, (size_t)nk * 4), memset(bv, 0, (size_t)nv * 4);
            for (int64_t b = 0; b < B; b++)
                for (int64_t h = 0; h < Hq; h++)
                    for (int64_t i = 0; i < S; i++) {
                        if (owner[i] != qr)
                            continue;
                        const int64_t hk = h / (Hq / Hkv), end = c->causal ? i + 1 : S;
                        const float *qi = q + ((b * S + i) * Hq + h) * D;
                        const float *doi = dout + ((b * S + i) * Hq + h) * Dv;
                        const float *oi = r.o + ((b * S + i) * Hq + h) * Dv;
                        const float L = lse[(b * Hq + h) * S + i];
                        float di = 0.0f;
                        for (int64_t d = 0; d < Dv; d++)
                            di += doi[d] * oi[d];
                        di = rnd(dt, di);
                        for (int64_t d = 0; d < D; d++)
                            acc[d] = 0.0f;
                        for (int64_t j = 0; j < end; j++) {
                            if (owner[j] != s)
                                continue;
                            const float *kj = k + ((b * S + j) * Hkv + hk) * D;
                            const float *vj = v + ((b * S + j) * Hkv + hk) * Dv;
                            float a = 0.0f, dp = 0.0f;
                            for (int64_t d = 0; d < D; d++)
                                a += qi[d] * kj[d];
                            const float pij = rnd(dt, expf(rnd(dt, rnd(dt, a) * scale) - L));
                            for (int64_t d = 0; d < Dv; d++)
                                dp += doi[d] * vj[d];
                            const float ds = rnd(dt, pij * (rnd(dt, dp) - di));
                            for (int64_t d = 0; d < D; d++)
                                acc[d] += ds * kj[d];
                            for (int64_t d = 0; d < D; d++)
                                bk[((b * S + j) * Hkv + hk) * D + d] += ds * qi[d];
                            for (int64_t d = 0; d < Dv; d++)
                                bv[((b * S + j) * Hkv + hk) * Dv + d] += pij * doi[d];
                        }
                        for (int64_t d = 0; d < D; d++)
                            dq[((b * S + i) * Hq + h) * D + d] += rnd(dt, acc[d] * scale);
                    }
            for (int64_t x = 0; x < nk; x++)
                dk[x] += rnd(dt, bk[x] * scale);
            for (int64_t x = 0; x < nv; x++)
                dv[x] += rnd(dt, bv[x]);
        }
    for (int64_t x = 0; x < nq; x++)
        r.dq[x] = rnd(dt, dq[x]);
    for (int64_t x = 0; x < nk; x++)
        r.dk[x] = rnd(dt, dk[x]);
    for (int64_t x = 0; x < nv; x++)
        r.dv[x] = rnd(dt, dv[x]);
    free(lse), free(dq), free(dk), free(dv), free(bk), free(bv), free(P), free(acc);
    return r;
}

/* ---- which tests run ---------------------------------------------------------------------- */

/* Whether name matches one of the comma-separated glob patterns of list. */
static int name_in_list(const char *name, const char *list)
{
    char pat[256];
    for (const char *s = list; *s;) {
        const char *e = strchr(s, ',');
        const size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n > 0 && n < sizeof pat) {
            memcpy(pat, s, n);
            pat[n] = '\0';
            if (fnmatch(pat, name, 0) == 0)
                return 1;
        }
        s += n + (e ? 1 : 0);
    }
    return 0;
}

size_t tu_select_tests(struct CMUnitTest *t, size_t n)
{
    const char *filter = getenv("FLASHC_TEST_FILTER"), *skip = getenv("FLASHC_TEST_SKIP");
    size_t kept = 0;
    for (size_t i = 0; i < n; i++)
        if ((!filter || !filter[0] || name_in_list(t[i].name, filter)) &&
            !(skip && skip[0] && name_in_list(t[i].name, skip)))
            t[kept++] = t[i];
    return kept;
}
