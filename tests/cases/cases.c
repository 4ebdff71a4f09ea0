/*
 * cases.c — the op table behind tests/test_cases.c, `flashc check` and `flashc bench` (cases.h).
 *
 * Each op is one op_entry: buffer sizes, how to run each implementation, the error metric of
 * each output, FLOPs / minimal bytes / modeled traffic. The generic code below allocates, fills
 * (N(0,1) from a seeded generator), compares and frees, so an op only says what is specific.
 *
 * Error metrics (per output):
 *   ERR_ABS   max |got - ref|                 attention O (the "within 1e-5")
 *   ERR_REL1  max |got - ref| / (1 + |ref|)   LSE, row ops, softmax state: absolute near 0,
 *                                              relative for large values
 * Both: a NaN anywhere in got, or an infinity the reference does not have at the same place
 * (e.g. LSE = -inf of a fully masked row must match), is an infinite error: NaN never passes.
 * In bf16 / f16 attention O is compared ERR_REL1 too: its output rounding is relative.
 *
 * Storage dtypes (case_spec.dtype, ops with any_dtype): the random float32 inputs are rounded
 * into the dtype once (st_in) and the float32 copies dropped, so the child's RSS is that of the
 * dtype's buffers; the impls read st_in and write st_out. The reference runs in float32 on the
 * stored values widened back (exact), so it sees the same inputs as the impls.
 */
#include "cases.h"
#include "dtype.h"
#include "internal.h" /* attn_force_backend: the reference through the same entry point */
#include "traffic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_BUFS = 6 };
enum err_metric { ERR_ABS, ERR_REL1 };

struct case_data {
    case_spec s;
    const struct op_entry *op;
    uint64_t rng;
    float *in[MAX_BUFS];       /* inputs, filled with N(0,1); in bf16 / f16 NULL until the
                                  reference widens st_in into them                     */
    size_t in_n[MAX_BUFS];
    float *out[2][MAX_BUFS];   /* output slot 0 (reference) and 1 (under test)       */
    size_t out_n[MAX_BUFS];
    float *tmp[MAX_BUFS];      /* op scratch (merge partial states)                  */
    size_t tmp_n[MAX_BUFS];
    void *st_in[MAX_BUFS];     /* bf16 / f16: the inputs the impls read              */
    void *st_out[2][MAX_BUFS]; /* bf16 / f16: the outputs they write (not f32_out ones) */
    int ref_f32;               /* the reference is running: float32 buffers and dtype */
    int64_t prop_row;          /* CASE_PROP_POISON_*: the query row compared          */
};

typedef struct op_entry {
    op_desc pub;
    int n_in, n_out, n_tmp;
    unsigned f32_out;          /* any_dtype: outputs float32 in every dtype, bit i = out i */
    int roundings;             /* any_dtype: roundings into the storage dtype that can
                                  separate the output from the exact result (tolerance)   */
    enum err_metric metric[MAX_BUFS];
    void (*defaults)(case_spec *s);
    void (*sizes)(case_data *c);                  /* set in_n, out_n, tmp_n            */
    void (*post_fill)(case_data *c);              /* adjust random inputs (optional)   */
    void (*prepare)(case_data *c, int slot);      /* restore in-place inputs (optional) */
    flashc_status (*run)(case_data *c, int impl, int slot, case_stats *st);
    flashc_status (*run_reference)(case_data *c);  /* optional: default run(c, 0, 0)     */
    double (*max_err)(const case_data *c);         /* optional: default all elements     */
    double (*tol)(const case_spec *s);
    double (*flops)(const case_spec *s);
    double (*min_bytes)(const case_spec *s);
    double (*traffic)(const case_spec *s, int impl, const case_stats *st);
    void (*describe)(const case_spec *s, char *buf, size_t size);
    int (*available)(const case_data *c, int impl); /* optional: default every impl     */
} op_entry;

/* Element size in bytes of the op's tensors (LSE and softmax states are float32: 4 bytes). */
static double esize(const case_spec *s) { return (double)flashc_dtype_size(s->dtype); }

/* What an impl runs on: the dtype storage, or float32 while the reference runs. */
static flashc_dtype run_dtype(const case_data *c) { return c->ref_f32 ? FLASHC_F32 : c->s.dtype; }

static void *in_buf(const case_data *c, int i)
{
    return c->st_in[i] && !c->ref_f32 ? c->st_in[i] : (void *)c->in[i];
}

static void *out_buf(const case_data *c, int slot, int i)
{
    return c->st_out[slot][i] && !c->ref_f32 ? c->st_out[slot][i] : (void *)c->out[slot][i];
}

/* ---- random numbers: splitmix64 + Box-Muller ---------------------------------------------- */

static uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in (0, 1): never 0, so log() below is finite. */
static double rng_uniform(uint64_t *state)
{
    return ((double)(rng_next(state) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

static void fill_normal(float *x, size_t n, uint64_t *state)
{
    for (size_t i = 0; i < n; i += 2) {
        const double r = sqrt(-2.0 * log(rng_uniform(state)));
        const double t = 6.283185307179586 * rng_uniform(state);
        x[i] = (float)(r * cos(t));
        if (i + 1 < n)
            x[i + 1] = (float)(r * sin(t));
    }
}

/* fill_normal's float32 values rounded into a dt buffer, a chunk at a time (no float32 copy of
 * the buffer). The chunk length is even, so the pairs are those of one fill_normal over n. */
static void fill_normal_as(void *x, flashc_dtype dt, size_t n, uint64_t *state)
{
    enum { CHUNK = 4096 };
    float chunk[CHUNK];
    for (size_t i0 = 0; i0 < n; i0 += CHUNK) {
        const size_t m = n - i0 < CHUNK ? n - i0 : CHUNK;
        fill_normal(chunk, m, state);
        for (size_t j = 0; j < m; j++)
            dtype_store(x, dt, i0 + j, chunk[j]);
    }
}

/* ---- attention ------------------------------------------------------------------------------ */

static void attn_defaults(case_spec *s)
{
    if (!s->batch) s->batch = 1;
    if (!s->sq) s->sq = 512;
    if (!s->sk) s->sk = s->sq;
    if (!s->heads) s->heads = 1;
    if (!s->kv_heads) s->kv_heads = s->heads;
    if (!s->d) s->d = 64;
    if (!s->dv) s->dv = s->d;
    if (s->q_scale == 0.0f) s->q_scale = 1.0f;
}

static traffic_attn attn_model(const case_spec *s)
{
    traffic_attn a = {s->batch, s->sq, s->sk, s->heads, s->kv_heads, s->d, s->causal, esize(s)};
    return a;
}

/* A (B, S, H, D) view of buf; stored (B, S, H, D) or, with bhsd, (B, H, S, D). */
static flashc_tensor attn_view(void *buf, flashc_dtype dt, int64_t B, int64_t S, int64_t H,
                               int64_t D, int bhsd)
{
    flashc_tensor t = flashc_tensor_4d(buf, dt, B, S, H, D);
    if (bhsd) {
        t.stride[0] = H * S * D;
        t.stride[1] = D;
        t.stride[2] = S * D;
        t.stride[3] = 1;
    }
    return t;
}

/* Key range [lo, hi) of query row i (the contract's, flashc.h), bottom-right aligned. */
static void key_range(const case_spec *s, int64_t sq, int64_t sk, int64_t i, int64_t *lo,
                      int64_t *hi)
{
    const int64_t a = i + sk - sq;
    const int64_t wr = s->causal ? 0 : s->window_right > 0 ? s->window_right : -1;
    *lo = s->window > 0 && a - s->window > 0 ? a - s->window : 0;
    *hi = wr >= 0 ? (a + wr + 1 < sk ? (a + wr + 1 > 0 ? a + wr + 1 : 0) : sk) : sk;
}

static int is_poison(const case_spec *s)
{
    return s->prop == CASE_PROP_POISON_BIG || s->prop == CASE_PROP_POISON_NAN;
}

/* q *= q_scale (in bf16 / f16 a second rounding of q: both sides still see the same q).
 * Poison rows: tmp[0], tmp[1] = K, V with every key outside row prop_row's range poisoned. */
static void attn_post_fill(case_data *c)
{
    const case_spec *s = &c->s;
    if (s->q_scale != 1.0f)
        for (size_t i = 0; i < c->in_n[0]; i++)
            dtype_store(in_buf(c, 0), s->dtype, i,
                        dtype_load(in_buf(c, 0), s->dtype, i) * s->q_scale);
    if (!is_poison(s))
        return;
    const size_t es = flashc_dtype_size(s->dtype);
    memcpy(c->tmp[0], in_buf(c, 1), c->in_n[1] * es);
    memcpy(c->tmp[1], in_buf(c, 2), c->in_n[2] * es);
    c->prop_row = (int64_t)(rng_uniform(&c->rng) * (double)s->sq);
    int64_t lo, hi;
    key_range(s, s->sq, s->sk, c->prop_row, &lo, &hi);
    const float val = s->prop == CASE_PROP_POISON_NAN ? NAN : 1e4f;
    const flashc_tensor k = attn_view(NULL, s->dtype, s->batch, s->sk, s->kv_heads, s->d, s->bhsd);
    const flashc_tensor v = attn_view(NULL, s->dtype, s->batch, s->sk, s->kv_heads, s->dv, s->bhsd);
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t j = 0; j < s->sk; j++)
            for (int64_t h = 0; (j < lo || j >= hi) && h < s->kv_heads; h++) {
                for (int64_t d = 0; d < s->d; d++)
                    dtype_store(c->tmp[0], s->dtype,
                                (size_t)(b * k.stride[0] + j * k.stride[1] + h * k.stride[2] + d),
                                val);
                for (int64_t d = 0; d < s->dv; d++)
                    dtype_store(c->tmp[1], s->dtype,
                                (size_t)(b * v.stride[0] + j * v.stride[1] + h * v.stride[2] + d),
                                val);
            }
}

static void attn_sizes(case_data *c)
{
    const case_spec *s = &c->s;
    c->in_n[0] = (size_t)(s->batch * s->sq * s->heads * s->d);
    c->in_n[1] = (size_t)(s->batch * s->sk * s->kv_heads * s->d);
    c->in_n[2] = (size_t)(s->batch * s->sk * s->kv_heads * s->dv);
    c->out_n[0] = (size_t)(s->batch * s->sq * s->heads * s->dv);
    c->out_n[1] = (size_t)(s->batch * s->heads * s->sq);
    if (is_poison(s)) /* the poisoned K, V */
        c->tmp_n[0] = c->in_n[1], c->tmp_n[1] = c->in_n[2];
}

/* ALiBi slopes of the standard form 2^(-8 (h + 1) / H); with alibi = 2 one row per sequence,
 * (B, Hq), sequence b's slopes scaled by 1 + b / 4 (so a mix-up of rows shows). For the params
 * of one call: the tool and the tests run one case at a time. */
enum { ALIBI_MAX = 1 << 14 };
static float alibi_slopes[ALIBI_MAX];
static flashc_tensor alibi_tensor, alibi_row;

static int64_t alibi_rows(const case_spec *s) { return s->alibi == 2 ? s->batch : 1; }

static flashc_attn_params attn_params(const case_spec *s)
{
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = s->causal;
    p.block_q = s->br;
    p.block_k = s->bc;
    p.num_threads = s->threads;
    p.num_splits = s->num_splits;
    if (s->prop == CASE_PROP_ALONE) { /* the same tiles and no split in both runs */
        p.num_splits = 1;
        p.block_q = s->br ? s->br : 64;
        p.block_k = s->bc ? s->bc : 32;
    }
    if (s->window > 0)
        p.window_left = s->window;
    if (s->window > 0 || s->window_right > 0)
        p.window_right = s->window_right > 0 ? s->window_right : s->causal ? 0 : -1;
    p.softcap = s->softcap;
    if (s->alibi && alibi_rows(s) * s->heads <= ALIBI_MAX) {
        for (int64_t b = 0; b < alibi_rows(s); b++)
            for (int64_t h = 0; h < s->heads; h++)
                alibi_slopes[b * s->heads + h] =
                    (float)(pow(2.0, -8.0 * (double)(h + 1) / (double)s->heads) *
                            (1.0 + 0.25 * (double)b));
        alibi_tensor = s->alibi == 2
                           ? flashc_tensor_2d(alibi_slopes, FLASHC_F32, s->batch, s->heads)
                           : flashc_tensor_1d(alibi_slopes, FLASHC_F32, s->heads);
        p.alibi_slopes = &alibi_tensor;
    }
    return p;
}

/* The params of sequence b alone (a batch of one): its row of (B, Hq) slopes. */
static flashc_attn_params attn_params_b(const case_spec *s, int64_t b)
{
    flashc_attn_params p = attn_params(s);
    if (p.alibi_slopes && s->alibi == 2) {
        alibi_row = flashc_tensor_1d(alibi_slopes + b * s->heads, FLASHC_F32, s->heads);
        p.alibi_slopes = &alibi_row;
    }
    return p;
}

/* Query-key pairs a row range sees under the spec's mask and window (the contract's ranges). */
static double visible_pairs(const case_spec *s, int64_t sq, int64_t sk)
{
    const int64_t wr = s->causal ? 0 : s->window_right > 0 ? s->window_right : -1;
    double n = 0.0;
    for (int64_t i = 0; i < sq; i++) {
        const int64_t a = i + sk - sq;
        int64_t lo = s->window > 0 && a - s->window > 0 ? a - s->window : 0;
        int64_t hi = wr >= 0 ? (a + wr + 1 < sk ? a + wr + 1 : sk) : sk;
        if (hi > lo)
            n += (double)(hi - lo);
    }
    return n;
}

static void copy_stats(case_stats *st, const flashc_attn_stats *as)
{
    st->block_q = as->block_q;
    st->block_k = as->block_k;
    st->tile_pairs = as->tile_pairs;
}

static flashc_status attn_run(case_data *c, int impl, int slot, case_stats *st)
{
    const case_spec *s = &c->s;
    const flashc_dtype dt = run_dtype(c);
    flashc_tensor q = attn_view(in_buf(c, 0), dt, s->batch, s->sq, s->heads, s->d, s->bhsd);
    const int poisoned = is_poison(s) && slot == 1;
    flashc_tensor k = attn_view(poisoned ? (void *)c->tmp[0] : in_buf(c, 1), dt, s->batch, s->sk,
                                s->kv_heads, s->d, s->bhsd);
    flashc_tensor v = attn_view(poisoned ? (void *)c->tmp[1] : in_buf(c, 2), dt, s->batch, s->sk,
                                s->kv_heads, s->dv, s->bhsd);
    flashc_tensor o = attn_view(out_buf(c, slot, 0), dt, s->batch, s->sq, s->heads, s->dv, s->bhsd);
    flashc_tensor lse = flashc_tensor_3d(c->out[slot][1], FLASHC_F32, s->batch, s->heads, s->sq);
    flashc_attn_params p = attn_params(s);
    if (s->prop == CASE_PROP_SPLITS && slot == 0)
        p.num_splits = 1;
    flashc_attn_stats as = FLASHC_ATTN_STATS_INIT;
    flashc_status r = impl == 0   ? flashc_attn_fwd_naive(&p, &q, &k, &v, &o, &lse, &as)
                      : impl == 1 ? flashc_attn_fwd_unfused(&p, &q, &k, &v, &o, &lse, &as)
                                  : flashc_attn_fwd(&p, &q, &k, &v, &o, &lse, &as);
    copy_stats(st, &as);
    return r;
}

/* The reference into slot 0; with ref_rows in (0, Sq) only the last ref_rows query rows. That
 * sub-problem is exact: under the bottom-right causal alignment row i of the last R rows sees
 * keys j <= (i - (Sq - R)) + Sk - R, the same keys as in the full problem. */
static flashc_status attn_run_reference(case_data *c)
{
    const case_spec *s = &c->s;
    const int64_t R = s->ref_rows > 0 && s->ref_rows < s->sq ? s->ref_rows : s->sq;
    flashc_tensor q = attn_view(c->in[0], FLASHC_F32, s->batch, s->sq, s->heads, s->d, s->bhsd);
    flashc_tensor k = attn_view(c->in[1], FLASHC_F32, s->batch, s->sk, s->kv_heads, s->d, s->bhsd);
    flashc_tensor v = attn_view(c->in[2], FLASHC_F32, s->batch, s->sk, s->kv_heads, s->dv, s->bhsd);
    flashc_tensor o = attn_view(c->out[0][0], FLASHC_F32, s->batch, s->sq, s->heads, s->dv, s->bhsd);
    flashc_tensor lse = flashc_tensor_3d(c->out[0][1], FLASHC_F32, s->batch, s->heads, s->sq);
    q.data = c->in[0] + (s->sq - R) * q.stride[1], q.shape[1] = R;
    o.data = c->out[0][0] + (s->sq - R) * o.stride[1], o.shape[1] = R;
    lse.data = c->out[0][1] + (s->sq - R), lse.shape[2] = R;
    flashc_attn_params p = attn_params(s);
    return flashc_attn_fwd_naive(&p, &q, &k, &v, &o, &lse, NULL);
}

static double elem_err(float got, float ref, enum err_metric m);

/* O (absolute; relative in bf16 / f16) and LSE (relative) over the rows the reference
 * computed. */
static double attn_max_err(const case_data *c)
{
    const case_spec *s = &c->s;
    const int64_t R = s->ref_rows > 0 && s->ref_rows < s->sq ? s->ref_rows : s->sq;
    const flashc_tensor o = attn_view(NULL, FLASHC_F32, s->batch, s->sq, s->heads, s->dv, s->bhsd);
    const enum err_metric mo = s->dtype == FLASHC_F32 ? ERR_ABS : ERR_REL1;
    double worst = 0.0;
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t i = s->sq - R; i < s->sq; i++)
            for (int64_t h = 0; h < s->heads; h++) {
                const int64_t row = b * o.stride[0] + i * o.stride[1] + h * o.stride[2];
                for (int64_t d = 0; d < s->dv; d++) {
                    const double e = elem_err(c->out[1][0][row + d], c->out[0][0][row + d], mo);
                    worst = e > worst ? e : worst;
                }
                const int64_t l = (b * s->heads + h) * s->sq + i;
                const double e = elem_err(c->out[1][1][l], c->out[0][1][l], ERR_REL1);
                worst = e > worst ? e : worst;
            }
    return worst;
}

/* fp32 flash vs the float64 reference: 1e-5 (the issue) for unit-scale inputs. Scores grow
 * with q_scale, and an fp32 score carries a relative error of ~D * 2^-24, so the softmax
 * weights (and O) move by about that times |s|: the bound grows linearly with q_scale. */
static double attn_tol(const case_spec *s) { return 1e-5 * (s->q_scale > 1.0f ? s->q_scale : 1.0); }

static double attn_flops(const case_spec *s)
{
    traffic_attn a = attn_model(s);
    const double pairs = s->window > 0 || s->window_right > 0 ? visible_pairs(s, s->sq, s->sk)
                                                              : traffic_visible_pairs(&a);
    return 2.0 * (double)s->batch * (double)s->heads * (double)(s->d + s->dv) * pairs;
}

static double attn_min_bytes(const case_spec *s)
{
    return esize(s) * (double)s->batch * ((double)(s->sq * s->heads * (s->d + s->dv)) +
                                          (double)(s->sk * s->kv_heads * (s->d + s->dv))) +
           4.0 * (double)(s->batch * s->heads * s->sq);
}

static double attn_traffic(const case_spec *s, int impl, const case_stats *st)
{
    traffic_attn a = attn_model(s);
    /* the unfused baseline moves S and P like the naive one */
    return impl < 2 ? traffic_attn_naive(&a) : traffic_attn_flash(&a, st->block_q, st->block_k);
}

static void attn_describe(const case_spec *s, char *buf, size_t size)
{
    char tiles[48] = "";
    if (s->br || s->bc)
        snprintf(tiles, sizeof tiles, " tiles %lldx%lld", (long long)s->br, (long long)s->bc);
    char scale[32] = "";
    if (s->q_scale != 1.0f)
        snprintf(scale, sizeof scale, " q*%g", (double)s->q_scale);
    char mods[120] = "";
    size_t m = 0;
    if (s->dv != s->d)
        m += (size_t)snprintf(mods + m, sizeof mods - m, " Dv%lld", (long long)s->dv);
    if (s->window > 0 || s->window_right > 0)
        m += (size_t)snprintf(mods + m, sizeof mods - m, " window %lld,%lld",
                              (long long)(s->window > 0 ? s->window : -1),
                              (long long)(s->causal ? 0 : s->window_right > 0 ? s->window_right : -1));
    if (s->softcap > 0.0f)
        m += (size_t)snprintf(mods + m, sizeof mods - m, " softcap %g", (double)s->softcap);
    if (s->alibi)
        m += (size_t)snprintf(mods + m, sizeof mods - m, " alibi%s", s->alibi == 2 ? "(B,H)" : "");
    if (s->num_splits)
        snprintf(mods + m, sizeof mods - m, " splits %d", s->num_splits);
    snprintf(buf, size, "B%lld Sq%lld Sk%lld H%lld/%lld D%lld %s%s%s%s%s", (long long)s->batch,
             (long long)s->sq, (long long)s->sk, (long long)s->heads, (long long)s->kv_heads,
             (long long)s->d, s->causal ? "causal" : "full", mods, s->bhsd ? " bhsd" : "", tiles,
             scale);
}

/* ---- attention varlen: B ragged sequences packed (total, H, D) ------------------------------
 * batch = the number of sequences. With seqlens (and seqlens_k) the lengths are those lists
 * (zero-length sequences included); sq and sk become their sums. Without them sq = sk = the
 * total rows, and sequence b's length is the total times w_b / sum w, w_b = 1 + (5 b mod 7)
 * (mixed lengths, the last one takes the remainder). Causal alignment is per sequence
 * (bottom-right of each). The reference: the float64 naive on each sequence alone (the last
 * ref_rows rows of each: an exact sub-problem, as for attn). */

static int64_t varlen_len_of(const case_spec *s, const int32_t *lens, int64_t total, int64_t b)
{
    if (lens)
        return lens[b];
    int64_t wsum = 0, used = 0;
    for (int64_t i = 0; i < s->batch; i++)
        wsum += 1 + (5 * i) % 7;
    for (int64_t i = 0; i < b; i++)
        used += total * (1 + (5 * i) % 7) / wsum;
    return b == s->batch - 1 ? total - used : total * (1 + (5 * b) % 7) / wsum;
}

static int64_t varlen_len(const case_spec *s, int64_t b)
{
    return varlen_len_of(s, s->seqlens, s->sq, b);
}

static int64_t varlen_len_k(const case_spec *s, int64_t b)
{
    return s->seqlens_k ? s->seqlens_k[b] : varlen_len(s, b);
}

static void varlen_defaults(case_spec *s)
{
    if (s->seqlens) {
        s->sq = 0;
        for (int64_t b = 0; b < s->batch; b++)
            s->sq += s->seqlens[b];
        s->sk = 0;
        for (int64_t b = 0; b < s->batch; b++)
            s->sk += varlen_len_k(s, b);
    }
    attn_defaults(s);
    if (!s->seqlens)
        s->sk = s->sq;
}

enum { VARLEN_MAX_B = 1 << 16 };
static int32_t varlen_cu[VARLEN_MAX_B + 1], varlen_cuk[VARLEN_MAX_B + 1];
static flashc_tensor varlen_tcu, varlen_tcuk;

static flashc_varlen varlen_of(const case_spec *s)
{
    int64_t mx = 0, mxk = 0;
    varlen_cu[0] = varlen_cuk[0] = 0;
    for (int64_t b = 0; b < s->batch && b < VARLEN_MAX_B; b++) {
        const int64_t n = varlen_len(s, b), nk = varlen_len_k(s, b);
        varlen_cu[b + 1] = varlen_cu[b] + (int32_t)n;
        varlen_cuk[b + 1] = varlen_cuk[b] + (int32_t)nk;
        mx = n > mx ? n : mx;
        mxk = nk > mxk ? nk : mxk;
    }
    varlen_tcu = flashc_tensor_1d(varlen_cu, FLASHC_I32, s->batch + 1);
    varlen_tcuk = flashc_tensor_1d(varlen_cuk, FLASHC_I32, s->batch + 1);
    return (flashc_varlen){sizeof(flashc_varlen), &varlen_tcu, &varlen_tcuk, mx, mxk, NULL};
}

/* a[0..n) = 0..n-1 in a shuffled order (block tables: pages are not in key order). */
static void shuffled_iota(case_data *c, int32_t *a, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        a[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t r = (int64_t)(rng_uniform(&c->rng) * (double)(i + 1));
        const int32_t t = a[i];
        a[i] = a[r], a[r] = t;
    }
}

/* page_size > 0 (paged varlen, varlen.block_table): the flash run reads K / V from a copy in
 * shuffled pages of page_size rows (tmp[3], tmp[4]; table tmp[2], max_pages a sequence: the
 * first batch x max_pages of a shuffle of every page id, so one page is spare), every row that
 * holds no key NaN; the references read the packed rows. */
static int64_t varlen_max_pages(const case_spec *s)
{
    int64_t m = 1;
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t n = (varlen_len_k(s, b) + s->page_size - 1) / s->page_size;
        m = n > m ? n : m;
    }
    return m;
}

