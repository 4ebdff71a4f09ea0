/* ref/attn_fwd.c — naive attention forward: the oracle and the benchmark's baseline.
 *
 * For each (sequence, head), one at a time, it materialises the scores S (Sq x Sk: the
 * sequence's own lengths) and P = softmax(S) in full, as a framework's unfused ops do, then
 * O = P v. S and P come from the call's scratch (the counting allocator, or the caller's
 * workspace), so the benchmark measures the O(Sq * Sk) memory the flash path avoids.
 * Dot products, row sums and P v accumulate in float64; S and P are stored as float32 (the
 * traffic a float32 framework moves). Every layout (dense, varlen, KV cache, paged) goes through
 * the problem's row offsets (internal.h), and every mask and modifier through attn_key_range and
 * attn_score_mod64: the definitions the kernels are tested against.
 *
 * NaN: a NaN score or value among a row's visible keys makes the row NaN (no entry of P is
 * skipped for being 0: IEEE's 0 * NaN = NaN). Keys outside the row's range are never read into
 * it. A row with an empty range (or whose visible scores are all -inf) gives O = 0, LSE = -inf. */
#include "internal.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
static inline int omp_thread(void) { return omp_get_thread_num(); }
#else
static inline int omp_thread(void) { return 0; }
#endif

flashc_status ref_attn_fwd_supports(const attn_problem *p)
{
    if (p->device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "the reference runs on host memory only");
    return FLASHC_OK;
}

static void sizes(const attn_problem *p, size_t *s)
{
    s[0] = s[1] = (size_t)p->Sq * (size_t)p->Sk * sizeof(float);
    s[2] = (size_t)p->threads * (size_t)p->Dv * sizeof(double);
}

size_t ref_attn_fwd_workspace(const attn_problem *p)
{
    size_t s[3];
    sizes(p, s);
    return attn_scratch_bytes(3, s);
}

static inline double ld(const void *t, flashc_dtype dt, int64_t off)
{
    return (double)flashc__load(t, dt, off);
}

flashc_status ref_attn_fwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const int64_t D = p->D, Dv = p->Dv, group = p->Hq / p->Hkv;
    size_t sz[3];
    sizes(p, sz);
    attn_scratch sc;
    attn_scratch_init(&sc, p);
    float *S = sz[0] ? attn_scratch_take(&sc, sz[0]) : NULL;
    float *P = sz[1] ? attn_scratch_take(&sc, sz[1]) : NULL;
    double *ACC = attn_scratch_take(&sc, sz[2]);
    if ((sz[0] && (!S || !P)) || !ACC) {
        attn_scratch_free(&sc, ACC), attn_scratch_free(&sc, P), attn_scratch_free(&sc, S);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_fwd_naive: cannot allocate S and P (2 x %lld x %lld "
                            "floats)",
                            (long long)p->Sq, (long long)p->Sk);
    }
    for (int64_t b = 0; b < p->B; b++) {
        int64_t Sq, Sk;
        attn_seqlens(p, b, &Sq, &Sk);
        for (int64_t h = 0; h < p->Hq; h++) {
            const int64_t hk = h / group;
            const double slope = attn_alibi_slope(p, b, h);
            /* pass 1: S = mod(scale * q k^T) over each row's key range, -inf elsewhere */
#pragma omp parallel for schedule(static) num_threads(p->threads)
            for (int64_t i = 0; i < Sq; i++) {
                int64_t lo, hi;
                attn_key_range(p, Sq, Sk, i, &lo, &hi);
                const int64_t qo = attn_q_off(p, p->sq, b, i) + h * p->sq[2];
                for (int64_t j = 0; j < Sk; j++) {
                    float s = -INFINITY;
                    if (j >= lo && j < hi) {
                        const int64_t ko = attn_kv_off(p, p->sk, b, j) + hk * p->sk[2];
                        double acc = 0.0;
                        for (int64_t d = 0; d < D; d++)
                            acc += ld(p->q, p->dtype, qo + d * p->sq[3]) *
                                   ld(p->k, p->dtype, ko + d * p->sk[3]);
                        s = (float)attn_score_mod64(p, acc * (double)p->scale, slope,
                                                    i + Sk - Sq, j);
                    }
                    S[i * Sk + j] = s;
                }
            }
            /* pass 2: P = softmax(S) row by row (max, exp, sum, divide) */
#pragma omp parallel for schedule(static) num_threads(p->threads)
            for (int64_t i = 0; i < Sq; i++) {
                int64_t lo, hi;
                attn_key_range(p, Sq, Sk, i, &lo, &hi);
                const float *srow = S + i * Sk;
                float *prow = P + i * Sk;
                double m = -INFINITY;
                for (int64_t j = lo; j < hi; j++)
                    m = isnan(srow[j]) || isnan(m) ? NAN : (srow[j] > m ? srow[j] : m);
                double sum = 0.0;
                for (int64_t j = 0; j < Sk; j++) {
                    const int vis = j >= lo && j < hi && m != -INFINITY;
                    const double e = vis ? exp((double)srow[j] - m) : 0.0;
                    prow[j] = (float)e;
                    sum += e;
                }
                const int empty = m == -INFINITY; /* no key, or every visible score -inf */
                const double inv = empty ? 0.0 : 1.0 / sum;
                for (int64_t j = 0; j < Sk; j++)
                    prow[j] = (float)((double)prow[j] * inv);
                if (p->lse)
                    p->lse[attn_lse_off(p, b, h, i)] = empty ? -INFINITY : (float)(m + log(sum));
            }
            /* pass 3: O = P v over each row's range, one float64 accumulator row per thread.
             * An empty row (its visible scores all -inf, S still says so) reads no value. */
#pragma omp parallel for schedule(static) num_threads(p->threads)
            for (int64_t i = 0; i < Sq; i++) {
                int64_t lo, hi;
                attn_key_range(p, Sq, Sk, i, &lo, &hi);
                double *acc = ACC + (size_t)omp_thread() * (size_t)Dv;
                const float *srow = S + i * Sk, *prow = P + i * Sk;
                int empty = 1;
                for (int64_t j = lo; j < hi && empty; j++)
                    empty = srow[j] == -INFINITY;
                for (int64_t d = 0; d < Dv; d++)
                    acc[d] = 0.0;
                for (int64_t j = lo; j < hi && !empty; j++) {
                    const double pj = prow[j];
                    const int64_t vo = attn_kv_off(p, p->sv, b, j) + hk * p->sv[2];
                    for (int64_t d = 0; d < Dv; d++)
                        acc[d] += pj * ld(p->v, p->dtype, vo + d * p->sv[3]);
                }
                const int64_t oo = attn_q_off(p, p->so, b, i) + h * p->so[2];
                for (int64_t d = 0; d < Dv; d++)
                    flashc__store(p->o, p->dtype, oo + d * p->so[3], (float)acc[d]);
            }
        }
    }
    attn_scratch_free(&sc, ACC), attn_scratch_free(&sc, P), attn_scratch_free(&sc, S);
    stats->tile_pairs = 0;
    stats->tile_pairs_total = 0;
    stats->block_q = p->Sq;
    stats->block_k = p->Sk;
    return FLASHC_OK;
}
