/* kernels_scalar.c — the portable reference micro-kernels: the contract in plain C. */
#include "kernels.h"

#include <math.h>

static void qk_scalar(const float *Q, int64_t ldq, const float *K, int64_t ldk, int64_t br,
                      int64_t bc, int64_t D, float scale, float *S, int64_t lds)
{
    for (int64_t i = 0; i < br; i++)
        for (int64_t j = 0; j < bc; j++) {
            float acc = 0.0f;
            for (int64_t d = 0; d < D; d++)
                acc += Q[i * ldq + d] * K[j * ldk + d];
            S[i * lds + j] = acc * scale;
        }
}

static void softmax_scalar(float *S, int64_t lds, int64_t br, int64_t bc, float *m, float *l,
                           float *alpha)
{
    for (int64_t i = 0; i < br; i++) {
        float *s = S + i * lds;
        float mx = m[i];
        for (int64_t j = 0; j < bc; j++)
            mx = s[j] > mx ? s[j] : mx;
        if (mx == -INFINITY) { /* nothing visible yet: keep the empty state, P = 0 */
            for (int64_t j = 0; j < bc; j++)
                s[j] = 0.0f;
            alpha[i] = 1.0f;
            continue;
        }
        /* Rescale only when the max grew; exp(-inf - mx) = 0 on the first visible tile. */
        const float a = mx > m[i] ? expf(m[i] - mx) : 1.0f;
        float sum = 0.0f;
        for (int64_t j = 0; j < bc; j++) {
            const float e = expf(s[j] - mx);
            s[j] = e;
            sum += e;
        }
        l[i] = l[i] * a + sum;
        m[i] = mx;
        alpha[i] = a;
    }
}

static void pv_scalar(const float *P, int64_t ldp, const float *V, int64_t ldv, int64_t br,
                      int64_t bc, int64_t D, const float *alpha, float *O, int64_t ldo)
{
    for (int64_t i = 0; i < br; i++) {
        float *o = O + i * ldo;
        if (alpha[i] != 1.0f)
            for (int64_t d = 0; d < D; d++)
                o[d] *= alpha[i];
        for (int64_t j = 0; j < bc; j++) {
            const float pij = P[i * ldp + j];
            const float *vr = V + j * ldv;
            for (int64_t d = 0; d < D; d++)
                o[d] += pij * vr[d];
        }
    }
}

const cpu_kernels cpu_kernels_scalar = {
    .name = "scalar",
    .qk = qk_scalar,
    .softmax = softmax_scalar,
    .pv = pv_scalar,
};

const cpu_kernels *cpu_kernels_get(void) { return &cpu_kernels_scalar; }