static int64_t varlen_num_pages(const case_spec *s) { return s->batch * varlen_max_pages(s) + 1; }

static void varlen_sizes(case_data *c)
{
    const case_spec *s = &c->s;
    c->in_n[0] = (size_t)(s->sq * s->heads * s->d);
    c->in_n[1] = (size_t)(s->sk * s->kv_heads * s->d);
    c->in_n[2] = (size_t)(s->sk * s->kv_heads * s->dv);
    c->out_n[0] = (size_t)(s->sq * s->heads * s->dv);
    c->out_n[1] = (size_t)(s->heads * s->sq);
    if (s->page_size) { /* float32 room: the dtype's copies fit */
        const int64_t rows = varlen_num_pages(s) * s->page_size;
        c->tmp_n[2] = (size_t)varlen_num_pages(s);
        c->tmp_n[3] = (size_t)(rows * s->kv_heads * s->d);
        c->tmp_n[4] = (size_t)(rows * s->kv_heads * s->dv);
    }
}

static void varlen_post_fill(case_data *c)
{
    attn_post_fill(c);
    const case_spec *s = &c->s;
    if (!s->page_size)
        return;
    const flashc_dtype dt = s->dtype;
    const size_t es = flashc_dtype_size(dt);
    const int64_t mp = varlen_max_pages(s), np = varlen_num_pages(s), ps = s->page_size;
    int32_t *table = (int32_t *)c->tmp[2];
    shuffled_iota(c, table, np);
    for (size_t i = 0; i < c->tmp_n[3]; i++)
        dtype_store(c->tmp[3], dt, i, NAN);
    for (size_t i = 0; i < c->tmp_n[4]; i++)
        dtype_store(c->tmp[4], dt, i, NAN);
    const int64_t rk = s->kv_heads * s->d, rv = s->kv_heads * s->dv;
    for (int64_t b = 0, k0 = 0; b < s->batch; k0 += varlen_len_k(s, b), b++)
        for (int64_t j = 0; j < varlen_len_k(s, b); j++) {
            const int64_t row = table[b * mp + j / ps] * ps + j % ps;
            memcpy((char *)c->tmp[3] + (size_t)(row * rk) * es,
                   (char *)in_buf(c, 1) + (size_t)((k0 + j) * rk) * es, (size_t)rk * es);
            memcpy((char *)c->tmp[4] + (size_t)(row * rv) * es,
                   (char *)in_buf(c, 2) + (size_t)((k0 + j) * rv) * es, (size_t)rv * es);
        }
}

static flashc_status varlen_run_alone(case_data *c, int slot);

static flashc_status varlen_run(case_data *c, int impl, int slot, case_stats *st)
{
    const case_spec *s = &c->s;
    if (s->prop == CASE_PROP_ALONE && slot == 0)
        return varlen_run_alone(c, slot);
    const flashc_dtype dt = run_dtype(c);
    flashc_tensor q = flashc_tensor_3d(in_buf(c, 0), dt, s->sq, s->heads, s->d);
    flashc_tensor k = flashc_tensor_3d(in_buf(c, 1), dt, s->sk, s->kv_heads, s->d);
    flashc_tensor v = flashc_tensor_3d(in_buf(c, 2), dt, s->sk, s->kv_heads, s->dv);
    flashc_tensor o = flashc_tensor_3d(out_buf(c, slot, 0), dt, s->sq, s->heads, s->dv);
    flashc_tensor lse = flashc_tensor_2d(c->out[slot][1], FLASHC_F32, s->heads, s->sq);
    flashc_attn_params p = attn_params(s);
    flashc_varlen vl = varlen_of(s);
    flashc_tensor table;
    if (impl == 1 && s->page_size) { /* the paged copy (varlen_post_fill) */
        const int64_t np = varlen_num_pages(s);
        table = flashc_tensor_2d(c->tmp[2], FLASHC_I32, s->batch, varlen_max_pages(s));
        k = flashc_tensor_4d(c->tmp[3], dt, np, s->page_size, s->kv_heads, s->d);
        v = flashc_tensor_4d(c->tmp[4], dt, np, s->page_size, s->kv_heads, s->dv);
        vl.block_table = &table;
    }
    flashc_attn_stats as = FLASHC_ATTN_STATS_INIT;
    if (impl == 0) /* the float64 reference through the same entry point */
        attn_force_backend("ref");
    flashc_status r = flashc_attn_varlen_fwd(&p, &vl, &q, &k, &v, &o, &lse, &as);
    attn_force_backend(NULL);
    copy_stats(st, &as);
    return r;
}

/* Rows [0, len - R) of each sequence are not compared (R = ref_rows): the reference leaves
 * them NaN, and so does this copy of the flash output. */
static int64_t varlen_ref_rows(const case_spec *s, int64_t len)
{
    return s->ref_rows > 0 && s->ref_rows < len ? s->ref_rows : len;
}

/* Each sequence alone through the dense naive (ALiBi (B, Hq) slopes: sequence b's row). */
static flashc_status varlen_run_reference(case_data *c)
{
    const case_spec *s = &c->s;
    (void)varlen_of(s);
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t r0 = varlen_cu[b], len = varlen_cu[b + 1] - r0, R = varlen_ref_rows(s, len);
        const int64_t k0 = varlen_cuk[b], lenk = varlen_cuk[b + 1] - k0;
        if (len == 0)
            continue;
        if (lenk == 0) { /* no keys: every row empty, O = 0 and LSE = -inf (the contract) */
            for (int64_t i = r0 + len - R; i < r0 + len; i++)
                for (int64_t h = 0; h < s->heads; h++) {
                    memset(c->out[0][0] + (i * s->heads + h) * s->dv, 0,
                           (size_t)s->dv * sizeof(float));
                    c->out[0][1][h * s->sq + i] = -INFINITY;
                }
            continue;
        }
        flashc_tensor q = flashc_tensor_4d(c->in[0] + (r0 + len - R) * s->heads * s->d,
                                           FLASHC_F32, 1, R, s->heads, s->d);
        flashc_tensor k = flashc_tensor_4d(c->in[1] + k0 * s->kv_heads * s->d, FLASHC_F32, 1,
                                           lenk, s->kv_heads, s->d);
        flashc_tensor v = flashc_tensor_4d(c->in[2] + k0 * s->kv_heads * s->dv, FLASHC_F32, 1,
                                           lenk, s->kv_heads, s->dv);
        flashc_tensor o = flashc_tensor_4d(c->out[0][0] + (r0 + len - R) * s->heads * s->dv,
                                           FLASHC_F32, 1, R, s->heads, s->dv);
        flashc_tensor lse = flashc_tensor_3d(c->out[0][1] + r0 + len - R, FLASHC_F32, 1, s->heads, R);
        lse.stride[1] = s->sq, lse.stride[0] = s->heads * s->sq;
        flashc_attn_params p = attn_params_b(s, b);
        const flashc_status st = flashc_attn_fwd_naive(&p, &q, &k, &v, &o, &lse, NULL);
        if (st != FLASHC_OK)
            return st;
    }
    return FLASHC_OK;
}

/* CASE_PROP_ALONE's baseline: each sequence through the dense flashc_attn_fwd (batch 1) on
 * the same storage; a sequence without keys gets the contract's empty rows (O = 0, LSE = -inf). */
