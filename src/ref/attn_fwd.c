/* ref/attn_fwd.c — naive attention forward: the oracle and the benchmark's baseline.
 *
 * For each (batch, head), one at a time, it materialises S = scale * q k^T (Sq x Sk) and
 * P = softmax(S) in full, as a framework's unfused ops do, then O = P v. S and P come from the
 * counting allocator, so the benchmark measures the O(Sq * Sk) memory the flash path avoids.
 * Dot products, row sums and P v accumulate in float64; S and P are stored as float32 (the
 * traffic a float32 framework moves). Rows are split across threads within a head. */
#include "internal.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
static inline int omp_thread(void) { return omp_get_thread_num(); }
#else
static inline int omp_thread(void) { return 0; }
#endif

flashc_status ref_attn_fwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const int64_t Sq = p->Sq, Sk = p->Sk, D = p->D, group = p->Hq / p->Hkv;
    float *S = flashc__malloc((size_t)Sq * (size_t)Sk * sizeof(float));
    float *P = flashc__malloc((size_t)Sq * (size_t)Sk * sizeof(float));
    double *ACC = flashc__malloc((size_t)p->threads * (size_t)D * sizeof(double));
    if (!S || !P || !ACC) {
        flashc__free(S);
        flashc__free(P);
        flashc__free(ACC);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_fwd_naive: cannot allocate S and P (2 x %lld x %lld floats)",
                            (long long)Sq, (long long)Sk);
    }
    for (int64_t b = 0; b < p->B; b++) {
        for (int64_t h = 0; h < p->Hq; h++) {
            const int64_t hk = h / group;
            const int64_t qo = b * p->sq[0] + h * p->sq[2];
            const int64_t ko = b * p->sk[0] + hk * p->sk[2];
            const int64_t vo = b * p->sv[0] + hk * p->sv[2];
            const int64_t oo = b * p->so[0] + h * p->so[2];
            /* pass 1: S = scale * q k^T, masked entries -inf */
#pragma omp parallel for schedule(static) num_threads(p->threads)
            for (int64_t i = 0; i < Sq; i++) {
                const int64_t kend = attn_key_end(p, i);
                for (int64_t j = 0; j < Sk; j++) {
                    float s = -INFINITY;
                    if (j < kend) {
                        double acc = 0.0;
                        for (int64_t d = 0; d < D; d++)
                            acc += (double)flashc__load(p->q, p->dtype, qo + i * p->sq[1] + d * p->sq[3]) *
                                   (double)flashc__load(p->k, p->dtype, ko + j * p->sk[1] + d * p->sk[3]);
                        s = (float)(acc * (double)p->scale);
                    }
                    S[i * Sk + j] = s;
                }
            }
            /* pass 2: P = softmax(S) row by row (max, exp, sum, divide) */
#pragma omp parallel for schedule(static) num_threads(p->threads)
            for (int64_t i = 0; i < Sq; i++) {
                const float *srow = S + i * Sk;
                float *prow = P + i * Sk;
                float m = -INFINITY;
                for (int64_t j = 0; j < Sk; j++)
                    m = srow[j] > m ? srow[j] : m;
                double sum = 0.0;
                for (int64_t j = 0; j < Sk; j++) {
                    double e = m == -INFINITY ? 0.0 : exp((double)srow[j] - (double)m);
                    prow[j] = (float)e;
                    sum += e;
                }
                const double inv = sum > 0.0 ? 1.0 / sum : 0.0; /* a fully masked row: P = 0 */
                for (int64_t j = 0; j < Sk; j++)
                    prow[j] = (float)((double)prow[j] * inv);
                if (p->lse)
                    p->lse[b * p->slse[0] + h * p->slse[1] + i * p->slse[2]] =
                        sum > 0.0 ? (float)((double)m + log(sum)) : -INFINITY;
            }
            /* pass 3: O = P v, one float64 accumulator row per thread */
#pragma omp parallel for schedule(static) num_threads(p->threads)
            for (int64_t i = 0; i < Sq; i++) {
                double *acc = ACC + (size_t)omp_thread() * (size_t)D;
                const float *prow = P + i * Sk;
                for (int64_t d = 0; d < D; d++)
                    acc[d] = 0.0;
                for (int64_t j = 0; j < Sk; j++) {
                    const double pj = prow[j];
                    if (pj == 0.0)
                        continue;
                    for (int64_t d = 0; d < D; d++)
                        acc[d] += pj * (double)flashc__load(p->v, p->dtype,
                                                            vo + j * p->sv[1] + d * p->sv[3]);
                }
                for (int64_t d = 0; d < D; d++)
                    flashc__store(p->o, p->dtype, oo + i * p->so[1] + d * p->so[3], (float)acc[d]);
            }
        }
    }
    flashc__free(S);
    flashc__free(P);
    flashc__free(ACC);
    stats->tile_pairs = 0;
    stats->tile_pairs_total = 0;
    stats->block_q = Sq;
    stats->block_k = Sk;
    return FLASHC_OK;
}
