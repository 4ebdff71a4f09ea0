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

enum { MAX_ROWS = 160, MAX_JOBS = 32, MAX_KEEP = 64, MAX_ROUNDS = BENCH_CUDA_MAX_ROUNDS };
static const double MiB = 1048576.0, GiB = 1073741824.0;

/* Perf mode (--calls N > 1): a row op's or copy's timing, run after every case is set up. */
typedef struct timed_job {
    bench_result *r, *naive; /* naive: the row it is compared with (speedup), or NULL */
    int (*fn)(void *);
    void *ctx;
    double bytes;            /* minimal bytes a call moves                            */
    double ms[MAX_ROUNDS];   /* ms a call, one a round                                */
} timed_job;

typedef struct run_ctx {
    const bench_cuda_opts *o;
    bench_result *rows;
    int n;
    int bad;
    timed_job *jobs; /* perf mode only: NULL otherwise */
    int n_jobs;
    void *keep_dev[MAX_KEEP], *keep_host[MAX_KEEP]; /* freed at the end (perf mode: after the timing) */
    int n_dev, n_host;
} run_ctx;

static int perf_mode(const run_ctx *c) { return c->jobs != NULL; }

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

/* A case's host context, freed at the end of the run (perf mode times it after the set-up). */
static rows_ctx *new_ctx(run_ctx *c)
{
    if (c->n_host >= MAX_KEEP)
        return NULL;
    rows_ctx *x = calloc(1, sizeof *x);
    if (x)
        c->keep_host[c->n_host++] = x;
    return x;
}

/* A case's device buffers: freed now, or (perf mode) after the timing. */
static void release(run_ctx *c, void **p, int n)
{
    for (int i = 0; i < n; i++) {
        if (!p[i])
            continue;
        if (perf_mode(c) && c->n_dev < MAX_KEEP)
            c->keep_dev[c->n_dev++] = p[i];
        else
            bcu_free(p[i]);
        p[i] = NULL;
    }
}

/* One measured row of a row op; min_bytes for GB/s, traffic from the model. Perf mode: one
 * call now (its output is what compare checks), the timing later, in the rounds (run_jobs). */
static void measure_row(run_ctx *c, bench_result *r, int (*fn)(void *), rows_ctx *x,
                        double min_bytes, double traffic, size_t base, double extra)
{
    bcu_reset_peak();
    if (perf_mode(c)) {
        if (c->n_jobs >= MAX_JOBS) {
            row_failed(c, r, r->impl, "too many timed rows");
            return;
        }
        if (fn(x) != 0 || bcu_sync() != 0) {
            row_failed(c, r, r->impl, lib_or_tool_error());
            return;
        }
        timed_job *j = &c->jobs[c->n_jobs++];
        memset(j, 0, sizeof *j);
        j->r = r, j->fn = fn, j->ctx = x, j->bytes = min_bytes;
        fprintf(stderr, "ran once; timed in the rounds\n");
    } else {
        if (timed(c, r, fn, x) != 0) {
            row_failed(c, r, r->impl, lib_or_tool_error());
            return;
        }
        r->gbps = min_bytes / (r->ms * 1e-3) * 1e-9;
        row_done(r);
    }
    r->traffic_mib = traffic / MiB;
    r->peak_mib = extra / MiB;
    r->rss_mib = (double)(bcu_peak() - base) / MiB;
}

static timed_job *job_of(run_ctx *c, const bench_result *r)
{
    for (int i = 0; i < c->n_jobs; i++)
        if (c->jobs[i].r == r)
            return &c->jobs[i];
    return NULL;
}

static void set_speedup(const bench_result *naive, bench_result *fused)
{
    fused->speedup = naive->ms / fused->ms;
    fused->mem_ratio = fused->peak_mib > 0 ? naive->peak_mib / fused->peak_mib : INFINITY;
    fused->rss_ratio = naive->rss_mib / fused->rss_mib;
}