static flashc_status varlen_run_alone(case_data *c, int slot)
{
    const case_spec *s = &c->s;
    const flashc_dtype dt = run_dtype(c);
    const size_t es = flashc_dtype_size(dt);
    (void)varlen_of(s);
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t r0 = varlen_cu[b], len = varlen_cu[b + 1] - r0;
        const int64_t k0 = varlen_cuk[b], lenk = varlen_cuk[b + 1] - k0;
        char *ob = (char *)out_buf(c, slot, 0) + (size_t)(r0 * s->heads * s->dv) * es;
        if (len == 0)
            continue;
        if (lenk == 0) {
            memset(ob, 0, (size_t)(len * s->heads * s->dv) * es);
            for (int64_t h = 0; h < s->heads; h++)
                for (int64_t i = r0; i < r0 + len; i++)
                    c->out[slot][1][h * s->sq + i] = -INFINITY;
            continue;
        }
        flashc_tensor q = flashc_tensor_4d((char *)in_buf(c, 0) + (size_t)(r0 * s->heads * s->d) * es,
                                           dt, 1, len, s->heads, s->d);
        flashc_tensor k = flashc_tensor_4d((char *)in_buf(c, 1) + (size_t)(k0 * s->kv_heads * s->d) * es,
                                           dt, 1, lenk, s->kv_heads, s->d);
        flashc_tensor v = flashc_tensor_4d((char *)in_buf(c, 2) + (size_t)(k0 * s->kv_heads * s->dv) * es,
                                           dt, 1, lenk, s->kv_heads, s->dv);
        flashc_tensor o = flashc_tensor_4d(ob, dt, 1, len, s->heads, s->dv);
        flashc_tensor lse = flashc_tensor_3d(c->out[slot][1] + r0, FLASHC_F32, 1, s->heads, len);
        lse.stride[1] = s->sq, lse.stride[0] = s->heads * s->sq;
        flashc_attn_params p = attn_params_b(s, b);
        const flashc_status st = flashc_attn_fwd(&p, &q, &k, &v, &o, &lse, NULL);
        if (st != FLASHC_OK)
            return st;
    }
    return FLASHC_OK;
}

/* CASE_PROP_ALONE compares the rows of the sequences a dense call can run (keys and rows >= 1)
 * on the same kernel path: the CPU forward picks its decode path by Sq (< 8), for the packed
 * call by max_seqlen_q, so a short sequence in a batch of long ones takes the other path. */
static int alone_compared(const case_spec *s, int64_t row)
{
    int64_t mx = 0;
    for (int64_t b = 0; b < s->batch; b++)
        mx = varlen_len(s, b) > mx ? varlen_len(s, b) : mx;
    for (int64_t b = 0, r0 = 0; b < s->batch; r0 += varlen_len(s, b), b++)
        if (row >= r0 && row < r0 + varlen_len(s, b))
            return varlen_len_k(s, b) > 0 && (varlen_len(s, b) < 8) == (mx < 8);
    return 0;
}

static double varlen_max_err(const case_data *c)
{
    const case_spec *s = &c->s;
    const enum err_metric mo = s->dtype == FLASHC_F32 ? ERR_ABS : ERR_REL1;
    double worst = 0.0;
    for (int64_t b = 0; b < s->batch; b++) {
        const int64_t r0 = varlen_cu[b], len = varlen_cu[b + 1] - r0, R = varlen_ref_rows(s, len);
        for (int64_t i = r0 + len - R; i < r0 + len; i++)
            for (int64_t h = 0; h < s->heads; h++) {
                for (int64_t d = 0; d < s->dv; d++) {
                    const int64_t x = (i * s->heads + h) * s->dv + d;
                    const double e = elem_err(c->out[1][0][x], c->out[0][0][x], mo);
                    worst = e > worst ? e : worst;
                }
                const double e = elem_err(c->out[1][1][h * s->sq + i], c->out[0][1][h * s->sq + i],
                                          ERR_REL1);
                worst = e > worst ? e : worst;
            }
    }
    return worst;
}

static double varlen_flops(const case_spec *s)
{
    double pairs = 0.0;
    for (int64_t b = 0; b < s->batch; b++)
        pairs += visible_pairs(s, varlen_len(s, b), varlen_len_k(s, b));
    return 2.0 * (double)s->heads * (double)(s->d + s->dv) * pairs;
}

static double varlen_min_bytes(const case_spec *s)
{
    return esize(s) * ((double)(s->sq * s->heads * (s->d + s->dv)) +
                       (double)(s->sk * s->kv_heads * (s->d + s->dv))) +
           4.0 * (double)(s->heads * s->sq);
}

static double varlen_traffic(const case_spec *s, int impl, const case_stats *st)
{
    double bytes = 0.0;
    for (int64_t b = 0; b < s->batch; b++) {
        traffic_attn a = {1, varlen_len(s, b), varlen_len_k(s, b), s->heads, s->kv_heads, s->d,
                          s->causal, esize(s)};
        bytes += impl == 0 ? traffic_attn_naive(&a) : traffic_attn_flash(&a, st->block_q, st->block_k);
    }
    return bytes;
}

static void varlen_describe(const case_spec *s, char *buf, size_t size)
{
    char base[160];
    attn_describe(s, base, sizeof base);
    char lens[96] = "";
    size_t m = 0;
    for (int64_t b = 0; b < s->batch && m < sizeof lens - 24; b++) {
        m += (size_t)snprintf(lens + m, sizeof lens - m, "%s%lld", b ? "," : "",
                              (long long)varlen_len(s, b));
        if (s->seqlens_k && m < sizeof lens - 12)
            m += (size_t)snprintf(lens + m, sizeof lens - m, "/%lld", (long long)varlen_len_k(s, b));
    }
    if (s->page_size)
        snprintf(buf, size, "varlen %s lens %s paged %lld", base, lens, (long long)s->page_size);
    else
        snprintf(buf, size, "varlen %s lens %s", base, lens);
}

/* ---- attention KV cache: sq query rows per sequence against a cache -------------------------
 * q (batch, sq, heads, d); k_cache (batch, sk, kv_heads, d), v_cache (.., dv): sk is every
 * sequence's capacity. With page_size > 0 the cache is pages of page_size rows in a shuffled
 * order (block_table). cache_lens (optional, per sequence) are the rows already there (default
 * sk - s_new); with s_new > 0, k_new / v_new (batch, s_new, kv_heads, d / dv) are appended at
 * cache_lens before attending, so the cache is an in-place input: each slot attends its own
 * copy (tmp[2..5]), restored by prepare. The rate is GB/s of the K and V bytes read (decode
 * streams the cache once); the reference is the float64 naive through the same entry point
 * (attn_force_backend). in: q, k_cache, v_cache, k_new, v_new; tmp: block table, cache_seqlens,
 * then the slots' caches. */

static int64_t kv_pages(const case_spec *s) { return (s->sk + s->page_size - 1) / s->page_size; }

static void kvcache_defaults(case_spec *s)
{
    if (!s->sq) s->sq = 1;
    if (!s->sk) s->sk = 8192;
    attn_defaults(s);
}

static int64_t kv_rows(const case_spec *s)
{
    return s->page_size ? s->batch * kv_pages(s) * s->page_size : s->batch * s->sk;
}

static void kvcache_sizes(case_data *c)
{
    const case_spec *s = &c->s;
    const int64_t rows = kv_rows(s);
    c->in_n[0] = (size_t)(s->batch * s->sq * s->heads * s->d);
    c->in_n[1] = (size_t)(rows * s->kv_heads * s->d);
    c->in_n[2] = (size_t)(rows * s->kv_heads * s->dv);
    c->in_n[3] = (size_t)(s->batch * s->s_new * s->kv_heads * s->d);
    c->in_n[4] = (size_t)(s->batch * s->s_new * s->kv_heads * s->dv);
    c->out_n[0] = (size_t)(s->batch * s->sq * s->heads * s->dv);
    c->out_n[1] = (size_t)(s->batch * s->heads * s->sq);
    c->tmp_n[0] = (size_t)(s->page_size ? s->batch * kv_pages(s) : 1); /* block table */
    c->tmp_n[1] = (size_t)s->batch;                                    /* cache_seqlens */
    if (s->s_new > 0) /* float32 room: the reference's copies are float32 */
        for (int slot = 0; slot < 2; slot++) {
            c->tmp_n[2 + 2 * slot] = c->in_n[1];
            c->tmp_n[3 + 2 * slot] = c->in_n[2];
        }
    else if (s->prop == CASE_PROP_PAGED) /* the same keys, contiguous (batch, sk, ...) */
        c->tmp_n[2] = (size_t)(s->batch * s->sk * s->kv_heads * s->d),
        c->tmp_n[3] = (size_t)(s->batch * s->sk * s->kv_heads * s->dv);
}

static void kvcache_post_fill(case_data *c)
{
    const case_spec *s = &c->s;
    int32_t *table = (int32_t *)c->tmp[0], *lens = (int32_t *)c->tmp[1];
    for (int64_t b = 0; b < s->batch; b++)
        lens[b] = (int32_t)(s->cache_lens ? s->cache_lens[b] : s->sk - s->s_new);
    if (!s->page_size)
        return;
    shuffled_iota(c, table, s->batch * kv_pages(s));
    if (s->prop != CASE_PROP_PAGED || s->s_new > 0)
        return;
    const size_t es = flashc_dtype_size(s->dtype);
    const int64_t np = kv_pages(s);
    for (int64_t b = 0; b < s->batch; b++)
        for (int64_t j = 0; j < s->sk; j++) {
            const int64_t row = (int64_t)table[b * np + j / s->page_size] * s->page_size +
                                j % s->page_size;
            memcpy((char *)c->tmp[2] + (size_t)((b * s->sk + j) * s->kv_heads * s->d) * es,
                   (char *)in_buf(c, 1) + (size_t)(row * s->kv_heads * s->d) * es,
                   (size_t)(s->kv_heads * s->d) * es);
            memcpy((char *)c->tmp[3] + (size_t)((b * s->sk + j) * s->kv_heads * s->dv) * es,
                   (char *)in_buf(c, 2) + (size_t)(row * s->kv_heads * s->dv) * es,
                   (size_t)(s->kv_heads * s->dv) * es);
        }
}

/* s_new > 0: the slot's cache starts as the pristine one (in the dtype the run uses) */
static void kvcache_prepare(case_data *c, int slot)
{
    if (c->s.s_new <= 0)
        return;
    const size_t es = flashc_dtype_size(run_dtype(c));
    memcpy(c->tmp[2 + 2 * slot], in_buf(c, 1), c->in_n[1] * es);
    memcpy(c->tmp[3 + 2 * slot], in_buf(c, 2), c->in_n[2] * es);
}

