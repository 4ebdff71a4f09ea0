/* ref/attn_bwd.c — naive attention backward: the oracle and the benchmark's baseline.
 *
 * The seeds' formulas on whole matrices, one (batch, query head) at a time:
 *   P = softmax(mod(scale q k^T) [+ mask]) materialised, Sq x Sk (what a framework keeps
 *                                         alive from the forward for the backward)
 *   D_i = dO_i . O_i
 *   dS = P * (dO v^T - D) * mod'          materialised, Sq x Sk; mod' = 1 - tanh^2(u / cap)
 *                                         under softcap (ALiBi's bias has no gradient)
 *   dQ = scale dS k,  dK = scale dS^T q,  dV = P^T dO
 * P is recomputed here by a full softmax (max, exp, sum, divide) rather than from the given
 * log-sum-exp, so the oracle does not share the flash path's use of L; lse may be NULL.
 * P and dS are float32 matrices from the counting allocator (the memory the benchmark measures);
 * every dot product and sum accumulates in float64. dK and dV of a KV head sum over the query
 * heads of its group in float64 accumulators (Sk x D each) and are rounded once.
 * Rows are split across threads for P, dS and dQ, keys for dK and dV. Any storage dtype, every
 * layout but the KV cache (forward only), every mask and modifier (attn_key_range,
 * attn_score_mod64: the definitions of internal.h). */
#include "internal.h"

#include <math.h>

flashc_status ref_attn_bwd_supports(const attn_problem *p)
{
    if (p->device != FLASHC_DEVICE_CPU)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "the reference runs on host memory only");
    if (p->layout == ATTN_KVCACHE)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "the KV-cache entry point is forward only");
    return FLASHC_OK;
}

static void sizes(const attn_problem *p, size_t *s)
{
    s[0] = s[1] = (size_t)p->Sq * (size_t)p->Sk * sizeof(float);
    s[2] = (size_t)p->Sk * (size_t)p->D * sizeof(double);
    s[3] = (size_t)p->Sk * (size_t)p->Dv * sizeof(double);
}

size_t ref_attn_bwd_workspace(const attn_problem *p)
{
    size_t s[4];
    sizes(p, s);
    return attn_scratch_bytes(4, s);
}

static inline double ld(const void *t, flashc_dtype dt, int64_t off)
{
    return (double)flashc__load(t, dt, off);
}

/* The raw score u = scale * q_i . k_j of (sequence b, head h, row i, key j). */
static double raw_score(const attn_problem *p, int64_t b, int64_t h, int64_t hk, int64_t i,
                        int64_t j)
{
    const int64_t qo = attn_q_off(p, p->sq, b, i) + h * p->sq[2];
    const int64_t ko = attn_kv_off(p, p->sk, b, j) + hk * p->sk[2];
    double acc = 0.0;
    for (int64_t d = 0; d < p->D; d++)
        acc += ld(p->q, p->dtype, qo + d * p->sq[3]) * ld(p->k, p->dtype, ko + d * p->sk[3]);
    return acc * (double)p->scale;
}

/* P (Sq x Sk) of one (sequence, head): row i = softmax of the modified scores over its key
 * range; 0 elsewhere and on a row whose range is empty (or whose scores are all -inf). */
static void probs(const attn_problem *p, int64_t b, int64_t h, int64_t hk, int64_t Sq,
                  int64_t Sk, float *P)
{
    const double slope = attn_alibi_slope(p, b, h);
#pragma omp parallel for schedule(static) num_threads(p->threads)
    for (int64_t i = 0; i < Sq; i++) {
        int64_t lo, hi;
        attn_key_range(p, Sq, Sk, i, &lo, &hi);
        float *prow = P + i * Sk;
        double m = -INFINITY;
        for (int64_t j = 0; j < Sk; j++) {
            double s = -INFINITY;
            if (j >= lo && j < hi)
                s = attn_score_mod64(p, raw_score(p, b, h, hk, i, j), slope, i + Sk - Sq, j);
            prow[j] = (float)s; /* the scores, briefly: overwritten by P below */
            m = isnan(s) || isnan(m) ? NAN : (s > m ? s : m);
        }
        double sum = 0.0;
        for (int64_t j = lo; j < hi && m != -INFINITY; j++)
            sum += exp((double)prow[j] - m);
        for (int64_t j = 0; j < Sk; j++)
            prow[j] = j >= lo && j < hi && m != -INFINITY
                          ? (float)(exp((double)prow[j] - m) / sum)
                          : 0.0f;
    }
}