/* fused's output against naive's (both just ran); the speedup now, or after the rounds. */
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
    timed_job *j = job_of(c, fused);
    if (j)
        j->naive = naive;
    else
        set_speedup(naive, fused);
}

static void bench_rmsnorm(run_ctx *c)
{
    const bench_cuda_opts *o = c->o;
    /* the fused calls, the naive one (its own output) and the residual variant (its own x,
     * which it changes at every call) */
    rows_ctx *xp = new_ctx(c), *xn = new_ctx(c), *xr = new_ctx(c);
    if (!xp || !xn || !xr)
        return;
    rows_ctx x;
    memset(&x, 0, sizeof x);
    x.dt = o->dt, x.T = o->tokens, x.D = o->hidden, x.eps = 1e-6f;
    const double e = (double)flashc_dtype_size(x.dt), td = (double)(x.T * x.D) * e;
    char shape[96];
    snprintf(shape, sizeof shape, "T%lld x %lld %s", (long long)x.T, (long long)x.D, dt_name(x.dt));
    const size_t base = bcu_current();
    void *yn = NULL, *xres = NULL;
    void **bufs[] = {&x.x, &x.w, &x.y, &yn, &x.tmp, (void **)&x.ms, &x.dy, &x.dx, &x.dw, &xres};
    const double sizes[] = {td, (double)x.D * e, td, td, td, (double)x.T * 4.0, td, td, (double)x.D * e, td};
    if (alloc_list(bufs, sizes, 10) != 0) {
        bench_result *r = new_row(c, "rmsnorm", "naive", 0, shape, x.dt, x.T, x.D);
        if (r)
            row_oom(r, 7.0 * td, "x (x2), y (x2), sq, dy, dx");
        goto out;
    }
    bcu_fill_normal(x.x, (int)x.dt, (size_t)(x.T * x.D), o->seed + 101, 1.0f);
    bcu_fill_normal(xres, (int)x.dt, (size_t)(x.T * x.D), o->seed + 101, 1.0f);
    bcu_fill_normal(x.w, (int)x.dt, (size_t)x.D, o->seed + 102, 1.0f);
    bcu_fill_normal(x.dy, (int)x.dt, (size_t)(x.T * x.D), o->seed + 103, 1.0f);
    x.tx = dev2(x.x, x.dt, x.T, x.D), x.tw = dev1(x.w, x.dt, x.D), x.ty = dev2(x.y, x.dt, x.T, x.D);
    x.tdy = dev2(x.dy, x.dt, x.T, x.D), x.tdx = dev2(x.dx, x.dt, x.T, x.D), x.tdw = dev1(x.dw, x.dt, x.D);
    *xp = x;
    *xn = x, xn->y = yn;
    *xr = x, xr->x = xres, xr->tx = dev2(xres, x.dt, x.T, x.D);
    if (wants(o, "rmsnorm")) {
        bench_result *rn = new_row(c, "rmsnorm", "naive", 0, shape, x.dt, x.T, x.D);
        if (rn)
            measure_row(c, rn, run_rms_naive, xn, 2.0 * td + (double)x.D * e,
                        traffic_rmsnorm(x.T, x.D, e, 0, 0), base, td + (double)x.T * 4.0);
        bench_result *rf = new_row(c, "rmsnorm", "fused", 1, shape, x.dt, x.T, x.D);
        if (rf) {
            measure_row(c, rf, run_rms_fused, xp, 2.0 * td + (double)x.D * e,
                        traffic_rmsnorm(x.T, x.D, e, 1, 0), base, 0.0);
            if (rn)
                compare(c, rn, rf, x.y, yn, x.dt, (size_t)(x.T * x.D));
        }
        /* the residual variant: reads x and r, writes x and y */
        bench_result *rr = new_row(c, "rmsnorm_res", "fused", 1, shape, x.dt, x.T, x.D);
        if (rr)
            measure_row(c, rr, run_rms_res, xr, 4.0 * td + (double)x.D * e,
                        4.0 * td + (double)x.D * e, base, 0.0);
    }
    if (wants(o, "rmsnorm_bwd")) {
        bench_result *rb = new_row(c, "rmsnorm_bwd", "fused", 1, shape, x.dt, x.T, x.D);
        /* reads x, dy, w and writes dx, dw once; the G x D float32 dw partials the library
         * takes from its CUDA scratch pool are not in this allocator's peak */
        if (rb)
            measure_row(c, rb, run_rms_bwd, xp, 3.0 * td + 2.0 * (double)x.D * e,
                        3.0 * td + 2.0 * (double)x.D * e, base, 0.0);
    }
out:;
    void *all[10] = {x.x, x.w, x.y, yn, x.tmp, x.ms, x.dy, x.dx, x.dw, xres};
    release(c, all, 10);
}

