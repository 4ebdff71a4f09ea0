/* traffic.c — the seeds' memory-traffic model (formulas in traffic.h and docs/traffic.md). */
#include "traffic.h"

int64_t traffic_key_end(const traffic_attn *a, int64_t i)
{
    if (!a->causal)
        return a->Sk;
    int64_t e = i + 1 + a->Sk - a->Sq;
    return e < 0 ? 0 : e < a->Sk ? e : a->Sk;
}

double traffic_visible_pairs(const traffic_attn *a)
{
    double pairs = 0.0;
    for (int64_t i = 0; i < a->Sq; i++)
        pairs += (double)traffic_key_end(a, i);
    return pairs;
}

/* The library clamps tiles to the sequence; so does the model. */
static void clamp_tiles(const traffic_attn *a, int64_t *br, int64_t *bc)
{
    if (*br > a->Sq)
        *br = a->Sq;
    if (*bc > a->Sk)
        *bc = a->Sk;
}

double traffic_attn_naive(const traffic_attn *a)
{
    const double Sq = (double)a->Sq, Sk = (double)a->Sk, D = (double)a->D;
    const double per_head = a->e * (2.0 * Sq * D + 2.0 * Sk * D) + 5.0 * a->e * Sq * Sk + 4.0 * Sq;
    return per_head * (double)a->B * (double)a->Hq;
}

double traffic_attn_flash(const traffic_attn *a, int64_t br, int64_t bc)
{
    clamp_tiles(a, &br, &bc);
    const double D = (double)a->D;
    double kv_rows = 0.0;
    for (int64_t i0 = 0; i0 < a->Sq; i0 += br) {
        const int64_t last = i0 + br < a->Sq ? i0 + br - 1 : a->Sq - 1;
        const int64_t kend = traffic_key_end(a, last);
        if (kend <= 0)
            continue;
        const int64_t streamed = (kend + bc - 1) / bc * bc;
        kv_rows += (double)(streamed < a->Sk ? streamed : a->Sk);
    }
    const double per_head =
        a->e * (double)a->Sq * D + 2.0 * a->e * D * kv_rows + a->e * (double)a->Sq * D +
        4.0 * (double)a->Sq;
    return per_head * (double)a->B * (double)a->Hq;
}

double traffic_attn_bwd_naive(const traffic_attn *a)
{
    const double Sq = (double)a->Sq, Sk = (double)a->Sk, D = (double)a->D;
    const double per_head = a->e * (4.0 * Sq * D + 4.0 * Sk * D) + 7.0 * a->e * Sq * Sk;
    return per_head * (double)a->B * (double)a->Hq;
}

double traffic_attn_bwd_flash(const traffic_attn *a, int64_t br, int64_t bc)
{
    clamp_tiles(a, &br, &bc);
    const double D = (double)a->D;
    double pair_rows = 0.0; /* sum over visited (Q block, K block) pairs of the Q block's rows */
    for (int64_t i0 = 0; i0 < a->Sq; i0 += br) {
        const int64_t rows = i0 + br < a->Sq ? br : a->Sq - i0;
        const int64_t kend = traffic_key_end(a, i0 + rows - 1);
        pair_rows += (double)rows * (double)((kend + bc - 1) / bc);
    }
    const double per_head = 2.0 * a->e * (double)a->Sq * D + 4.0 * (double)a->Sq +
                            4.0 * a->e * (double)a->Sk * D + pair_rows * (4.0 * a->e * D + 8.0);
    return per_head * (double)a->B * (double)a->Hq;
}

double traffic_rmsnorm(int64_t T, int64_t D, double e, int fused, int residual)
{
    const double passes = fused ? (residual ? 4.0 : 2.0) : (residual ? 8.0 : 5.0);
    return passes * e * (double)T * (double)D;
}

double traffic_swiglu(int64_t T, int64_t I, double e, int fused)
{
    return (fused ? 3.0 : 5.0) * e * (double)T * (double)I;
}
