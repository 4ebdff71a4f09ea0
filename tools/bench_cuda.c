/* bench_cuda.c — `flashc bench --device cuda` (see bench_cuda.h). */
#include "bench_cuda.h"

#include "traffic.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

const char bench_cuda_op_names[] = "attn,rmsnorm,rmsnorm_bwd,swiglu,swiglu_bwd,rope,copy";

#ifndef FLASHC_CLI_CUDA

int bench_cuda_run(const bench_cuda_opts *o, report_meta *meta)
{
    (void)o, (void)meta;
    fprintf(stderr, "flashc bench --device cuda: this flashc was built without the CUDA backend "
                    "(configure with nvcc available and -DFLASHC_CUDA=ON)\n");
    return 2;
}

#else

#include "cuda/bench_cuda_kernels.h"

#include <stdlib.h>

enum { MAX_ROWS = 160 };
static const double MiB = 1048576.0, GiB = 1073741824.0;

typedef struct run_ctx {
    const bench_cuda_opts *o;
    bench_result *rows;
    int n;
    int bad;
} run_ctx;

static int in_list(const char *list, const char *name)
{
    const size_t len = strlen(name);
    for (const char *c = list; *c;) {
        const char *comma = strchr(c, ',');
        const size_t clen = comma ? (size_t)(comma - c) : strlen(c);
        if (clen == len && strncmp(c, name, len) == 0)
            return 1;
        c += clen + (comma ? 1 : 0);
    }
    return 0;
}

static int wants(const bench_cuda_opts *o, const char *op)
{
    return in_list(o->ops, "all") || in_list(o->ops, op);
}

static const char *dt_name(flashc_dtype dt)
{
    return dt == FLASHC_BF16 ? "bf16" : dt == FLASHC_F16 ? "f16" : "f32";
}

static bench_result *new_row(run_ctx *c, const char *op, const char *impl, int impl_index,
                             const char *shape, flashc_dtype dt, int64_t n, int64_t d)
{
    if (c->n >= MAX_ROWS)
        return NULL;
    bench_result *r = &c->rows[c->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->impl, sizeof r->impl, "%s", impl);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    snprintf(r->dtype, sizeof r->dtype, "%s", dt_name(dt));
    r->impl_index = impl_index, r->n = n, r->d = d;
    r->max_err = -1.0, r->gflops = -1.0, r->gbps = -1.0;
    fprintf(stderr, "[%d] %s %s %s ... ", c->n, op, impl, shape);
    return r;
}

static void row_failed(run_ctx *c, bench_result *r, const char *what, const char *why)
{
    r->failed = 1;
    snprintf(r->error, sizeof r->error, "%s: %s", what, why);
    fprintf(stderr, "FAILED: %s\n", r->error);
    c->bad = 1;
}

/* A row that cannot fit: not a failure, the exercise's point. failed = 2 (report.c prints the
 * message alone). */
static void row_oom(bench_result *r, double need, const char *detail)
{
    r->failed = 2;
    snprintf(r->error, sizeof r->error, "OOM: needs %.1f GiB (%s; %.1f GiB free)", need / GiB,
             detail, (double)bcu_free_bytes() / GiB);
    fprintf(stderr, "%s\n", r->error);
}

static void row_done(bench_result *r)
{
    char err[32] = "reference";
    if (r->max_err >= 0.0)
        snprintf(err, sizeof err, "err %.1e", r->max_err);
    fprintf(stderr, "%.3f ms median of %d, %s\n", r->ms, r->reps, err);
}

/* Reps: the option, fewer for long calls (a first call over 0.5 s: 3). */
static int timed(run_ctx *c, bench_result *r, int (*fn)(void *), void *ctx)
{
    int reps = (int)c->o->reps, warm = (int)c->o->warmup;
    double med = 0.0, mn = 0.0;
    if (bcu_time(fn, ctx, 0, 1, &med, &mn) != 0) /* a probe: also the first warm-up */
        return -1;
    if (med > 500.0)
        reps = reps < 3 ? reps : 3, warm = 0;
    if (bcu_time(fn, ctx, warm > 0 ? warm - 1 : 0, reps, &med, &mn) != 0)
        return -1;
    r->reps = reps, r->warmup = warm, r->ms = med, r->ms_min = mn;
    return 0;
}

