/*
 * decode_split_tol.c — how tight test_cuda_serving's "splits equal one pass within rounding"
 * bound is, from an emulation of the split kernel's numerics on the host (no GPU): per 16-key
 * block a warp's running max, P = exp2(x - max) rounded to bf16 for P V, float32 sums, 4 warps
 * taking every 4th block, their states merged, split partials (normalised o, lse) merged as
 * attn_decode_merge does, o rounded to bf16 once. For random bf16 q, k, v ~ N(0, 1) it prints,
 * over seeds x split counts {2, 3, 5, 8, 13, 32, 64}, the largest max|o_split - o_1| / bound for
 * the bound 2 x the naive same-precision error (the test's until 2026-12-03), and for that bound
 * plus one bf16 ulp of the element (the test's since).
 *   cc -O2 bench/decode_split_tol.c -lm -DHQ=8 -DHKV=2 -o /tmp/tol && /tmp/tol 241 3000
 * (keys, seeds; one sequence, d 128, HQ / HKV query / KV heads, default 32 / 8).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef HQ
#define HQ 32
#define HKV 8
#endif
enum { D = 128, G = HQ / HKV, NS = 7, SMAX = 64 };
static const int split_counts[NS] = {2, 3, 5, 8, 13, 32, 64};

static uint64_t rs = 88172645463325252ull;
static double urand(void)
{
    rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
    return (double)(rs >> 11) * 0x1.0p-53;
}
static double nrand(void)
{
    double u1 = urand(), u2 = urand();
    return sqrt(-2.0 * log(u1 < 1e-300 ? 1e-300 : u1)) * cos(6.283185307179586 * u2);
}
static float bf(float x) /* round to nearest even bf16 */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, 4);
    return x;
}
static double ulp_bf16(double x)
{
    int e;
    frexp(fabs(x), &e);
    return ldexp(1.0, e - 8);
}

/* The kernel's o of one head (x: scores in the log2 domain) with S splits, rounded to bf16. */
static void kernel_o(int SK, int S, const float *x, const float *v, int hk, float *o)
{
    static float po[SMAX][D];
    float plse[SMAX];
    const int nblk = (SK + 15) / 16, per = (nblk + S - 1) / S;
    for (int s = 0; s < S; s++) {
        float acc[4][D], wm[4], wl[4];
        for (int w = 0; w < 4; w++) {
            wm[w] = -INFINITY, wl[w] = 0.0f;
            memset(acc[w], 0, sizeof acc[w]);
        }
        const int b0 = s * per, b1 = b0 + per < nblk ? b0 + per : nblk;
        for (int w = 0; w < 4; w++)
            for (int bk = b0 + w; bk < b1; bk += 4) {
                const int j0 = bk * 16, j1 = j0 + 16 < SK ? j0 + 16 : SK;
                float mx = wm[w];
                for (int j = j0; j < j1; j++)
                    mx = x[j] > mx ? x[j] : mx;
                const float al = wm[w] == -INFINITY ? 0.0f : exp2f(wm[w] - mx);
                wl[w] *= al, wm[w] = mx;
                for (int d = 0; d < D; d++)
                    acc[w][d] *= al;
                for (int j = j0; j < j1; j++) {
                    const float p = exp2f(x[j] - mx), pb = bf(p);
                    wl[w] += p;
                    for (int d = 0; d < D; d++)
                        acc[w][d] += pb * v[(j * HKV + hk) * D + d];
                }
            }
        float M = -INFINITY, wt[4], L = 0.0f;
        for (int w = 0; w < 4; w++)
            M = wm[w] > M ? wm[w] : M;
        for (int w = 0; w < 4; w++) {
            wt[w] = wm[w] == -INFINITY ? 0.0f : exp2f(wm[w] - M);
            L += wl[w] * wt[w];
        }
        for (int d = 0; d < D; d++) {
            float t = 0.0f;
            for (int w = 0; w < 4; w++)
                t += acc[w][d] * wt[w];
            po[s][d] = L > 0.0f ? t / L : 0.0f;
        }
        plse[s] = L > 0.0f ? (M + log2f(L)) * 0.6931471805599453f : -INFINITY;
    }
    if (S == 1) {
        for (int d = 0; d < D; d++)
            o[d] = bf(po[0][d]);
        return;
    }
    float M = -INFINITY, w[SMAX], L = 0.0f;
    for (int s = 0; s < S; s++)
        M = plse[s] > M ? plse[s] : M;
    for (int s = 0; s < S; s++) {
        w[s] = plse[s] == -INFINITY ? 0.0f : expf(plse[s] - M);
        L += w[s];
    }
    for (int d = 0; d < D; d++) {
        float t = 0.0f;
        for (int s = 0; s < S; s++)
            if (w[s] != 0.0f)
                t += w[s] * po[s][d];
        o[d] = bf(t / L);
    }
}