static flashc_status kvcache_run(case_data *c, int impl, int slot, case_stats *st)
{
    const case_spec *s = &c->s;
    const flashc_dtype dt = run_dtype(c);
    const int contig = s->prop == CASE_PROP_PAGED && s->s_new == 0 && slot == 0;
    const int64_t ps = contig ? 0 : s->page_size; /* the layout this run reads */
    const int64_t np = ps ? s->batch * kv_pages(s) : s->batch;
    const int64_t rows = ps ? ps : s->sk;
    void *kbuf = s->s_new > 0 ? (void *)c->tmp[2 + 2 * slot] : contig ? c->tmp[2] : in_buf(c, 1);
    void *vbuf = s->s_new > 0 ? (void *)c->tmp[3 + 2 * slot] : contig ? c->tmp[3] : in_buf(c, 2);
    flashc_tensor q = flashc_tensor_4d(in_buf(c, 0), dt, s->batch, s->sq, s->heads, s->d);
    flashc_tensor kc = flashc_tensor_4d(kbuf, dt, np, rows, s->kv_heads, s->d);
    flashc_tensor vc = flashc_tensor_4d(vbuf, dt, np, rows, s->kv_heads, s->dv);
    flashc_tensor kn = flashc_tensor_4d(in_buf(c, 3), dt, s->batch, s->s_new, s->kv_heads, s->d);
    flashc_tensor vn = flashc_tensor_4d(in_buf(c, 4), dt, s->batch, s->s_new, s->kv_heads, s->dv);
    flashc_tensor o = flashc_tensor_4d(out_buf(c, slot, 0), dt, s->batch, s->sq, s->heads, s->dv);
    flashc_tensor lse = flashc_tensor_3d(c->out[slot][1], FLASHC_F32, s->batch, s->heads, s->sq);
    flashc_tensor lens = flashc_tensor_1d(c->tmp[1], FLASHC_I32, s->batch);
    flashc_tensor table = flashc_tensor_2d(c->tmp[0], FLASHC_I32, s->batch, s->page_size ? kv_pages(s) : 1);
    flashc_kv_cache cache = {sizeof cache, &kc, &vc, &lens, ps ? &table : NULL, NULL,
                             s->s_new > 0 ? &kn : NULL, s->s_new > 0 ? &vn : NULL, NULL};
    flashc_attn_params p = attn_params(s);
    if (s->prop == CASE_PROP_SPLITS && slot == 0)
        p.num_splits = 1;
    flashc_attn_stats as = FLASHC_ATTN_STATS_INIT;
    if (impl == 0)
        attn_force_backend("ref");
    flashc_status r = flashc_attn_kvcache_fwd(&p, &cache, &q, &o, &lse, &as);
    attn_force_backend(NULL);
    copy_stats(st, &as);
    return r;
}

/* O absolute in float32, relative in bf16 / f16 (its output rounding is relative: at |o| ~ 3
 * one f16 ulp is 2e-3, above the tolerance's u in absolute terms); LSE relative. */
static double kvcache_max_err(const case_data *c)
{
    const enum err_metric mo = c->s.dtype == FLASHC_F32 ? ERR_ABS : ERR_REL1;
    double worst = 0.0;
    for (int i = 0; i < 2; i++)
        for (size_t j = 0; j < c->out_n[i]; j++) {
            const double e = elem_err(c->out[1][i][j], c->out[0][i][j], i == 0 ? mo : ERR_REL1);
            worst = e > worst ? e : worst;
        }
    return worst;
}

static double kvcache_min_bytes(const case_spec *s)
{
    return esize(s) * (double)(s->batch * s->sk * s->kv_heads * (s->d + s->dv));
}

static double kvcache_traffic(const case_spec *s, int impl, const case_stats *st)
{
    (void)st;
    const double kv = kvcache_min_bytes(s),
                 qo = esize(s) * (double)(s->batch * s->sq * s->heads * (s->d + s->dv));
    /* naive: S and P (float32) written and read once more per head */
    return impl == 0 ? kv + qo + 16.0 * (double)(s->batch * s->heads * s->sq * s->sk) : kv + qo;
}

static void kvcache_describe(const case_spec *s, char *buf, size_t size)
{
    char base[160], extra[96] = "";
    attn_describe(s, base, sizeof base);
    size_t m = 0;
    if (s->s_new > 0)
        m += (size_t)snprintf(extra + m, sizeof extra - m, " new %lld", (long long)s->s_new);
    for (int64_t b = 0; s->cache_lens && b < s->batch && m < sizeof extra - 12; b++)
        m += (size_t)snprintf(extra + m, sizeof extra - m, "%s%lld", b ? "," : " lens ",
                              (long long)s->cache_lens[b]);
    if (s->page_size)
        snprintf(buf, size, "kvcache %s paged %lld%s", base, (long long)s->page_size, extra);
    else
        snprintf(buf, size, "kvcache %s contiguous%s", base, extra);
}

/* ---- attention merge: flash over two key ranges, then flashc_attn_merge ----------------------
 * Split-KV decode's building block. impls[0] = the naive reference over all keys. Non-causal
 * only: a causal mask over a key sub-range is not the sub-range of the causal mask. */

static void merge_defaults(case_spec *s)
{
    attn_defaults(s);
    s->causal = 0;
    if (!s->split || s->split >= s->sk)
        s->split = s->sk / 2 > 0 ? s->sk / 2 : 1;
}

static void merge_sizes(case_data *c)
{
    attn_sizes(c);
    c->tmp_n[0] = c->tmp_n[2] = c->out_n[0]; /* o1, o2     */
    c->tmp_n[1] = c->tmp_n[3] = c->out_n[1]; /* lse1, lse2 */
}

static flashc_status merge_run(case_data *c, int impl, int slot, case_stats *st)
{
    if (impl == 0)
        return attn_run(c, 0, slot, st);
    const case_spec *s = &c->s;
    /* elements per key row of k and of v */
    const int64_t krow = s->bhsd ? s->d : s->kv_heads * s->d;
    const int64_t vrow = s->bhsd ? s->dv : s->kv_heads * s->dv;
    const int64_t cut[3] = {0, s->split, s->sk};
    flashc_tensor q = attn_view(c->in[0], FLASHC_F32, s->batch, s->sq, s->heads, s->d, s->bhsd);
    flashc_attn_params p = attn_params(s);
    flashc_tensor po[2], plse[2];
    for (int part = 0; part < 2; part++) {
        const int64_t len = cut[part + 1] - cut[part];
        flashc_tensor k =
            attn_view(c->in[1], FLASHC_F32, s->batch, s->sk, s->kv_heads, s->d, s->bhsd);
        flashc_tensor v =
            attn_view(c->in[2], FLASHC_F32, s->batch, s->sk, s->kv_heads, s->dv, s->bhsd);
        k.data = c->in[1] + cut[part] * krow, k.shape[1] = len;
        v.data = c->in[2] + cut[part] * vrow, v.shape[1] = len;
        po[part] =
            attn_view(c->tmp[2 * part], FLASHC_F32, s->batch, s->sq, s->heads, s->dv, s->bhsd);
        plse[part] = flashc_tensor_3d(c->tmp[2 * part + 1], FLASHC_F32, s->batch, s->heads, s->sq);
        flashc_attn_stats as = FLASHC_ATTN_STATS_INIT;
        flashc_status r = flashc_attn_fwd(&p, &q, &k, &v, &po[part], &plse[part], &as);
        if (r != FLASHC_OK)
            return r;
        copy_stats(st, &as);
    }
    flashc_tensor o =
        attn_view(c->out[slot][0], FLASHC_F32, s->batch, s->sq, s->heads, s->dv, s->bhsd);
    flashc_tensor lse = flashc_tensor_3d(c->out[slot][1], FLASHC_F32, s->batch, s->heads, s->sq);
    return flashc_attn_merge(&po[0], &plse[0], &po[1], &plse[1], &o, &lse);
}

static double merge_traffic(const case_spec *s, int impl, const case_stats *st)
{
    if (impl == 0)
        return attn_traffic(s, 0, st);
    traffic_attn a = attn_model(s);
    a.Sk = s->split;
    double bytes = traffic_attn_flash(&a, st->block_q, st->block_k);
    a.Sk = s->sk - s->split;
    bytes += traffic_attn_flash(&a, st->block_q, st->block_k);
    /* the merge reads two (O, LSE) states and writes one */
    const double state = esize(s) * (double)(s->batch * s->sq * s->heads * s->d) +
                         4.0 * (double)(s->batch * s->heads * s->sq);
    return bytes + 3.0 * state;
}

static void merge_describe(const case_spec *s, char *buf, size_t size)
{
    char base[160];
    attn_describe(s, base, sizeof base);
    snprintf(buf, size, "%s split %lld", base, (long long)s->split);
}

/* ---- attention backward: flashc_attn_bwd vs flashc_attn_bwd_naive ----------------------------
 * in: q, k, v, dO ~ N(0,1), then o and lse from the flash forward (post_fill): the activations a
 * training step saves. out: dq, dk, dv, compared |diff| / (1 + |ref|). The reference always
 * solves the full problem (dK and dV need every query row): ref_rows does not apply. */

static void bwd_sizes(case_data *c)
{
    attn_sizes(c);
    const size_t nq = c->in_n[0], nk = c->in_n[1], nv = c->in_n[2], no = c->out_n[0];
    const size_t nl = c->out_n[1];
    c->in_n[3] = no;                                      /* dO  */
    c->in_n[4] = no;                                      /* o   */
    c->in_n[5] = nl;                                      /* lse */
    c->out_n[0] = nq, c->out_n[1] = nk, c->out_n[2] = nv; /* dq, dk, dv */
}

/* The tensors of one backward call: inputs from in[] (o, lse from in[4], in[5], or from
 * tmp[0], tmp[1] when fwd_tmp: the forward+backward op), outputs from slot. */
typedef struct bwd_views {
    flashc_tensor q, k, v, o, dout, lse, dq, dk, dv;
} bwd_views;

static bwd_views bwd_views_of(case_data *c, int slot, int fwd_tmp)
{
    const case_spec *s = &c->s;
    bwd_views t;
    const flashc_dtype f = FLASHC_F32; /* the backward is float32 only */
    t.q = attn_view(c->in[0], f, s->batch, s->sq, s->heads, s->d, s->bhsd);
    t.k = attn_view(c->in[1], f, s->batch, s->sk, s->kv_heads, s->d, s->bhsd);
    t.v = attn_view(c->in[2], f, s->batch, s->sk, s->kv_heads, s->dv, s->bhsd);
    t.dout = attn_view(c->in[3], f, s->batch, s->sq, s->heads, s->dv, s->bhsd);
    t.o = attn_view(fwd_tmp ? c->tmp[0] : c->in[4], f, s->batch, s->sq, s->heads, s->dv, s->bhsd);
    t.lse = flashc_tensor_3d(fwd_tmp ? c->tmp[1] : c->in[5], FLASHC_F32, s->batch, s->heads,
                             s->sq);
    t.dq = attn_view(c->out[slot][0], f, s->batch, s->sq, s->heads, s->d, s->bhsd);
    t.dk = attn_view(c->out[slot][1], f, s->batch, s->sk, s->kv_heads, s->d, s->bhsd);
    t.dv = attn_view(c->out[slot][2], f, s->batch, s->sk, s->kv_heads, s->dv, s->bhsd);
    return t;
}