static void bench_swiglu(run_ctx *c)
{
    const bench_cuda_opts *o = c->o;
    rows_ctx *xp = new_ctx(c), *xn = new_ctx(c);
    if (!xp || !xn)
        return;
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
    *xp = x;
    *xn = x, xn->y = yn;
    if (wants(o, "swiglu")) {
        bench_result *rn = new_row(c, "swiglu", "naive", 0, shape, x.dt, x.T, x.D);
        if (rn)
            measure_row(c, rn, run_swiglu_naive, xn, 3.0 * ti, traffic_swiglu(x.T, x.D, e, 0), base,
                        3.0 * ti);
        bench_result *rf = new_row(c, "swiglu", "fused", 1, shape, x.dt, x.T, x.D);
        if (rf) {
            measure_row(c, rf, run_swiglu_fused, xp, 3.0 * ti, traffic_swiglu(x.T, x.D, e, 1), base,
                        0.0);
            if (rn)
                compare(c, rn, rf, x.y, yn, x.dt, (size_t)(x.T * x.D));
        }
    }
    if (wants(o, "swiglu_bwd")) {
        bench_result *rb = new_row(c, "swiglu_bwd", "fused", 1, shape, x.dt, x.T, x.D);
        if (rb) /* reads gu, dout; writes dgu */
            measure_row(c, rb, run_swiglu_bwd, xp, 5.0 * ti, 5.0 * ti, base, 0.0);
    }
out:;
    void *all[8] = {x.x, x.y, yn, x.g, x.u, x.a, x.dy, x.dx};
    release(c, all, 8);
}

/* RoPE in place on q (1, T, 32, 128) and k (1, T, 8, 128) with cos/sin tables (T, 64) float32
 * of theta 500000 (a Llama-3-8B layer's shapes), GPT-NeoX and GPT-J styles on the same buffers
 * (every call rotates them further; rotations keep them bounded). */