int main(int argc, char **argv)
{
    const int SK = argc > 1 ? atoi(argv[1]) : 241, seeds = argc > 2 ? atoi(argv[2]) : 100;
    float *q = malloc(sizeof(float) * HQ * D), *k = malloc(sizeof(float) * SK * HKV * D);
    float *v = malloc(sizeof(float) * SK * HKV * D), *x = malloc(sizeof(float) * SK);
    double *sr = malloc(sizeof(double) * SK);
    float *sn = malloc(sizeof(float) * SK);
    static float o1[HQ][D], os[NS][HQ][D];
    const float scale = 1.0f / sqrtf((float)D), sl2 = (float)(1.4426950408889634 / sqrt(D));
    double worst_old = 0.0, worst_new = -1.0;
    long over_old = 0, over_new = 0;
    for (int seed = 0; seed < seeds; seed++) {
        for (int i = 0; i < HQ * D; i++)
            q[i] = bf((float)nrand());
        for (int i = 0; i < SK * HKV * D; i++)
            k[i] = bf((float)nrand()), v[i] = bf((float)nrand());
        double naive = 0.0; /* max over o of |naive - ref| (test_cuda_serving's ref_row) */
        for (int h = 0; h < HQ; h++) {
            const int hk = h / G;
            const float *qh = q + h * D;
            float qs[D], on[D];
            double oref[D], m = -INFINITY, l = 0.0;
            float mn = -INFINITY, lf = 0.0f;
            for (int d = 0; d < D; d++)
                qs[d] = bf(qh[d] * scale);
            for (int j = 0; j < SK; j++) {
                const float *kj = k + (j * HKV + hk) * D;
                double acc = 0.0;
                float accn = 0.0f, accf = 0.0f;
                for (int d = 0; d < D; d++)
                    acc += (double)qh[d] * kj[d], accn += qs[d] * kj[d], accf += qh[d] * kj[d];
                sr[j] = acc * scale, sn[j] = bf(accn), x[j] = accf * sl2;
                m = sr[j] > m ? sr[j] : m;
                mn = sn[j] > mn ? sn[j] : mn;
            }
            for (int j = 0; j < SK; j++) {
                sr[j] = exp(sr[j] - m), l += sr[j];
                sn[j] = expf(sn[j] - mn), lf += sn[j];
            }
            for (int d = 0; d < D; d++)
                oref[d] = 0.0, on[d] = 0.0f;
            for (int j = 0; j < SK; j++) {
                const float *vj = v + (j * HKV + hk) * D, pn = bf(sn[j] / lf);
                for (int d = 0; d < D; d++)
                    oref[d] += sr[j] / l * vj[d], on[d] += pn * vj[d];
            }
            for (int d = 0; d < D; d++) {
                const double e = fabs(bf(on[d]) - oref[d]);
                naive = e > naive ? e : naive;
            }
            kernel_o(SK, 1, x, v, hk, o1[h]);
            for (int si = 0; si < NS; si++)
                kernel_o(SK, split_counts[si], x, v, hk, os[si][h]);
        }
        const double tol = 2.0 * naive + 1e-6;
        for (int si = 0; si < NS; si++) {
            double r_old = 0.0, r_new = 0.0;
            for (int h = 0; h < HQ; h++)
                for (int d = 0; d < D; d++) {
                    const double a = o1[h][d], b = os[si][h][d], df = fabs(a - b);
                    const double u = ulp_bf16(fabs(a) > fabs(b) ? a : b);
                    r_old = df / tol > r_old ? df / tol : r_old;
                    r_new = df / (tol + u) > r_new ? df / (tol + u) : r_new;
                }
            over_old += r_old > 1.0, over_new += r_new > 1.0;
            worst_old = r_old > worst_old ? r_old : worst_old;
            worst_new = r_new > worst_new ? r_new : worst_new;
        }
    }
    printf("Hq/Hkv %d/%d d %d keys %d, %d draws (seeds x split counts): max |diff| / (2 x naive): "
           "worst %.3f, > 1 in %ld draws; / (2 x naive + 1 ulp): worst %.3f, > 1 in %ld\n",
           HQ, HKV, D, SK, seeds * NS, worst_old, over_old, worst_new, over_new);
    return 0;
}