/* o and lse of the flash forward; on failure o is NaN, so every comparison fails loudly. */
static void bwd_post_fill(case_data *c)
{
    attn_post_fill(c);
    bwd_views t = bwd_views_of(c, 0, 0);
    flashc_attn_params p = attn_params(&c->s);
    if (flashc_attn_fwd(&p, &t.q, &t.k, &t.v, &t.o, &t.lse, NULL) != FLASHC_OK)
        for (size_t i = 0; i < c->in_n[4]; i++)
            c->in[4][i] = NAN;
}

static flashc_status bwd_call(bwd_views *t, int impl, const flashc_attn_params *p,
                              case_stats *st)
{
    flashc_attn_stats as = FLASHC_ATTN_STATS_INIT;
    flashc_status r =
        impl == 0 ? flashc_attn_bwd_naive(p, &t->q, &t->k, &t->v, &t->o, &t->dout, &t->lse,
                                          &t->dq, &t->dk, &t->dv, &as)
                  : flashc_attn_bwd(p, &t->q, &t->k, &t->v, &t->o, &t->dout, &t->lse, &t->dq,
                                    &t->dk, &t->dv, &as);
    copy_stats(st, &as);
    return r;
}

static flashc_status bwd_run(case_data *c, int impl, int slot, case_stats *st)
{
    bwd_views t = bwd_views_of(c, slot, 0);
    flashc_attn_params p = attn_params(&c->s);
    return bwd_call(&t, impl, &p, st);
}

/* fp32 tiles vs float64 sums: dV and dK sum Sq terms, dQ Sk terms, with random-walk growth
 * (measured: ~1e-6 at n ~ 100 with GQA, ~4e-7 at n = 2048). */
static double bwd_tol(const case_spec *s)
{
    const double n = (double)(s->sq > s->sk ? s->sq : s->sk);
    const double t = 1e-6 * sqrt(n);
    return t > 1e-5 ? t : 1e-5;
}

/* FA-2's count: the backward is 2.5 forwards (five tile products instead of two). */
static double bwd_flops(const case_spec *s) { return 2.5 * attn_flops(s); }

/* read q, k, v, o, dO, lse; write dq, dk, dv */
static double bwd_min_bytes(const case_spec *s)
{
    return esize(s) * (double)s->batch * (2.0 * (double)(s->sq * s->heads * (s->d + s->dv)) +
                                          2.0 * (double)(s->sk * s->kv_heads * (s->d + s->dv))) +
           4.0 * (double)(s->batch * s->heads * s->sq);
}

static double bwd_traffic(const case_spec *s, int impl, const case_stats *st)
{
    traffic_attn a = attn_model(s);
    return impl == 0 ? traffic_attn_bwd_naive(&a)
                     : traffic_attn_bwd_flash(&a, st->block_q, st->block_k);
}

/* ---- attention forward + backward: one training step's attention ---------------------------
 * in: q, k, v, dO; tmp: o, lse (what the forward saves); out: dq, dk, dv. naive = the naive
 * forward then the naive backward; flash = flash then flash. */

static void fwdbwd_sizes(case_data *c)
{
    bwd_sizes(c);
    c->tmp_n[0] = c->in_n[4], c->tmp_n[1] = c->in_n[5];
    c->in_n[4] = c->in_n[5] = 0;
}

static flashc_status fwdbwd_run(case_data *c, int impl, int slot, case_stats *st)
{
    bwd_views t = bwd_views_of(c, slot, 1);
    flashc_attn_params p = attn_params(&c->s);
    const flashc_status r = impl == 0
                                ? flashc_attn_fwd_naive(&p, &t.q, &t.k, &t.v, &t.o, &t.lse, NULL)
                                : flashc_attn_fwd(&p, &t.q, &t.k, &t.v, &t.o, &t.lse, NULL);
    return r != FLASHC_OK ? r : bwd_call(&t, impl, &p, st);
}

static double fwdbwd_flops(const case_spec *s) { return 3.5 * attn_flops(s); }

/* read q, k, v, dO; write dq, dk, dv */
static double fwdbwd_min_bytes(const case_spec *s)
{
    return esize(s) * (double)s->batch * ((double)(s->sq * s->heads * (2 * s->d + s->dv)) +
                                          2.0 * (double)(s->sk * s->kv_heads * (s->d + s->dv)));
}

/* the forward's model plus the backward's (the flash forward counted at the backward's tiles) */
static double fwdbwd_traffic(const case_spec *s, int impl, const case_stats *st)
{
    return attn_traffic(s, impl, st) + bwd_traffic(s, impl, st);
}

/* ---- online softmax: each row a stream, consumed in three chunks, states merged --------------
 * impls[0] = a two-pass float64 softmax (max, then sum of exp); "online" = one pass per chunk
 * with flashc_online_softmax, chunks combined by flashc_softmax_state_merge. Every 7th entry is
 * -inf (masked), and a row of width 1 is a single element. out: m (rows), l (rows). */

static void rows_defaults(case_spec *s)
{
    if (!s->rows) s->rows = 4096;
    if (!s->width) s->width = 1024;
}

static void swiglu_defaults(case_spec *s)
{
    if (!s->rows) s->rows = 4096;
    if (!s->width) s->width = 3072;
}

static void softmax_sizes(case_data *c)
{
    c->in_n[0] = (size_t)(c->s.rows * c->s.width);
    c->out_n[0] = c->out_n[1] = (size_t)c->s.rows;
}

static void softmax_post_fill(case_data *c)
{
    for (size_t i = 6; i < c->in_n[0]; i += 7)
        c->in[0][i] = -INFINITY;
}

static flashc_status softmax_run(case_data *c, int impl, int slot, case_stats *st)
{
    const int64_t W = c->s.width;
    float *m = c->out[slot][0], *l = c->out[slot][1];
    for (int64_t r = 0; r < c->s.rows; r++) {
        const float *x = c->in[0] + r * W;
        if (impl == 0) {
            double mx = -INFINITY, sum = 0.0;
            for (int64_t i = 0; i < W; i++)
                mx = x[i] > mx ? x[i] : mx;
            for (int64_t i = 0; mx > -INFINITY && i < W; i++)
                sum += exp((double)x[i] - mx);
            m[r] = (float)mx;
            l[r] = (float)sum;
            continue;
        }
        /* chunk boundaries vary per row: (r * 7919) mod W and (r * 104729) mod W, sorted */
        int64_t a = (r * 7919) % W, b = (r * 104729) % W;
        if (a > b) {
            const int64_t t = a;
            a = b, b = t;
        }
        const int64_t cut[4] = {0, a, b, W};
        flashc_softmax_state acc = flashc_softmax_state_init();
        for (int part = 0; part < 3; part++) {
            flashc_softmax_state ps = flashc_softmax_state_init();
            flashc_status rc = flashc_online_softmax(&ps, x + cut[part], cut[part + 1] - cut[part]);
            if (rc != FLASHC_OK)
                return rc;
            acc = flashc_softmax_state_merge(acc, ps);
        }
        m[r] = acc.m;
        l[r] = acc.l;
    }
    (void)st;
    return FLASHC_OK;
}

/* l sums W terms in float32: the rounding errors behave like a random walk, ~sqrt(W) * 2^-24
 * relative (the worst case, W * 2^-24, needs adversarial inputs); 4x that, at least 1e-5. */
static double softmax_tol(const case_spec *s)
{
    const double w = 4.0 * sqrt((double)s->width) * 5.96e-8;
    return w > 1e-5 ? w : 1e-5;
}

static double softmax_min_bytes(const case_spec *s)
{
    return esize(s) * (double)(s->rows * s->width) + 2.0 * 4.0 * (double)s->rows;
}

/* two-pass: x read twice (max, then sum); online: once */
static double softmax_traffic(const case_spec *s, int impl, const case_stats *st)
{
    (void)st;
    return (impl == 0 ? 2.0 : 1.0) * esize(s) * (double)(s->rows * s->width) +
           8.0 * (double)s->rows;
}

static void rows_describe(const case_spec *s, char *buf, size_t size)
{
    snprintf(buf, size, "T%lld x %lld", (long long)s->rows, (long long)s->width);
}

/* ---- RMSNorm (plain and residual) ------------------------------------------------------------ */

static const float RMS_EPS = 1e-6f;

static void rms_sizes(case_data *c)
{
    const size_t td = (size_t)(c->s.rows * c->s.width);
    c->in_n[0] = td;                    /* x                                  */
    c->in_n[1] = (size_t)c->s.width;    /* w                                  */
    c->out_n[0] = td;                   /* y                                  */
}

static void rmsres_sizes(case_data *c)
{
    rms_sizes(c);
    c->in_n[2] = c->in_n[0];            /* r                                  */
    c->out_n[1] = c->in_n[0];           /* x + r, written back into x         */
}

static flashc_status rms_run(case_data *c, int impl, int slot, case_stats *st)
{
    (void)st;
    const int64_t T = c->s.rows, D = c->s.width;
    const flashc_dtype dt = run_dtype(c);
    flashc_tensor x = flashc_tensor_2d(in_buf(c, 0), dt, T, D);
    flashc_tensor w = flashc_tensor_1d(in_buf(c, 1), dt, D);
    flashc_tensor y = flashc_tensor_2d(out_buf(c, slot, 0), dt, T, D);
    return impl == 0 ? flashc_rmsnorm_naive(&x, &w, RMS_EPS, &y) : flashc_rmsnorm(&x, &w, RMS_EPS, &y);
}

/* The residual variant writes x: each slot has its own x (out[slot][1]), reset from the
 * pristine input before every call. */
static void rmsres_prepare(case_data *c, int slot)
{
    memcpy(out_buf(c, slot, 1), in_buf(c, 0), c->in_n[0] * flashc_dtype_size(run_dtype(c)));
}

static flashc_status rmsres_run(case_data *c, int impl, int slot, case_stats *st)
{
    (void)st;
    const int64_t T = c->s.rows, D = c->s.width;
    const flashc_dtype dt = run_dtype(c);
    flashc_tensor x = flashc_tensor_2d(out_buf(c, slot, 1), dt, T, D);
    flashc_tensor r = flashc_tensor_2d(in_buf(c, 2), dt, T, D);
    flashc_tensor w = flashc_tensor_1d(in_buf(c, 1), dt, D);
    flashc_tensor y = flashc_tensor_2d(out_buf(c, slot, 0), dt, T, D);
    return impl == 0 ? flashc_rmsnorm_residual_naive(&x, &r, &w, RMS_EPS, &y)
                     : flashc_rmsnorm_residual(&x, &r, &w, RMS_EPS, &y);
}

/* fp32 sum of D squares vs a float64 one, then one multiply: a few ulps of |y|. */
static double rows_tol(const case_spec *s)
{
    (void)s;
    return 1e-5;
}