static void bench_rope(run_ctx *c)
{
    const bench_cuda_opts *o = c->o;
    rows_ctx *xs[2] = {new_ctx(c), new_ctx(c)};
    if (!xs[0] || !xs[1])
        return;
    const flashc_dtype dt = o->dt;
    const int64_t T = o->tokens, Hq = 32, Hk = 8, D = 128;
    const double e = (double)flashc_dtype_size(dt);
    const double qb = (double)(T * Hq * D) * e, kb = (double)(T * Hk * D) * e;
    const double tb = (double)(T * D / 2) * 4.0;
    const size_t base = bcu_current();
    void *q = NULL, *k = NULL, *cs = NULL, *sn = NULL;
    void **bufs[] = {&q, &k, &cs, &sn};
    const double sizes[] = {qb, kb, tb, tb};
    if (alloc_list(bufs, sizes, 4) != 0) {
        bench_result *r = new_row(c, "rope", "fused", 1, "q, k, cos, sin", dt, T, D);
        if (r)
            row_oom(r, qb + kb + 2 * tb, "q, k, cos, sin");
    } else if (bcu_fill_normal(q, (int)dt, (size_t)(T * Hq * D), o->seed + 301, 1.0f) != 0 ||
               bcu_fill_normal(k, (int)dt, (size_t)(T * Hk * D), o->seed + 302, 1.0f) != 0 ||
               bcu_rope_tables(cs, sn, T, D / 2, 500000.0) != 0) {
        fprintf(stderr, "rope inputs: %s\n", bcu_error());
        c->bad = 1;
    } else {
        for (int st = 0; st < 2; st++) {
            char shape[96];
            snprintf(shape, sizeof shape, "T%lld q 32x128 k 8x128 %s %s", (long long)T,
                     st ? "gptj" : "neox", dt_name(dt));
            bench_result *r = new_row(c, "rope", "fused", 1, shape, dt, T, D);
            if (!r)
                break;
            rows_ctx *x = xs[st];
            x->dt = dt, x->T = T;
            x->tq = dev4(q, dt, 1, T, Hq, D), x->tk = dev4(k, dt, 1, T, Hk, D);
            x->tc = dev2(cs, FLASHC_F32, T, D / 2), x->ts = dev2(sn, FLASHC_F32, T, D / 2);
            x->rp.struct_size = sizeof x->rp;
            x->rp.style = st ? FLASHC_ROPE_GPTJ : FLASHC_ROPE_NEOX;
            /* q and k read and written once, the cos and sin tables read once */
            measure_row(c, r, run_rope, x, 2.0 * (qb + kb) + 2.0 * tb, 2.0 * (qb + kb) + 2.0 * tb, base, 0.0);
        }
    }
    void *all[4] = {q, k, cs, sn};
    release(c, all, 4);
}

/* The bytes a copy standing for an op's b bytes moves: half read, half written, whole 16-byte
 * chunks. */
static double copy_bytes(double b) { return 2.0 * (double)((size_t)(b / 2) / 16 * 16); }

/* The bandwidth ceiling: a device-to-device copy of 1 GiB (2 GiB moved). Perf mode: first a copy
 * of each fused row op's bytes (half read, half written), all from one pair of buffers. */
static void bench_copy(run_ctx *c)
{
    enum { MAX_SIZES = 16 };
    size_t big = (size_t)1 << 30;
    double sizes[MAX_SIZES];
    int ns = 0;
    for (int i = 0; i < c->n_jobs; i++) {
        const double b = copy_bytes(c->jobs[i].bytes);
        int dup = 0;
        for (int k = 0; k < ns; k++)
            dup |= sizes[k] == b;
        if (!dup && c->jobs[i].r->impl_index != 0 && ns < MAX_SIZES - 1)
            sizes[ns++] = b;
        if (b / 2 > (double)big)
            big = (size_t)(b / 2);
    }
    sizes[ns++] = 2.0 * (double)((size_t)1 << 30);
    const size_t base = bcu_current();
    void *src = bcu_alloc(big), *dst = src ? bcu_alloc(big) : NULL;
    if (dst)
        bcu_fill_normal(src, FLASHC_F32, big / 4, c->o->seed + 401, 1.0f);
    for (int i = 0; i < ns; i++) {
        const size_t half = (size_t)(sizes[i] / 2);
        char shape[160];
        if (i == ns - 1) {
            snprintf(shape, sizeof shape, "1 GiB device to device");
        } else {
            int len = snprintf(shape, sizeof shape, "%.1f MiB read and written, as", (double)half / MiB);
            for (int k = 0; k < c->n_jobs && len < (int)sizeof shape - 48; k++) {
                const bench_result *r = c->jobs[k].r;
                if (copy_bytes(c->jobs[k].bytes) == sizes[i] && r->impl_index != 0)
                    len += snprintf(shape + len, sizeof shape - (size_t)len, " %s%s", r->op,
                                    strcmp(r->op, "rope") != 0 ? "" : strstr(r->shape, "gptj") ? "/gptj" : "/neox");
            }
        }
        bench_result *r = new_row(c, "copy", "cudaMemcpy", 1, shape, FLASHC_BF16, (int64_t)(half >> 20), 0);
        if (!r)
            break;
        snprintf(r->dtype, sizeof r->dtype, "-");
        rows_ctx *x = new_ctx(c);
        if (!dst || !x) {
            row_oom(r, 2.0 * (double)big, "two buffers");
            continue;
        }
        x->src = src, x->dst = dst, x->bytes = half;
        measure_row(c, r, run_copy, x, 2.0 * (double)half, 2.0 * (double)half, base, 0.0);
    }
    void *all[2] = {src, dst};
    release(c, all, 2);
}