flashc_status ref_attn_bwd(const attn_problem *p, flashc_attn_stats *stats)
{
    const int64_t D = p->D, Dv = p->Dv, group = p->Hq / p->Hkv;
    size_t sz[4];
    sizes(p, sz);
    attn_scratch sc;
    attn_scratch_init(&sc, p);
    float *P = sz[0] ? attn_scratch_take(&sc, sz[0]) : NULL;
    float *dS = sz[1] ? attn_scratch_take(&sc, sz[1]) : NULL;
    double *dK = sz[2] ? attn_scratch_take(&sc, sz[2]) : NULL;
    double *dV = sz[3] ? attn_scratch_take(&sc, sz[3]) : NULL;
    if ((sz[0] && (!P || !dS)) || (sz[2] && (!dK || !dV))) {
        attn_scratch_free(&sc, dV), attn_scratch_free(&sc, dK);
        attn_scratch_free(&sc, dS), attn_scratch_free(&sc, P);
        return flashc__fail(FLASHC_ERR_OUT_OF_MEMORY,
                            "flashc_attn_bwd_naive: cannot allocate P and dS (2 x %lld x %lld "
                            "floats)",
                            (long long)p->Sq, (long long)p->Sk);
    }
    const double cap = p->softcap;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t Sq, Sk;
        attn_seqlens(p, b, &Sq, &Sk);
        for (int64_t hk = 0; hk < p->Hkv; hk++) {
            for (int64_t x = 0; x < Sk * D; x++)
                dK[x] = 0.0;
            for (int64_t x = 0; x < Sk * Dv; x++)
                dV[x] = 0.0;
            for (int64_t h = hk * group; h < (hk + 1) * group; h++) {
                probs(p, b, h, hk, Sq, Sk, P);
                /* D_i, dS = P * (dO v^T - D) * dcap, dQ = scale dS k: row by row */
#pragma omp parallel for schedule(static) num_threads(p->threads)
                for (int64_t i = 0; i < Sq; i++) {
                    const int64_t doo = attn_q_off(p, p->sdo, b, i) + h * p->sdo[2];
                    const int64_t oo = attn_q_off(p, p->so, b, i) + h * p->so[2];
                    const int64_t dqo = attn_q_off(p, p->sdq, b, i) + h * p->sdq[2];
                    int64_t lo, hi;
                    attn_key_range(p, Sq, Sk, i, &lo, &hi);
                    double di = 0.0;
                    for (int64_t d = 0; d < Dv; d++)
                        di += ld(p->dout, p->dtype, doo + d * p->sdo[3]) *
                              ld(p->o, p->dtype, oo + d * p->so[3]);
                    for (int64_t j = 0; j < Sk; j++) {
                        double ds = 0.0;
                        if (j >= lo && j < hi && P[i * Sk + j] != 0.0f) {
                            const int64_t vo = attn_kv_off(p, p->sv, b, j) + hk * p->sv[2];
                            double dp = 0.0;
                            for (int64_t d = 0; d < Dv; d++)
                                dp += ld(p->dout, p->dtype, doo + d * p->sdo[3]) *
                                      ld(p->v, p->dtype, vo + d * p->sv[3]);
                            ds = (double)P[i * Sk + j] * (dp - di);
                            if (cap > 0.0) { /* d/du of cap tanh(u / cap) = 1 - tanh^2 */
                                const double t = tanh(raw_score(p, b, h, hk, i, j) / cap);
                                ds *= 1.0 - t * t;
                            }
                        }
                        dS[i * Sk + j] = (float)ds;
                    }
                    for (int64_t d = 0; d < D; d++) {
                        double acc = 0.0;
                        for (int64_t j = lo; j < hi; j++)
                            acc += (double)dS[i * Sk + j] *
                                   ld(p->k, p->dtype,
                                      attn_kv_off(p, p->sk, b, j) + hk * p->sk[2] + d * p->sk[3]);
                        flashc__store(p->dq, p->dtype, dqo + d * p->sdq[3],
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
                        const int64_t qo = attn_q_off(p, p->sq, b, i) + h * p->sq[2];
                        const int64_t doo = attn_q_off(p, p->sdo, b, i) + h * p->sdo[2];
                        for (int64_t d = 0; d < D; d++)
                            dK[j * D + d] += ds * ld(p->q, p->dtype, qo + d * p->sq[3]);
                        for (int64_t d = 0; d < Dv; d++)
                            dV[j * Dv + d] += pr * ld(p->dout, p->dtype, doo + d * p->sdo[3]);
                    }
                }
            }
            for (int64_t j = 0; j < Sk; j++) {
                const int64_t dko = attn_kv_off(p, p->sdk, b, j) + hk * p->sdk[2];
                const int64_t dvo = attn_kv_off(p, p->sdv, b, j) + hk * p->sdv[2];
                for (int64_t d = 0; d < D; d++)
                    flashc__store(p->dk, p->dtype, dko + d * p->sdk[3],
                                  (float)(dK[j * D + d] * (double)p->scale));
                for (int64_t d = 0; d < Dv; d++)
                    flashc__store(p->dv, p->dtype, dvo + d * p->sdv[3], (float)dV[j * Dv + d]);
            }
        }
    }
    attn_scratch_free(&sc, dV), attn_scratch_free(&sc, dK);
    attn_scratch_free(&sc, dS), attn_scratch_free(&sc, P);
    stats->tile_pairs = 0;
    stats->tile_pairs_total = 0;
    stats->block_q = p->Sq;
    stats->block_k = p->Sk;
    return FLASHC_OK;
}