static double rms_min_bytes(const case_spec *s)
{
    return esize(s) * (2.0 * (double)(s->rows * s->width) + (double)s->width);
}

static double rmsres_min_bytes(const case_spec *s)
{
    return esize(s) * (4.0 * (double)(s->rows * s->width) + (double)s->width);
}

static double rms_traffic(const case_spec *s, int impl, const case_stats *st)
{
    (void)st;
    return traffic_rmsnorm(s->rows, s->width, esize(s), impl != 0, 0);
}

static double rmsres_traffic(const case_spec *s, int impl, const case_stats *st)
{
    (void)st;
    return traffic_rmsnorm(s->rows, s->width, esize(s), impl != 0, 1);
}

/* ---- SwiGLU -------------------------------------------------------------------------------- */

static void swiglu_sizes(case_data *c)
{
    c->in_n[0] = (size_t)(c->s.rows * 2 * c->s.width); /* gu (T, 2I) */
    c->out_n[0] = (size_t)(c->s.rows * c->s.width);    /* out (T, I) */
}

static flashc_status swiglu_run(case_data *c, int impl, int slot, case_stats *st)
{
    (void)st;
    const int64_t T = c->s.rows, I = c->s.width;
    const flashc_dtype dt = run_dtype(c);
    flashc_tensor gu = flashc_tensor_2d(in_buf(c, 0), dt, T, 2 * I);
    flashc_tensor out = flashc_tensor_2d(out_buf(c, slot, 0), dt, T, I);
    return impl == 0 ? flashc_swiglu_naive(&gu, &out) : flashc_swiglu(&gu, &out);
}

static double swiglu_min_bytes(const case_spec *s)
{
    return esize(s) * 3.0 * (double)(s->rows * s->width);
}

static double swiglu_traffic(const case_spec *s, int impl, const case_stats *st)
{
    (void)st;
    return traffic_swiglu(s->rows, s->width, esize(s), impl != 0);
}

static double no_flops(const case_spec *s)
{
    (void)s;
    return 0.0;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const op_entry op_attn = {
    .pub = {.name = "attn",
            .summary = "attention forward: naive (float64, S, P materialised), unfused (S, P "
                       "materialised on the SIMD kernels) vs flash (tiled, online softmax)",
            .impls = {"naive", "unfused", "flash"}, .n_impls = 3, .any_dtype = 1},
    .n_in = 3, .n_out = 2, .n_tmp = 2, .metric = {ERR_ABS, ERR_REL1}, /* q k v -> o lse */
    .f32_out = 1u << 1, .roundings = 1, /* O rounded once on the store; LSE float32 */
    .defaults = attn_defaults, .sizes = attn_sizes, .post_fill = attn_post_fill,
    .run = attn_run, .run_reference = attn_run_reference, .max_err = attn_max_err,
    .tol = attn_tol, .flops = attn_flops, .min_bytes = attn_min_bytes, .traffic = attn_traffic,
    .describe = attn_describe,
};

static const op_entry op_attn_varlen = {
    .pub = {.name = "attn_varlen",
            .summary = "varlen forward (--batch sequences of mixed lengths, --n rows in all; "
                       "--page-size > 0: K / V in shuffled pages) vs the naive on each sequence",
            .impls = {"naive", "flash"}, .n_impls = 2, .any_dtype = 1},
    .n_in = 3, .n_out = 2, .n_tmp = 5, .metric = {ERR_ABS, ERR_REL1}, .f32_out = 1u << 1,
    .roundings = 1, .defaults = varlen_defaults, .sizes = varlen_sizes,
    .post_fill = varlen_post_fill,
    .run = varlen_run, .run_reference = varlen_run_reference, .max_err = varlen_max_err,
    .tol = attn_tol, .flops = varlen_flops, .min_bytes = varlen_min_bytes,
    .traffic = varlen_traffic, .describe = varlen_describe,
};

static const op_entry op_attn_kvcache = {
    .pub = {.name = "attn_kvcache",
            .summary = "decode against a KV cache (--cache-len keys, --page-size 0 = contiguous): "
                       "GB/s of K + V",
            .impls = {"naive", "flash"}, .n_impls = 2, .any_dtype = 1},
    .n_in = 5, .n_out = 2, .n_tmp = 6, .metric = {ERR_ABS, ERR_REL1}, .f32_out = 1u << 1,
    .roundings = 1,
    .defaults = kvcache_defaults, .sizes = kvcache_sizes, .post_fill = kvcache_post_fill,
    .prepare = kvcache_prepare, .run = kvcache_run, .max_err = kvcache_max_err, .tol = attn_tol, .flops = no_flops, .min_bytes = kvcache_min_bytes,
    .traffic = kvcache_traffic, .describe = kvcache_describe,
};

static const op_entry op_merge = {
    .pub = {.name = "attn_merge",
            .summary = "flash over two key ranges + flashc_attn_merge vs naive over all keys",
            .impls = {"naive", "merge"}, .n_impls = 2},
    .n_in = 3, .n_out = 2, .n_tmp = 4, .metric = {ERR_ABS, ERR_REL1},
    .defaults = merge_defaults, .sizes = merge_sizes, .post_fill = attn_post_fill,
    .run = merge_run, .run_reference = attn_run_reference, .max_err = attn_max_err,
    .tol = attn_tol, .flops = attn_flops, .min_bytes = attn_min_bytes, .traffic = merge_traffic,
    .describe = merge_describe,
};

static const op_entry op_attn_bwd = {
    .pub = {.name = "attn_bwd",
            .summary = "attention backward: naive (P, dS materialised) vs flash (P recomputed "
                       "from the LSE)",
            .impls = {"naive", "flash"}, .n_impls = 2},
    /* q k v dO o lse -> dq dk dv */
    .n_in = 6, .n_out = 3, .metric = {ERR_REL1, ERR_REL1, ERR_REL1},
    .defaults = attn_defaults, .sizes = bwd_sizes, .post_fill = bwd_post_fill, .run = bwd_run,
    .tol = bwd_tol, .flops = bwd_flops, .min_bytes = bwd_min_bytes, .traffic = bwd_traffic,
    .describe = attn_describe,
};

static const op_entry op_attn_fwdbwd = {
    .pub = {.name = "attn_fwdbwd",
            .summary = "attention forward + backward (a training step): naive vs flash",
            .impls = {"naive", "flash"}, .n_impls = 2},
    .n_in = 4, .n_out = 3, .n_tmp = 2, .metric = {ERR_REL1, ERR_REL1, ERR_REL1},
    .defaults = attn_defaults, .sizes = fwdbwd_sizes, .post_fill = attn_post_fill,
    .run = fwdbwd_run, .tol = bwd_tol, .flops = fwdbwd_flops, .min_bytes = fwdbwd_min_bytes,
    .traffic = fwdbwd_traffic, .describe = attn_describe,
};

static const op_entry op_softmax = {
    .pub = {.name = "softmax",
            .summary = "online softmax in three chunks + state merge vs two-pass float64",
            .impls = {"naive", "online"}, .n_impls = 2},
    .n_in = 1, .n_out = 2, .metric = {ERR_REL1, ERR_REL1}, /* x -> m l */
    .defaults = rows_defaults, .sizes = softmax_sizes, .post_fill = softmax_post_fill,
    .run = softmax_run, .tol = softmax_tol, .flops = no_flops, .min_bytes = softmax_min_bytes,
    .traffic = softmax_traffic, .describe = rows_describe,
};

static const op_entry op_rmsnorm = {
    .pub = {.name = "rmsnorm", .summary = "RMSNorm (T, D): naive ((T, D) temporaries) vs fused",
            .impls = {"naive", "fused"}, .n_impls = 2, .any_dtype = 1},
    .n_in = 2, .n_out = 1, .metric = {ERR_REL1}, /* x w -> y */
    .roundings = 1, /* y rounded once */
    .defaults = rows_defaults, .sizes = rms_sizes, .run = rms_run, .tol = rows_tol,
    .flops = no_flops, .min_bytes = rms_min_bytes, .traffic = rms_traffic,
    .describe = rows_describe,
};

static const op_entry op_rmsnorm_res = {
    .pub = {.name = "rmsnorm_res",
            .summary = "residual add + RMSNorm (x <- x + r, y = rmsnorm(x)): naive vs fused",
            .impls = {"naive", "fused"}, .n_impls = 2, .any_dtype = 1},
    .n_in = 3, .n_out = 2, .metric = {ERR_REL1, ERR_REL1}, /* x w r -> y, x + r */
    /* y normalises the stored (rounded) x + r: that rounding moves each element and the
     * row's rstd by <= u each, then y is rounded: 3 roundings (x + r itself: 1) */
    .roundings = 3,
    .defaults = rows_defaults, .sizes = rmsres_sizes, .prepare = rmsres_prepare,
    .run = rmsres_run, .tol = rows_tol, .flops = no_flops, .min_bytes = rmsres_min_bytes,
    .traffic = rmsres_traffic, .describe = rows_describe,
};

static const op_entry op_swiglu = {
    .pub = {.name = "swiglu",
            .summary = "SwiGLU on gu (T, 2I) -> (T, I): naive (copies g, u) vs fused (reads the view)",
            .impls = {"naive", "fused"}, .n_impls = 2, .any_dtype = 1},
    .n_in = 1, .n_out = 1, .metric = {ERR_REL1}, /* gu -> out */
    .roundings = 1, /* out rounded once */
    .defaults = swiglu_defaults, .sizes = swiglu_sizes, .run = swiglu_run, .tol = rows_tol,
    .flops = no_flops, .min_bytes = swiglu_min_bytes, .traffic = swiglu_traffic,
    .describe = rows_describe,
};

const op_desc *const cases_ops[] = {&op_attn.pub,       &op_attn_varlen.pub, &op_attn_kvcache.pub,
                                    &op_merge.pub,       &op_attn_bwd.pub,
                                    &op_attn_fwdbwd.pub, &op_softmax.pub,     &op_rmsnorm.pub,
                                    &op_rmsnorm_res.pub, &op_swiglu.pub};
const int cases_n_ops = (int)(sizeof cases_ops / sizeof cases_ops[0]);

/* op_desc is the first member of op_entry. */
static const op_entry *entry_of(const op_desc *d) { return (const op_entry *)(const void *)d; }

const op_desc *cases_find_op(const char *name)
{
    for (int i = 0; i < cases_n_ops; i++)
        if (strcmp(cases_ops[i]->name, name) == 0)
            return cases_ops[i];
    return NULL;
}

int cases_find_impl(const op_desc *op, const char *name)
{
    for (int i = 0; i < op->n_impls; i++)
        if (strcmp(op->impls[i], name) == 0)
            return i;
    return -1;
}

/* ---- generic parts -------------------------------------------------------------------------- */

static const op_entry *entry_for(const case_spec *s)
{
    const op_desc *d = cases_find_op(s->op);
    return d ? entry_of(d) : NULL;
}

void case_spec_defaults(case_spec *s)
{
    const op_entry *e = entry_for(s);
    if (e)
        e->defaults(s);
}

void case_describe(const case_spec *s, char *buf, size_t size)
{
    const op_entry *e = entry_for(s);
    if (!e) {
        snprintf(buf, size, "?");
        return;
    }
    static const char *const props[] = {"", "poison 1e4 == clean", "poison NaN == clean",
                                        "splits n == 1", "paged == contiguous",
                                        "packed == alone"};
    e->describe(s, buf, size);
    size_t used = strlen(buf);
    if (s->dtype != FLASHC_F32 && used < size)
        used += (size_t)snprintf(buf + used, size - used, " %s", dtype_name(s->dtype));
    if (s->prop > 0 && s->prop <= CASE_PROP_ALONE && used < size)
        snprintf(buf + used, size - used, " [%s]", props[s->prop]);
}

/* 64-byte aligned (cache lines, any vector width), sizes rounded up as aligned_alloc wants. */
static void *alloc_elems(size_t n, size_t elem)
{
    const size_t bytes = ((n ? n : 1) * elem + 63) / 64 * 64;
    return aligned_alloc(64, bytes);
}

static float *alloc_floats(size_t n) { return alloc_elems(n, sizeof(float)); }

case_data *case_create(const case_spec *spec, uint64_t seed, char *err, size_t err_size)
{
    const op_entry *e = entry_for(spec);
    if (!e) {
        snprintf(err, err_size, "unknown op '%s'", spec->op ? spec->op : "(null)");
        return NULL;
    }
    case_data *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, err_size, "out of memory");
        return NULL;
    }
    c->s = *spec;
    e->defaults(&c->s);
    c->op = e;
    if (c->s.dtype != FLASHC_F32 && (!e->pub.any_dtype || !flashc_dtype_size(c->s.dtype))) {
        snprintf(err, err_size, "op %s runs float32 only (dtype %s)", e->pub.name,
                 dtype_name(c->s.dtype));
        free(c);
        return NULL;
    }
    c->rng = seed;
    e->sizes(c);
    /* bf16 / f16: the inputs exist only in the dtype (rounded once as they are drawn), so the
     * child's RSS is the dtype's; the float32 copies for the reference come later. Every
     * output an impl writes is in the dtype too, except f32_out ones (LSE). */
    const flashc_dtype dt = c->s.dtype;
    const size_t es = flashc_dtype_size(dt);
    int ok = 1;
    for (int i = 0; i < e->n_in; i++)
        ok &= (dt == FLASHC_F32 ? (void *)(c->in[i] = alloc_floats(c->in_n[i]))
                                : (c->st_in[i] = alloc_elems(c->in_n[i], es))) != NULL;
    for (int slot = 0; slot < 2; slot++)
        for (int i = 0; i < e->n_out; i++) {
            ok &= (c->out[slot][i] = alloc_floats(c->out_n[i])) != NULL;
            if (dt != FLASHC_F32 && !(e->f32_out & (1u << i)))
                ok &= (c->st_out[slot][i] = alloc_elems(c->out_n[i], es)) != NULL;
        }
    for (int i = 0; i < e->n_tmp; i++)
        ok &= (c->tmp[i] = alloc_floats(c->tmp_n[i])) != NULL;
    if (!ok) {
        case_destroy(c);
        snprintf(err, err_size, "cannot allocate the inputs and outputs");
        return NULL;
    }
    for (int i = 0; i < e->n_in; i++)
        fill_normal_as(in_buf(c, i), dt, c->in_n[i], &c->rng);
    /* Slot 1 starts as NaN: an element an implementation forgets to write fails the compare
     * (slot 0 is set in case_run_reference, after the bench has read the RSS). */
    for (int i = 0; i < e->n_out; i++)
        for (size_t j = 0; j < c->out_n[i]; j++)
            dtype_store(out_buf(c, 1, i), c->st_out[1][i] ? dt : FLASHC_F32, j, NAN);
    if (e->post_fill)
        e->post_fill(c);
    return c;
}