static flashc_tensor dev4(void *p, flashc_dtype dt, int64_t a, int64_t b, int64_t c, int64_t d)
{
    flashc_tensor t = flashc_tensor_4d(p, dt, a, b, c, d);
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

static flashc_tensor dev2(void *p, flashc_dtype dt, int64_t a, int64_t b)
{
    flashc_tensor t = flashc_tensor_2d(p, dt, a, b);
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

static flashc_tensor dev1(void *p, flashc_dtype dt, int64_t a)
{
    flashc_tensor t = flashc_tensor_1d(p, dt, a);
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

/* Frees every non-NULL pointer of the list. */
static void free_all(void **p, int n)
{
    for (int i = 0; i < n; i++)
        bcu_free(p[i]), p[i] = NULL;
}

/* ---- attention ------------------------------------------------------------------------------ */

typedef struct attn_ctx {
    bcu_attn a;
    flashc_tensor q, k, v, o, lse;
    flashc_attn_params p;
    flashc_attn_stats st;
} attn_ctx;

static int run_attn_naive(void *x) { return bcu_attn_naive(&((attn_ctx *)x)->a); }

static int run_attn_flash(void *x)
{
    attn_ctx *c = x;
    const flashc_status s = flashc_attn_fwd(&c->p, &c->q, &c->k, &c->v, &c->o, &c->lse, &c->st);
    return s == FLASHC_OK ? 0 : -1;
}

static void bench_attn(run_ctx *c, int64_t N, int64_t D)
{
    const bench_cuda_opts *o = c->o;
    const flashc_dtype dt = o->dt;
    const int64_t B = o->batch, H = o->heads;
    const double e = 2.0, qb = (double)(B * N * H * D) * e, lseb = (double)(B * H * N) * 4.0;
    const double sp = (double)(H * N) * (double)N * e; /* S or P of one batch entry */
    char shape[160];
    snprintf(shape, sizeof shape, "B%lld S%lld H%lld D%lld %s %s", (long long)B, (long long)N,
             (long long)H, (long long)D, o->causal ? "causal" : "full", dt_name(dt));
    traffic_attn tm = {B, N, N, H, H, D, o->causal, e};
    const double flops = 4.0 * (double)B * (double)H * (double)D * traffic_visible_pairs(&tm);
    void *buf[8] = {0}; /* q k v o_naive o_flash lse S P */
    const size_t base0 = bcu_current();
    /* the inputs and both outputs: shared by the rows */
    const double io = 5.0 * qb + lseb;
    if (io > (double)bcu_free_bytes() * 0.95) {
        bench_result *r = new_row(c, "attn", "naive", 0, shape, dt, N, D);
        if (r)
            row_oom(r, io + 2.0 * sp, "q, k, v, o and S, P");
        r = new_row(c, "attn", "flash", 1, shape, dt, N, D);
        if (r)
            row_oom(r, io, "q, k, v and o");
        return;
    }
    for (int i = 0; i < 6; i++) {
        const double bytes = i == 5 ? lseb : qb;
        if (!(buf[i] = bcu_alloc((size_t)bytes))) {
            bench_result *r = new_row(c, "attn", "flash", 1, shape, dt, N, D);
            if (r)
                row_oom(r, io, "q, k, v and o");
            free_all(buf, 8);
            return;
        }
    }
    for (int i = 0; i < 3; i++)
        if (bcu_fill_normal(buf[i], (int)dt, (size_t)(B * N * H * D), o->seed + 7 * (uint64_t)i + (uint64_t)N, 1.0f) != 0) {
            fprintf(stderr, "fill: %s\n", bcu_error());
            c->bad = 1;
            free_all(buf, 8);
            return;
        }
    const size_t inputs = bcu_current() - base0;
    attn_ctx ac;
    memset(&ac, 0, sizeof ac);
    ac.a.dtype = (int)dt, ac.a.B = B, ac.a.Sq = N, ac.a.Sk = N, ac.a.H = H, ac.a.D = D;
    ac.a.scale = (float)(1.0 / sqrt((double)D)), ac.a.causal = o->causal;
    ac.a.q = buf[0], ac.a.k = buf[1], ac.a.v = buf[2], ac.a.o = buf[3];
    ac.q = dev4(buf[0], dt, B, N, H, D), ac.k = dev4(buf[1], dt, B, N, H, D);
    ac.v = dev4(buf[2], dt, B, N, H, D), ac.o = dev4(buf[4], dt, B, N, H, D);
    ac.lse = flashc_tensor_3d(buf[5], FLASHC_F32, B, H, N);
    ac.lse.device = FLASHC_DEVICE_CUDA;
    ac.p = flashc_attn_params_default();
    ac.p.causal = o->causal;
    const flashc_attn_stats init = FLASHC_ATTN_STATS_INIT;
    ac.st = init;

    /* naive: S and P (one batch entry's worth, reused across the batch) */
    bench_result *rn = new_row(c, "attn", "naive", 0, shape, dt, N, D);
    int naive_ok = 0;
    if (rn) {
        if (2.0 * sp > (double)bcu_free_bytes() * 0.95 || !(buf[6] = bcu_alloc((size_t)sp)) ||
            !(buf[7] = bcu_alloc((size_t)sp))) {
            bcu_free(buf[6]), buf[6] = NULL;
            row_oom(rn, (double)inputs + 2.0 * sp, "q, k, v, o and S, P");
        } else {
            ac.a.S = buf[6], ac.a.P = buf[7];
            if (timed(c, rn, run_attn_naive, &ac) != 0) {
                row_failed(c, rn, "naive", bcu_error());
            } else {
                naive_ok = 1;
                rn->peak_mib = 2.0 * sp / MiB; /* beyond inputs and outputs */
                rn->rss_mib = (double)(bcu_current() - base0) / MiB;
                rn->gflops = flops / (rn->ms * 1e-3) * 1e-9;
                rn->traffic_mib = traffic_attn_naive(&tm) / MiB;
                row_done(rn);
            }
            bcu_free(buf[6]), bcu_free(buf[7]), buf[6] = buf[7] = NULL;
        }
    }
    bench_result *rf = new_row(c, "attn", "flash", 1, shape, dt, N, D);
    if (rf) {
        bcu_reset_peak();
        const size_t before = bcu_current(), free0 = bcu_free_bytes();
        if (timed(c, rf, run_attn_flash, &ac) != 0) {
            row_failed(c, rf, "flash", flashc_last_error()[0] ? flashc_last_error() : bcu_error());
        } else {
            /* the library allocates no device memory: the tool's allocator would not see it, so
             * cudaMemGetInfo checks that free memory did not move */
            const double lib = (double)free0 - (double)bcu_free_bytes();
            rf->peak_mib = (double)(bcu_peak() - before) / MiB + (lib > 0 ? lib / MiB : 0.0);
            rf->rss_mib = (double)(bcu_current() - base0) / MiB;
            rf->gflops = flops / (rf->ms * 1e-3) * 1e-9;
            rf->block_q = ac.st.block_q, rf->block_k = ac.st.block_k;
            rf->tile_pairs = ac.st.tile_pairs;
            rf->traffic_mib = traffic_attn_flash(&tm, ac.st.block_q, ac.st.block_k) / MiB;
            if (naive_ok) {
                double err = 0.0;
                if (bcu_max_rel_err(buf[4], buf[3], (int)dt, (size_t)(B * N * H * D), &err) == 0)
                    rf->max_err = err;
                rf->tol = dt == FLASHC_BF16 ? 0x1p-8 * 4 : 0x1p-11 * 4;
                if (!(rf->max_err <= rf->tol)) {
                    fprintf(stderr, "    flash vs naive: max_err %.3g above %.3g\n", rf->max_err, rf->tol);
                    c->bad = 1;
                }
                rf->speedup = rn->ms / rf->ms;
                rf->mem_ratio = rf->peak_mib > 0 ? rn->peak_mib / rf->peak_mib : INFINITY;
                rf->rss_ratio = rn->rss_mib / rf->rss_mib;
            }
            row_done(rf);
        }
    }
    free_all(buf, 8);
}

/* ---- row ops ------------------------------------------------------------------------------ */

typedef struct rows_ctx {
    flashc_dtype dt;
    int64_t T, D;
    float eps;
    void *x, *w, *y, *tmp, *dy, *dx, *dw, *g, *u, *a;
    float *ms;
    flashc_tensor tx, tw, ty, tdy, tdx, tdw;
    /* rope */
    flashc_rope_params rp;
    flashc_tensor tq, tk, tc, ts;
    /* copy */
    void *src, *dst;
    size_t bytes;
} rows_ctx;

static int run_rms_naive(void *x)
{
    rows_ctx *c = x;
    return bcu_rmsnorm_naive((int)c->dt, c->T, c->D, c->x, c->w, c->eps, c->tmp, c->ms, c->y);
}
static int run_rms_fused(void *x)
{
    rows_ctx *c = x;
    return flashc_rmsnorm(&c->tx, &c->tw, c->eps, &c->ty) == FLASHC_OK ? 0 : -1;
}
static int run_rms_bwd(void *x)
{
    rows_ctx *c = x;
    return flashc_rmsnorm_bwd(&c->tx, &c->tw, &c->tdy, NULL, c->eps, &c->tdx, &c->tdw) == FLASHC_OK ? 0 : -1;
}
static int run_rms_res(void *x)
{
    rows_ctx *c = x;
    /* x <- x + dy (dy stands in for the residual), y = rmsnorm(x) */
    return flashc_rmsnorm_residual(&c->tx, &c->tdy, &c->tw, c->eps, &c->ty) == FLASHC_OK ? 0 : -1;
}
static int run_swiglu_naive(void *x)
{
    rows_ctx *c = x;
    return bcu_swiglu_naive((int)c->dt, c->T, c->D, c->x, c->g, c->u, c->a, c->y);
}
static int run_swiglu_fused(void *x)
{
    rows_ctx *c = x;
    return flashc_swiglu(&c->tx, &c->ty) == FLASHC_OK ? 0 : -1;
}
static int run_swiglu_bwd(void *x)
{
    rows_ctx *c = x;
    return flashc_swiglu_bwd(&c->tx, &c->tdy, &c->tdx) == FLASHC_OK ? 0 : -1;
}
static int run_rope(void *x)
{
    rows_ctx *c = x;
    return flashc_rope(&c->rp, &c->tq, &c->tk, &c->tc, &c->ts) == FLASHC_OK ? 0 : -1;
}
static int run_copy(void *x)
{
    rows_ctx *c = x;
    return bcu_copy(c->dst, c->src, c->bytes);
}

static const char *lib_or_tool_error(void)
{
    return flashc_last_error()[0] ? flashc_last_error() : bcu_error();
}

/* Allocates n buffers of the given bytes, NULL-terminating on failure: 0 or -1. */
static int alloc_list(void **out[], const double *bytes, int n)
{
    for (int i = 0; i < n; i++)
        if (!(*out[i] = bcu_alloc((size_t)bytes[i])))
            return -1;
    return 0;
}

/* One measured row of a row op; min_bytes for GB/s, traffic from the model. */
static void measure_row(run_ctx *c, bench_result *r, int (*fn)(void *), rows_ctx *x,
                        double min_bytes, double traffic, size_t base, double extra)
{
    bcu_reset_peak();
    if (timed(c, r, fn, x) != 0) {
        row_failed(c, r, r->impl, lib_or_tool_error());
        return;
    }
    r->gbps = min_bytes / (r->ms * 1e-3) * 1e-9;
    r->traffic_mib = traffic / MiB;
    r->peak_mib = extra / MiB;
    r->rss_mib = (double)(bcu_peak() - base) / MiB;
    row_done(r);
}

static void compare(run_ctx *c, bench_result *naive, bench_result *fused, const void *a,
                    const void *b, flashc_dtype dt, size_t n)
{
    if (naive->failed || fused->failed)
        return;
    double err = 0.0;
    if (bcu_max_rel_err(a, b, (int)dt, n, &err) == 0)
        fused->max_err = err;
    fused->tol = dt == FLASHC_BF16 ? 0x1p-8 * 3 : dt == FLASHC_F16 ? 0x1p-11 * 3 : 1e-5;
    if (!(fused->max_err <= fused->tol)) {
        fprintf(stderr, "    %s fused vs naive: max_err %.3g above %.3g\n", fused->op, fused->max_err,
                fused->tol);
        c->bad = 1;
    }
    fused->speedup = naive->ms / fused->ms;
    fused->mem_ratio = fused->peak_mib > 0 ? naive->peak_mib / fused->peak_mib : INFINITY;
    fused->rss_ratio = naive->rss_mib / fused->rss_mib;
}

static void bench_rmsnorm(run_ctx *c)
{
    const bench_cuda_opts *o = c->o;
    rows_ctx x;
    memset(&x, 0, sizeof x);
    x.dt = o->dt, x.T = o->tokens, x.D = o->hidden, x.eps = 1e-6f;
    const double e = (double)flashc_dtype_size(x.dt), td = (double)(x.T * x.D) * e;
    char shape[96];
    snprintf(shape, sizeof shape, "T%lld x %lld %s", (long long)x.T, (long long)x.D, dt_name(x.dt));
    const size_t base = bcu_current();
    void *yn = NULL;
    void **bufs[] = {&x.x, &x.w, &x.y, &yn, &x.tmp, (void **)&x.ms, &x.dy, &x.dx, &x.dw};
    const double sizes[] = {td, (double)x.D * e, td, td, td, (double)x.T * 4.0, td, td, (double)x.D * e};
    if (alloc_list(bufs, sizes, 9) != 0) {
        bench_result *r = new_row(c, "rmsnorm", "naive", 0, shape, x.dt, x.T, x.D);
        if (r)
            row_oom(r, 6.0 * td, "x, y (x2), sq, dy, dx");
        goto out;
    }
    bcu_fill_normal(x.x, (int)x.dt, (size_t)(x.T * x.D), o->seed + 101, 1.0f);
    bcu_fill_normal(x.w, (int)x.dt, (size_t)x.D, o->seed + 102, 1.0f);
    bcu_fill_normal(x.dy, (int)x.dt, (size_t)(x.T * x.D), o->seed + 103, 1.0f);
    x.tx = dev2(x.x, x.dt, x.T, x.D), x.tw = dev1(x.w, x.dt, x.D), x.ty = dev2(x.y, x.dt, x.T, x.D);
    x.tdy = dev2(x.dy, x.dt, x.T, x.D), x.tdx = dev2(x.dx, x.dt, x.T, x.D), x.tdw = dev1(x.dw, x.dt, x.D);
    if (wants(o, "rmsnorm")) {
        void *keep = x.y;
        x.y = yn; /* the naive output goes to its own buffer */
        bench_result *rn = new_row(c, "rmsnorm", "naive", 0, shape, x.dt, x.T, x.D);
        if (rn)
            measure_row(c, rn, run_rms_naive, &x, 2.0 * td + (double)x.D * e,
                        traffic_rmsnorm(x.T, x.D, e, 0, 0), base, td + (double)x.T * 4.0);
        x.y = keep;
        bench_result *rf = new_row(c, "rmsnorm", "fused", 1, shape, x.dt, x.T, x.D);
        if (rf) {
            measure_row(c, rf, run_rms_fused, &x, 2.0 * td + (double)x.D * e,
                        traffic_rmsnorm(x.T, x.D, e, 1, 0), base, 0.0);
            if (rn)
                compare(c, rn, rf, x.y, yn, x.dt, (size_t)(x.T * x.D));
        }
        /* the residual variant: reads x and r, writes x and y (runs last: it changes x) */
        bench_result *rr = new_row(c, "rmsnorm_res", "fused", 1, shape, x.dt, x.T, x.D);
        if (rr)
            measure_row(c, rr, run_rms_res, &x, 4.0 * td + (double)x.D * e,
                        4.0 * td + (double)x.D * e, base, 0.0);
    }
    if (wants(o, "rmsnorm_bwd")) {
        bench_result *rb = new_row(c, "rmsnorm_bwd", "fused", 1, shape, x.dt, x.T, x.D);
        /* reads x, dy, w and writes dx, dw once; the G x D float32 dw partials the library
         * takes from its CUDA scratch pool are not in this allocator's peak */
        if (rb)
            measure_row(c, rb, run_rms_bwd, &x, 3.0 * td + 2.0 * (double)x.D * e,
                        3.0 * td + 2.0 * (double)x.D * e, base, 0.0);
    }
out:;
    void *all[9] = {x.x, x.w, x.y, yn, x.tmp, x.ms, x.dy, x.dx, x.dw};
    free_all(all, 9);
}

static void bench_swiglu(run_ctx *c)
{
    const bench_cuda_opts *o = c->o;
    rows_ctx x;
    memset(&x, 0, sizeof x);
    x.dt = o->dt, x.T = o->tokens, x.D = o->inter;
    const double e = (double)flashc_dtype_size(x.dt), ti = (double)(x.T * x.D) * e;
    char shape[96];
    snprintf(shape, sizeof shape, "T%lld x I%lld %s", (long long)x.T, (long long)x.D, dt_name(x.dt));
    const size_t base = bcu_current();
    void *yn = NULL;
    void **bufs[] = {&x.x, &x.y, &yn, &x.g, &x.u, &x.a, &x.dy, &x.dx};
    const double sizes[] = {2 * ti, ti, ti, ti, ti, ti, ti, 2 * ti};
    if (alloc_list(bufs, sizes, 8) != 0) {
        bench_result *r = new_row(c, "swiglu", "naive", 0, shape, x.dt, x.T, x.D);
        if (r)
            row_oom(r, 10.0 * ti, "gu, out (x2), g, u, a, dout, dgu");
        goto out;
    }
    bcu_fill_normal(x.x, (int)x.dt, (size_t)(2 * x.T * x.D), o->seed + 201, 2.0f);
    bcu_fill_normal(x.dy, (int)x.dt, (size_t)(x.T * x.D), o->seed + 202, 1.0f);
    x.tx = dev2(x.x, x.dt, x.T, 2 * x.D), x.ty = dev2(x.y, x.dt, x.T, x.D);
    x.tdy = dev2(x.dy, x.dt, x.T, x.D), x.tdx = dev2(x.dx, x.dt, x.T, 2 * x.D);
    if (wants(o, "swiglu")) {
        void *keep = x.y;
        x.y = yn;
        bench_result *rn = new_row(c, "swiglu", "naive", 0, shape, x.dt, x.T, x.D);
        if (rn)
            measure_row(c, rn, run_swiglu_naive, &x, 3.0 * ti, traffic_swiglu(x.T, x.D, e, 0), base,
                        3.0 * ti);
        x.y = keep;
        bench_result *rf = new_row(c, "swiglu", "fused", 1, shape, x.dt, x.T, x.D);
        if (rf) {
            measure_row(c, rf, run_swiglu_fused, &x, 3.0 * ti, traffic_swiglu(x.T, x.D, e, 1), base,
                        0.0);
            if (rn)
                compare(c, rn, rf, x.y, yn, x.dt, (size_t)(x.T * x.D));
        }
    }
    if (wants(o, "swiglu_bwd")) {
        bench_result *rb = new_row(c, "swiglu_bwd", "fused", 1, shape, x.dt, x.T, x.D);
        if (rb) /* reads gu, dout; writes dgu */
            measure_row(c, rb, run_swiglu_bwd, &x, 5.0 * ti, 5.0 * ti, base, 0.0);
    }
out:;
    void *all[8] = {x.x, x.y, yn, x.g, x.u, x.a, x.dy, x.dx};
    free_all(all, 8);
}

/* RoPE on q (1, T, 32, 128) and k (1, T, 8, 128), NeoX style, cos/sin tables (T, 64) float32:
 * a Llama-3-8B layer's shapes. */
static void bench_rope(run_ctx *c)
{
    const bench_cuda_opts *o = c->o;
    rows_ctx x;
    memset(&x, 0, sizeof x);
    x.dt = o->dt, x.T = o->tokens;
    const int64_t Hq = 32, Hk = 8, D = 128;
    const double e = (double)flashc_dtype_size(x.dt);
    const double qb = (double)(x.T * Hq * D) * e, kb = (double)(x.T * Hk * D) * e;
    const double tb = (double)(x.T * D / 2) * 4.0;
    char shape[96];
    snprintf(shape, sizeof shape, "T%lld q 32x128 k 8x128 neox %s", (long long)x.T, dt_name(x.dt));
    const size_t base = bcu_current();
    void *q = NULL, *k = NULL, *cs = NULL, *sn = NULL;
    void **bufs[] = {&q, &k, &cs, &sn};
    const double sizes[] = {qb, kb, tb, tb};
    bench_result *r = new_row(c, "rope", "fused", 1, shape, x.dt, x.T, D);
    if (!r)
        return;
    if (alloc_list(bufs, sizes, 4) != 0) {
        row_oom(r, qb + kb + 2 * tb, "q, k, cos, sin");
    } else {
        bcu_fill_normal(q, (int)x.dt, (size_t)(x.T * Hq * D), o->seed + 301, 1.0f);
        bcu_fill_normal(k, (int)x.dt, (size_t)(x.T * Hk * D), o->seed + 302, 1.0f);
        bcu_fill_normal(cs, FLASHC_F32, (size_t)(x.T * D / 2), o->seed + 303, 0.5f);
        bcu_fill_normal(sn, FLASHC_F32, (size_t)(x.T * D / 2), o->seed + 304, 0.5f);
        memset(&x.rp, 0, sizeof x.rp);
        x.rp.struct_size = sizeof x.rp;
        x.rp.style = FLASHC_ROPE_NEOX;
        x.tq = dev4(q, x.dt, 1, x.T, Hq, D), x.tk = dev4(k, x.dt, 1, x.T, Hk, D);
        x.tc = dev2(cs, FLASHC_F32, x.T, D / 2), x.ts = dev2(sn, FLASHC_F32, x.T, D / 2);
        /* q and k read and written once; the tables (read once per token) counted too */
        measure_row(c, r, run_rope, &x, 2.0 * (qb + kb), 2.0 * (qb + kb) + 2.0 * tb, base, 0.0);
    }
    void *all[4] = {q, k, cs, sn};
    free_all(all, 4);
}

/* The bandwidth ceiling: a device-to-device copy of 1 GiB (2 GiB moved). */
static void bench_copy(run_ctx *c)
{
    rows_ctx x;
    memset(&x, 0, sizeof x);
    x.bytes = (size_t)1 << 30;
    bench_result *r = new_row(c, "copy", "cudaMemcpy", 1, "1 GiB device to device", FLASHC_BF16,
                              (int64_t)(x.bytes >> 20), 0);
    if (!r)
        return;
    const size_t base = bcu_current();
    if (!(x.src = bcu_alloc(x.bytes)) || !(x.dst = bcu_alloc(x.bytes))) {
        row_oom(r, 2.0 * (double)x.bytes, "two buffers");
    } else {
        bcu_fill_normal(x.src, FLASHC_F32, x.bytes / 4, c->o->seed + 401, 1.0f);
        measure_row(c, r, run_copy, &x, 2.0 * (double)x.bytes, 2.0 * (double)x.bytes, base, 0.0);
        snprintf(r->dtype, sizeof r->dtype, "-");
    }
    bcu_free(x.src), bcu_free(x.dst);
}

int bench_cuda_run(const bench_cuda_opts *o, report_meta *meta)
{
    char name[160];
    size_t total = 0;
    if (!flashc_cuda_available() || bcu_init(name, sizeof name, &total) != 0) {
        fprintf(stderr, "flashc bench --device cuda: no usable CUDA device (%s)\n",
                flashc_cuda_available() ? bcu_error() : "flashc_cuda_available() = 0");
        return 2;
    }
    snprintf(meta->machine, sizeof meta->machine, "%s", name);
    bench_result *rows = calloc(MAX_ROWS, sizeof *rows);
    if (!rows)
        return 1;
    run_ctx c = {o, rows, 0, 0};
    if (wants(o, "attn")) {
        if (o->dt == FLASHC_F32) {
            fprintf(stderr, "flashc bench --device cuda: attention runs in bf16 or f16 on the GPU "
                            "(--dtype bf16|f16)\n");
            free(rows);
            return 2;
        }
        for (int j = 0; j < o->d.n; j++)
            for (int i = 0; i < o->n.n; i++)
                bench_attn(&c, o->n.v[i], o->d.v[j]);
    }
    if (wants(o, "rmsnorm") || wants(o, "rmsnorm_bwd"))
        bench_rmsnorm(&c);
    if (wants(o, "swiglu") || wants(o, "swiglu_bwd"))
        bench_swiglu(&c);
    if (wants(o, "rope"))
        bench_rope(&c);
    if (wants(o, "copy"))
        bench_copy(&c);

    report_note(meta, "device: %s; %.0f GiB; times = CUDA events around each call on the default "
                      "stream, median of `reps` after warm-up",
                name, (double)total / GiB);
    report_note(meta, "attention: batch %lld, %lld heads (kv heads = heads), %s; naive = S = q k^T "
                      "(cuBLAS), P = softmax(S) (one kernel), o = P v (cuBLAS), S and P in device "
                      "memory in the storage dtype; flash = flashc_attn_fwd",
                (long long)o->batch, (long long)o->heads, o->causal ? "causal" : "non-causal");
    report_note(meta, "peak MiB = device memory a call needs beyond its inputs and outputs (the "
                      "tool's counting allocator; cudaMemGetInfo checked for the library's calls); "
                      "RSS MiB column = the case's measured device peak, inputs included");
    report_note(meta, "row ops: RMSNorm T = %lld, D = %lld; SwiGLU T = %lld, I = %lld; RoPE T = %lld "
                      "(q 32 x 128, k 8 x 128); naive = separate kernels with (T, D) temporaries",
                (long long)o->tokens, (long long)o->hidden, (long long)o->tokens,
                (long long)o->inter, (long long)o->tokens);
    report_note(meta, "GB/s = minimal bytes (inputs read once, outputs written once) / t; "
                      "traffic MiB = the model of docs/traffic.md; max_err = max |fused - naive| / "
                      "(1 + |naive|)");
    /* fused rows as a fraction of the copy ceiling */
    const bench_result *cp = NULL;
    for (int i = 0; i < c.n; i++)
        if (strcmp(rows[i].op, "copy") == 0 && !rows[i].failed)
            cp = &rows[i];
    if (cp) {
        char list[240] = "";
        size_t used = 0;
        for (int i = 0; i < c.n && used < sizeof list; i++) {
            const bench_result *x = &rows[i];
            if (x->failed || x->gbps < 0 || x->impl_index == 0 || x == cp)
                continue;
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s %s %.0f%%",
                                     used ? ", " : "", x->op, x->impl, 100.0 * x->gbps / cp->gbps);
        }
        report_note(meta, "of the copy ceiling (%.0f GB/s): %s", cp->gbps, list);
    }
    report_write(stdout, o->format, meta, rows, c.n);
    const int bad = c.bad;
    free(rows);
    return bad ? 1 : 0;
}

#endif /* FLASHC_CLI_CUDA */