/* Perf mode: a warm-up round, then o->reps rounds; in a round every job times one batch of
 * o->calls calls, in turn. Then each job's median and fastest, GB/s, the fraction of the copy
 * of the same bytes (of_copy), the speedup over its naive row. */
static void run_jobs(run_ctx *c)
{
    const int reps = (int)c->o->reps, calls = (int)c->o->calls;
    for (int round = 0; round <= reps; round++)
        for (int i = 0; i < c->n_jobs; i++) {
            timed_job *j = &c->jobs[i];
            double ms = 0.0;
            if (j->r->failed)
                continue;
            if (bcu_time_batch(j->fn, j->ctx, calls, &ms) != 0)
                row_failed(c, j->r, j->r->impl, lib_or_tool_error());
            else if (round > 0)
                j->ms[round - 1] = ms;
        }
    for (int i = 0; i < c->n_jobs; i++) {
        timed_job *j = &c->jobs[i];
        bench_result *r = j->r;
        if (r->failed)
            continue;
        double t[MAX_ROUNDS];
        memcpy(t, j->ms, sizeof(double) * (size_t)reps);
        for (int a = 1; a < reps; a++) /* insertion sort: at most MAX_ROUNDS values */
            for (int b = a; b > 0 && t[b - 1] > t[b]; b--) {
                const double s = t[b];
                t[b] = t[b - 1], t[b - 1] = s;
            }
        r->reps = reps, r->warmup = calls + 1;
        r->ms = reps % 2 ? t[reps / 2] : 0.5 * (t[reps / 2 - 1] + t[reps / 2]);
        r->ms_min = t[0];
        r->gbps = j->bytes / (r->ms * 1e-3) * 1e-9;
    }
    for (int i = 0; i < c->n_jobs; i++) {
        timed_job *j = &c->jobs[i];
        if (j->r->failed || strcmp(j->r->op, "copy") == 0)
            continue;
        if (j->naive && !j->naive->failed)
            set_speedup(j->naive, j->r);
        for (int k = 0; k < c->n_jobs; k++) {
            const timed_job *cp = &c->jobs[k];
            if (strcmp(cp->r->op, "copy") == 0 && !cp->r->failed && cp->bytes == copy_bytes(j->bytes))
                j->r->of_copy = j->r->gbps / cp->r->gbps;
        }
    }
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
    timed_job *jobs = o->calls > 1 ? calloc(MAX_JOBS, sizeof *jobs) : NULL;
    if (!rows || (o->calls > 1 && !jobs)) {
        free(rows), free(jobs);
        return 1;
    }
    run_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o, c.rows = rows, c.jobs = jobs;
    if (wants(o, "attn")) {
        if (o->dt == FLASHC_F32) {
            fprintf(stderr, "flashc bench --device cuda: attention runs in bf16 or f16 on the GPU "
                            "(--dtype bf16|f16)\n");
            free(rows), free(jobs);
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
    if (perf_mode(&c)) {
        fprintf(stderr, "timing %d rows: %lld rounds of %lld calls a row, after a warm-up round\n", c.n_jobs,
                (long long)o->reps, (long long)o->calls);
        run_jobs(&c);
        for (int i = 0; i < c.n_jobs; i++) {
            const bench_result *r = c.jobs[i].r;
            if (!r->failed)
                fprintf(stderr, "  %s %s %s: %.4f ms median, %.1f GB/s\n", r->op, r->impl, r->shape, r->ms,
                        r->gbps);
        }
    }
    for (int i = 0; i < c.n_dev; i++)
        bcu_free(c.keep_dev[i]);
    for (int i = 0; i < c.n_host; i++)
        free(c.keep_host[i]);

    report_note(meta, "device: %s; %.0f GiB; times = CUDA events around each call on the default "
                      "stream, median of `reps` after warm-up%s",
                name, (double)total / GiB, perf_mode(&c) ? " (attention; the row ops: next line)" : "");
    if (perf_mode(&c))
        report_note(meta, "row ops and copies: CUDA events around %lld back-to-back calls (--calls), "
                          "ms = the batch's / calls; median of `reps` rounds, each timing every row "
                          "once in turn, after a warm-up round",
                    (long long)o->calls);
    report_note(meta, "attention: batch %lld, %lld heads (kv heads = heads), %s; naive = S = q k^T "
                      "(cuBLAS), P = softmax(S) (one kernel), o = P v (cuBLAS), S and P in device "
                      "memory in the storage dtype; flash = flashc_attn_fwd",
                (long long)o->batch, (long long)o->heads, o->causal ? "causal" : "non-causal");
    report_note(meta, "peak MiB = device memory a call needs beyond its inputs and outputs (the "
                      "tool's counting allocator; cudaMemGetInfo checked for the library's calls); "
                      "RSS MiB column = the case's measured device peak, inputs included");
    report_note(meta, "row ops: RMSNorm T = %lld, D = %lld; SwiGLU T = %lld, I = %lld; RoPE T = %lld "
                      "(q 32 x 128, k 8 x 128 in place, cos/sin (T, 64) float32); naive = separate "
                      "kernels with (T, D) temporaries",
                (long long)o->tokens, (long long)o->hidden, (long long)o->tokens,
                (long long)o->inter, (long long)o->tokens);
    report_note(meta, "GB/s = minimal bytes (inputs read once, outputs written once; RoPE: q and k "
                      "read and written, cos and sin read) / t; traffic MiB = the model of "
                      "docs/traffic.md; max_err = max |fused - naive| / (1 + |naive|)");
    /* fused rows as a fraction of the copy ceilings */
    const bench_result *cp = NULL;
    for (int i = 0; i < c.n; i++)
        if (strcmp(rows[i].op, "copy") == 0 && !rows[i].failed && strncmp(rows[i].shape, "1 GiB", 5) == 0)
            cp = &rows[i];
    for (int pass = 0; pass < 2; pass++) {
        if ((pass == 0 && !cp) || (pass == 1 && !perf_mode(&c)))
            continue;
        char list[240] = "";
        size_t used = 0;
        for (int i = 0; i < c.n && used < sizeof list; i++) {
            const bench_result *x = &rows[i];
            if (x->failed || x->gbps < 0 || x->impl_index == 0 || strcmp(x->op, "copy") == 0 ||
                (pass == 1 && x->of_copy <= 0))
                continue;
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s%s %.1f%%", used ? ", " : "", x->op,
                                     strstr(x->shape, "gptj") ? " gptj" : "",
                                     100.0 * (pass ? x->of_copy : x->gbps / cp->gbps));
        }
        if (pass == 0)
            report_note(meta, "of the 1 GiB copy (%.0f GB/s): %s", cp->gbps, list);
        else
            report_note(meta, "of the copy of the same bytes (cudaMemcpy, in the same rounds): %s", list);
    }
    report_write(stdout, o->format, meta, rows, c.n);
    const int bad = c.bad;
    free(rows), free(jobs);
    return bad ? 1 : 0;
}

#endif /* FLASHC_CLI_CUDA */