void case_destroy(case_data *c)
{
    if (!c)
        return;
    for (int i = 0; i < MAX_BUFS; i++) {
        free(c->in[i]);
        free(c->out[0][i]);
        free(c->out[1][i]);
        free(c->tmp[i]);
        free(c->st_in[i]);
        free(c->st_out[0][i]);
        free(c->st_out[1][i]);
    }
    free(c);
}

void case_prepare(case_data *c, int slot)
{
    if (c->op->prepare)
        c->op->prepare(c, slot);
}

flashc_status case_run(case_data *c, int impl, int slot, case_stats *stats)
{
    case_stats local = {0};
    return c->op->run(c, impl, slot, stats ? stats : &local);
}

flashc_status case_run_reference(case_data *c)
{
    /* bf16 / f16: the float32 inputs are the stored values widened (exact), made only now so
     * that the impls' runs (and their RSS) never see them */
    if (c->s.prop) { /* a property row: the default kernel's baseline run is slot 0 */
        for (int i = 0; i < c->op->n_out; i++)
            for (size_t j = 0; j < c->out_n[i]; j++)
                dtype_store(out_buf(c, 0, i), c->st_out[0][i] ? c->s.dtype : FLASHC_F32, j, NAN);
        case_prepare(c, 0);
        case_stats local = {0};
        return c->op->run(c, c->op->pub.n_impls - 1, 0, &local);
    }
    for (int i = 0; i < c->op->n_in; i++)
        if (c->st_in[i] && !c->in[i]) {
            if (!(c->in[i] = alloc_floats(c->in_n[i])))
                return FLASHC_ERR_OUT_OF_MEMORY; /* the bench reports the status */
            for (size_t j = 0; j < c->in_n[i]; j++)
                c->in[i][j] = dtype_load(c->st_in[i], c->s.dtype, j);
        }
    for (int i = 0; i < c->op->n_out; i++) /* NaN: what the reference skips fails the compare */
        for (size_t j = 0; j < c->out_n[i]; j++)
            c->out[0][i][j] = NAN;
    c->ref_f32 = 1;
    case_prepare(c, 0);
    flashc_status r;
    if (c->op->run_reference) {
        r = c->op->run_reference(c);
    } else {
        case_stats local = {0};
        r = c->op->run(c, 0, 0, &local);
    }
    c->ref_f32 = 0;
    return r;
}

static double elem_err(float got, float ref, enum err_metric m)
{
    if (isnan(got) || isnan(ref))
        return INFINITY;
    if (isinf(ref) || isinf(got))
        return got == ref ? 0.0 : INFINITY;
    const double d = fabs((double)got - (double)ref);
    return m == ERR_ABS ? d : d / (1.0 + fabs((double)ref));
}

/* Property rows: bit-identical (0) or not (+inf) over what is compared (poison: row prop_row
 * of every batch and head; else everything); a NaN never passes. CASE_PROP_SPLITS: the op's
 * metric. */
static double prop_err(const case_data *c)
{
    const case_spec *s = &c->s;
    int64_t i0 = 0, i1 = s->sq;
    if (is_poison(s))
        i0 = c->prop_row, i1 = c->prop_row + 1;
    for (int i = 0; i < c->op->n_out; i++)
        for (size_t j = 0; j < c->out_n[i]; j++) {
            if (s->prop == CASE_PROP_ALONE) { /* o (total, Hq, Dv), lse (Hq, total) */
                const int64_t row = i == 0 ? (int64_t)j / (s->heads * s->dv) : (int64_t)j % s->sq;
                if (!alone_compared(s, row))
                    continue;
            }
            if (is_poison(s)) { /* o (B, Sq, Hq, Dv) or its bhsd view; lse (B, Hq, Sq) */
                int64_t row;
                if (i == 0) {
                    const int64_t per = s->dv;
                    const int64_t e = (int64_t)j / per;
                    row = s->bhsd ? e % s->sq : e / s->heads % s->sq;
                } else {
                    row = (int64_t)j % s->sq;
                }
                if (row < i0 || row >= i1)
                    continue;
            }
            const float a = c->out[1][i][j], b = c->out[0][i][j];
            if (isnan(a) || memcmp(&a, &b, sizeof a) != 0)
                return INFINITY;
        }
    return 0.0;
}

double case_max_err(case_data *c)
{
    for (int slot = c->s.prop ? 0 : 1; slot < 2; slot++) /* dtype outputs as float32 (exact) */
        for (int i = 0; i < c->op->n_out; i++)
            if (c->st_out[slot][i])
                for (size_t j = 0; j < c->out_n[i]; j++)
                    c->out[slot][i][j] = dtype_load(c->st_out[slot][i], c->s.dtype, j);
    if (c->s.prop && c->s.prop != CASE_PROP_SPLITS)
        return prop_err(c);
    if (c->op->max_err)
        return c->op->max_err(c);
    double worst = 0.0;
    for (int i = 0; i < c->op->n_out; i++)
        for (size_t j = 0; j < c->out_n[i]; j++) {
            const double e = elem_err(c->out[1][i][j], c->out[0][i][j], c->op->metric[i]);
            if (e > worst)
                worst = e;
        }
    return worst;
}

uint64_t case_inputs_hash(const case_data *c)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over the bytes */
    const size_t es = flashc_dtype_size(c->s.dtype);
    for (int i = 0; i < c->op->n_in; i++) {
        const unsigned char *b = c->st_in[i] ? c->st_in[i] : (const void *)c->in[i];
        for (size_t j = 0; j < c->in_n[i] * es; j++)
            h = (h ^ b[j]) * 0x100000001b3ull;
    }
    return h;
}

/* bf16 / f16: before its final rounding(s) an impl's result is within the op's float32
 * tolerance t of the float32 reference (it computes in float32 on the same values), and each
 * rounding into the dtype moves it by at most u |result| (round to nearest even: u = 2^-8
 * bf16, 2^-11 f16). In the |diff| / (1 + |ref|) metric that is at most k u (1 + t) + t for k
 * roundings: tol = k u + 2 t. bf16's u = 3.9e-3 dwarfs the float32 part, as it should. */
double case_default_tol(const case_spec *s)
{
    const op_entry *e = entry_for(s);
    if (!e)
        return 0.0;
    if (s->prop && s->prop != CASE_PROP_SPLITS)
        return 0.0; /* bit-identical */
    const double t = e->tol(s);
    return s->dtype == FLASHC_F32 ? t : e->roundings * dtype_unit_roundoff(s->dtype) + 2.0 * t;
}

double case_flops(const case_spec *s)
{
    const op_entry *e = entry_for(s);
    return e ? e->flops(s) : 0.0;
}

double case_min_bytes(const case_spec *s)
{
    const op_entry *e = entry_for(s);
    return e ? e->min_bytes(s) : 0.0;
}

double case_traffic(const case_spec *s, int impl, const case_stats *st)
{
    const op_entry *e = entry_for(s);
    return e ? e->traffic(s, impl, st) : 0.0;
}

int case_impl_available(const case_data *c, int impl)
{
    return c->op->available ? c->op->available(c, impl) : impl >= 0 && impl < c->op->pub.n_impls;
}
