/* ref/attn_bwd.c — naive attention backward: the oracle and the benchmark's baseline.
 *
 * The seeds' formulas on whole matrices, one (batch, query head) at a time:
 *   P = softmax(scale q k^T [+ mask])     materialised, Sq x Sk (what a framework keeps alive
 *                                         from the forward for the backward)
 *   D_i = dO_i . O_i
 *   dS = P * (dO v^T - D)                 materialised, Sq x Sk
 *   dQ = scale dS k,  dK = scale dS^T q,  dV = P^T dO
 * P is recomputed here by a full softmax (max, exp, sum, divide) rather than from the given
 * log-sum-exp, so the oracle does not share the flash path's use of L; lse may be NULL.
 * P and dS are float32 matrices from the counting allocator (the memory the benchmark measures);
 * every dot product and sum accumulates in float64. dK and dV of a KV head sum over the query
 * heads of its group in float64 accumulators (Sk x D each) and are rounded once.
 * Rows are split across threads for P, dS and dQ, keys for dK and dV. Any storage dtype. */
#include "internal.h"

#include <math.h>

/* Element (i, d) of a (B, S, H, D) tensor at head offset base. */
static inline double at(const void *t, flashc_dtype dt, const int64_t *st, int64_t base,
                        int64_t i, int64_t d)
{
    return (double)flashc__load(t, dt, base + i * st[1] + d * st[3]);
}

/* P (Sq x Sk) for one (batch, head): row i = softmax over its visible keys; 0 elsewhere and on
 * a row that sees no key. */
static void probs(const attn_problem *p, int64_t qo, int64_t ko, float *P)
{
    const int64_t Sq = p->Sq, Sk = p->Sk, D = p->D;
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t i = 0; i < Sq; i++) {
        const int64_t kend = attn_key_end(p, i);
        float *prow = P + i * Sk;
        double m = -INFINITY;
        for (int64_t j = 0; j < Sk; j++) {
            double s = -INFINITY;
            if (j < kend) {
                double acc = 0.0;
                for (int64_t d = 0; d < D; d++)
                    acc += at(p->q, p->dtype, p->sq, qo, i, d) *
                           at(p->k, p->dtype, p->sk, ko, j, d);
                s = acc * (double)p->scale;
            }
            prow[j] = (float)s; /* the scores, briefly: overwritten by P below */
            m = s > m ? s : m;
        }
        double sum = 0.0;
        for (int64_t j = 0; j < Sk; j++)
            sum += j < kend ? exp((double)prow[j] - m) : 0.0;
        for (int64_t j = 0; j < Sk; j++)
            prow[j] = j < kend ? (float)(exp((double)prow[j] - m) / sum) : 0.0f;
    }
}

flashc_status ref_attn_bwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const int64_t Sq = p->Sq, Sk = p->Sk, D = p->D, group = p->Hq / p->Hkv;
    float *P = flashc__malloc((size_t)Sq * (size_t)Sk * sizeof(float));
    float *dS = flashc__malloc((size_t)Sq * (size_t)Sk * sizeof(float));
    double *dK = flashc__malloc((size_t)Sk * (size_t)D * sizeof(double));
    double *dV = flashc__malloc((size_t)Sk * (size_t)D * sizeof(double));
    if (!P || !dS || !dK || !dV) {
        flashc__free(P), flashc__free(dS), flashc__free(dK), flashc__free(dV);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_bwd_naive: cannot allocate P and dS (2 x %lld x %lld "
                            "floats)",
                            (long long)Sq, (long long)Sk);
    }
    for (int64_t b = 0; b < p->B; b++) {
        for (int64_t hk = 0; hk < p->Hkv; hk++) {
            const int64_t ko = b * p->sk[0] + hk * p->sk[2];
            const int64_t vo = b * p->sv[0] + hk * p->sv[2];
            for (int64_t x = 0; x < Sk * D; x++)
                dK[x] = dV[x] = 0.0;
            for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
                const int64_t qo = b * p->sq[0] + h * p->sq[2];
                const int64_t oo = b * p->so[0] + h * p->so[2];
                const int64_t doo = b * p->sdo[0] + h * p->sdo[2];
                const int64_t dqo = b * p->sdq[0] + h * p->sdq[2];
                probs(p, qo, ko, P);
                /* D, dS = P * (dO v^T - D), dQ = scale dS k: row by row */
#pragma omp parallel for schedule(static) num_threads(p->threads)
                for (int64_t i = 0; i < Sq; i++) {
                    double di = 0.0;
                    for (int64_t d = 0; d < D; d++)
                        di += at(p->dout, p->dtype, p->sdo, doo, i, d) *
                              at(p->o, p->dtype, p->so, oo, i, d);
                    for (int64_t j = 0; j < Sk; j++) {
                        double dp = 0.0;
                        for (int64_t d = 0; d < D; d++)
                            dp += at(p->dout, p->dtype, p->sdo, doo, i, d) *
                                  at(p->v, p->dtype, p->sv, vo, j, d);
                        dS[i * Sk + j] = (float)((double)P[i * Sk + j] * (dp - di));
                    }
                    for (int64_t d = 0; d < D; d++) {
                        double acc = 0.0;
                        for (int64_t j = 0; j < Sk; j++)
                            acc += (double)dS[i * Sk + j] * at(p->k, p->dtype, p->sk, ko, j, d);
                        flashc__store(p->dq, p->dtype, dqo + i * p->sdq[1] + d * p->sdq[3],
                                      (float)(acc * (double)p->scale));
                    }
                }
                /* dK += dS^T q, dV += P^T dO: key by key */
#pragma omp parallel for schedule(static) num_threads(p->threads)
                for (int64_t j = 0; j < Sk; j++) {
                    for (int64_t i = 0; i < Sq; i++) {
                        const double ds = dS[i * Sk + j], pr = P[i * Sk + j];
                        if (ds == 0.0 && pr == 0.0)
                            continue;
                        for (int64_t d = 0; d < D; d++) {
                            dK[j * D + d] += ds * at(p->q, p->dtype, p->sq, qo, i, d);
                            dV[j * D + d] += pr * at(p->dout, p->dtype, p->sdo, doo, i, d);
                        }
                    }
                }
            }
            for (int64_t j = 0; j < Sk; j++)
                for (int64_t d = 0; d < D; d++) {
                    flashc__store(p->dk, p->dtype,
                                  b * p->sdk[0] + hk * p->sdk[2] + j * p->sdk[1] + d * p->sdk[3],
                                  (float)(dK[j * D + d] * (double)p->scale));
                    flashc__store(p->dv, p->dtype,
                                  b * p->sdv[0] + hk * p->sdv[2] + j * p->sdv[1] + d * p->sdv[3],
                                  (float)dV[j * D + d]);
                }
        }
    }
    flashc__free(P), flashc__free(dS), flashc__free(dK), flashc__free(dV);
    stats->tile_pairs = 0;
    stats->tile_pairs_total = 0;
    stats->block_q = Sq;
    stats->block_k = Sk;
    return FLASHC_OK;
}
