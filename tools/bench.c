/*
 * bench.c — `flashc bench`: naive vs flash / fused, time, measured memory, modeled traffic.
 *
 * Problems come from the options (bench_ops: one row per op says how its problems are built)
 * or from the check table (--suite check). Each (problem, implementation) runs in a forked
 * child, so its peak RSS is its own:
 *   1. allocate the inputs and fill them with fresh N(0,1) data (seed + problem index),
 *   2. `warmup` untimed calls (a call longer than --budget becomes the first timed run instead:
 *      the float64 naive attention takes ~15 s at n = 8192),
 *   3. timed calls, CLOCK_MONOTONIC around each; the median and the fastest are reported.
 *      Without --reps, as many as fit --budget seconds (up to 10), never fewer than 3,
 *   4. the child's peak RSS (getrusage) — read *before* step 5, so a flash row's RSS never
 *      includes the naive reference's S and P,
 *   5. for a non-reference impl: the naive reference (on the last --ref-rows query rows for
 *      attention, an exact sub-problem) and max_err of the last timed output against it.
 * peak_mib is the counting allocator's high-water mark above its level before a call,
 * maximised over the calls.
 *
 * The parent never runs a parallel region itself: OpenMP thread pools do not survive fork().
 */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, getrusage, strtok_r, gmtime_r, strsignal */
#include "bench.h"

#include "bench_cuda.h"
#include "ceiling.h"
#include "check.h"
#include "cli.h"
#include "dtype.h"
#include "report.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_CASES = 256, MAX_REPS = 10000 };

typedef struct bench_options {
    const char *ops;     /* comma-separated op names or "all"                   */
    const char *impls;   /* comma-separated impl names or NULL (every impl)      */
    const char *suite;   /* "options" (default) or "check"                       */
    const char *format;
    const char *dtype;   /* --dtype: storage of the ops' tensors (dtype.h)              */
    flashc_dtype dt;     /* the same, parsed                                            */
    cli_int_list n;
    int64_t d, heads, kv_heads, batch, br, bc, threads, reps, warmup, tokens, hidden, inter, seed;
    int64_t ref_rows;
    int causal;
    double budget;
    int reps_given, seed_given;
    int64_t window, page_size; /* attention v2: --window, --page-size                   */
    double softcap;
    int alibi;
    cli_int_list cache_len;    /* attn_kvcache: --cache-len                              */
    int ceiling;         /* --ceiling: add the sgemm and stream-copy rows (ceiling.h)   */
    const char *device;  /* --device: cpu (default) or cuda (bench_cuda.h)              */
    int64_t ceiling_n;   /* sgemm size                                                  */
    int64_t calls;       /* --calls: --device cuda's calls a timed batch (bench_cuda.h)   */
} bench_options;

/* ---- how each op's problems are built from the options ---------------------------------------
 * Adding an op to the bench is adding a row here (and its op_desc in cases.c). */

typedef int (*make_fn)(const bench_options *o, const char *op, case_spec *out, int cap);

static int make_attention(const bench_options *o, const char *op, case_spec *out, int cap)
{
    int k = 0;
    for (int i = 0; i < o->n.n && k < cap; i++) {
        case_spec s = {0};
        s.op = op;
        s.batch = o->batch, s.sq = s.sk = o->n.v[i], s.heads = o->heads;
        s.kv_heads = o->kv_heads ? o->kv_heads : o->heads;
        s.d = o->d, s.causal = o->causal, s.br = o->br, s.bc = o->bc;
        s.threads = (int)o->threads;
        s.ref_rows = o->ref_rows;
        s.dtype = o->dt;
        s.window = o->window, s.softcap = (float)o->softcap, s.alibi = o->alibi;
        out[k++] = s;
    }
    return k;
}

/* attn_kvcache: one problem per --cache-len; one query row (decode) per sequence. */
static int make_kvcache(const bench_options *o, const char *op, case_spec *out, int cap)
{
    int k = 0;
    for (int i = 0; i < o->cache_len.n && k < cap; i++) {
        case_spec s = {0};
        s.op = op;
        s.batch = o->batch, s.sq = 1, s.sk = o->cache_len.v[i], s.heads = o->heads;
        s.kv_heads = o->kv_heads ? o->kv_heads : o->heads;
        s.d = o->d, s.causal = o->causal, s.br = o->br, s.bc = o->bc;
        s.threads = (int)o->threads;
        s.dtype = o->dt;
        s.window = o->window, s.softcap = (float)o->softcap, s.alibi = o->alibi;
        s.page_size = o->page_size;
        out[k++] = s;
    }
    return k;
}

static int make_rows(const bench_options *o, const char *op, int64_t width, case_spec *out, int cap)
{
    if (cap < 1)
        return 0;
    case_spec s = {0};
    s.op = op, s.rows = o->tokens, s.width = width, s.threads = (int)o->threads;
    s.dtype = o->dt;
    out[0] = s;
    return 1;
}

static int make_hidden(const bench_options *o, const char *op, case_spec *out, int cap)
{
    return make_rows(o, op, o->hidden, out, cap);
}

static int make_inter(const bench_options *o, const char *op, case_spec *out, int cap)
{
    return make_rows(o, op, o->inter, out, cap);
}

static const struct bench_op {
    const char *op;
    make_fn make;
    int in_all; /* part of --op all (the seeds' exercise) */
} bench_ops[] = {
    {"attn", make_attention, 1},   {"attn_varlen", make_attention, 0},
    {"attn_kvcache", make_kvcache, 0}, {"attn_merge", make_attention, 0},
    {"attn_bwd", make_attention, 0}, {"attn_fwdbwd", make_attention, 0},
    {"softmax", make_hidden, 0},   {"rmsnorm", make_hidden, 1},
    {"rmsnorm_res", make_hidden, 0}, {"swiglu", make_inter, 1},
};
static const int n_bench_ops = (int)(sizeof bench_ops / sizeof bench_ops[0]);

/* ---- the child ----------------------------------------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* Linux: KiB */
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct timed_call {
    double ms;
    double extra_bytes; /* counting-allocator high-water mark above the level before the call */
    flashc_status status;
} timed_call;

static timed_call call_once(case_data *c, int impl, int slot, case_stats *st)
{
    timed_call t;
    case_prepare(c, slot); /* restores in-place inputs; not timed */
    const int64_t before = flashc_mem_get().current_bytes;
    flashc_mem_reset_peak();
    const double t0 = now_ms();
    t.status = case_run(c, impl, slot, st);
    t.ms = now_ms() - t0;
    t.extra_bytes = (double)(flashc_mem_get().peak_bytes - before);
    return t;
}

static int child_fail(bench_result *r, const char *what, flashc_status st)
{
    r->failed = 1;
    snprintf(r->error, sizeof r->error, "%s: %s (%s)", what, flashc_status_string(st),
             flashc_last_error());
    return -1;
}

/* Timed runs that fit --budget seconds given one call of probe_ms: at least 3, at most --reps;
 * exactly --reps when it was given. */
static int fit_reps(const bench_options *o, double probe_ms)
{
    if (o->reps_given)
        return (int)o->reps;
    const double fit = floor(o->budget * 1e3 / (probe_ms > 1e-6 ? probe_ms : 1e-6));
    return fit < 3.0 ? 3 : fit < (double)o->reps ? (int)fit : (int)o->reps;
}

/* Steps 2-5 of the header: warm-up, timed runs, RSS, reference and error. -1 with r->failed
 * set on an error status; times[] receives the timed runs (r->reps of them, unsorted). */
static int measure(const bench_options *o, case_data *c, int impl, bench_result *r,
                   case_stats *st, double *times)
{
    const uint64_t hash0 = case_inputs_hash(c);
    double peak = 0.0;
    int n_timed = 0, reps = (int)o->reps;
    timed_call t;

    for (int w = 0; w < o->warmup; w++) {
        t = call_once(c, impl, 1, st);
        if (t.status != FLASHC_OK)
            return child_fail(r, "warm-up", t.status);
        peak = t.extra_bytes > peak ? t.extra_bytes : peak;
        reps = fit_reps(o, t.ms);
        if (t.ms > o->budget * 1e3) {
            /* One call longer than the whole budget (the float64 naive attention at n = 8192):
             * another warm-up would cost more than it can settle, so it is the first timed run. */
            times[n_timed++] = t.ms;
            break;
        }
        r->warmup++;
    }
    while (n_timed < reps) {
        t = call_once(c, impl, 1, st);
        if (t.status != FLASHC_OK)
            return child_fail(r, "timed run", t.status);
        peak = t.extra_bytes > peak ? t.extra_bytes : peak;
        if (n_timed == 0 && o->warmup == 0)
            reps = fit_reps(o, t.ms);
        times[n_timed++] = t.ms;
    }
    r->reps = n_timed;
    r->peak_mib = peak / 1048576.0;
    r->rss_mib = peak_rss_mib(); /* before the naive reference runs in this child */

    if (impl == 0) {
        r->max_err = -1.0; /* the reference itself */
    } else {
        const flashc_status rs = case_run_reference(c);
        if (rs != FLASHC_OK)
            return child_fail(r, "reference", rs);
        r->max_err = case_max_err(c);
    }
    r->inputs_changed = case_inputs_hash(c) != hash0;
    return 0;
}

static void run_child(const bench_options *o, const case_spec *spec, int impl, uint64_t seed,
                      bench_result *r)
{
    if (spec->threads > 0)
        flashc_set_num_threads(spec->threads);
    char err[128];
    case_data *c = case_create(spec, seed, err, sizeof err);
    if (!c) {
        r->failed = 1;
        snprintf(r->error, sizeof r->error, "%s", err);
        return;
    }
    double *times = malloc(sizeof(double) * MAX_REPS);
    case_stats st = {0};
    if (times)
        measure(o, c, impl, r, &st, times);
    else
        r->failed = 1, snprintf(r->error, sizeof r->error, "out of memory");
    if (r->failed) {
        free(times);
        case_destroy(c);
        return;
    }
    const int reps = r->reps;
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    r->ms = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    r->ms_min = times[0];
    free(times);

    const case_spec *s = spec;
    case_spec full = *s;
    case_spec_defaults(&full);
    const double flops = case_flops(&full);
    r->gflops = flops > 0.0 ? flops / (r->ms * 1e-3) * 1e-9 : -1.0;
    r->gbps = flops > 0.0 ? -1.0 : case_min_bytes(&full) / (r->ms * 1e-3) * 1e-9;
    r->traffic_mib = case_traffic(&full, impl, &st) / 1048576.0;
    r->block_q = st.block_q;
    r->block_k = st.block_k;
    r->tile_pairs = st.tile_pairs;
    case_destroy(c);
}

/* Runs body(ctx, r) in a forked child and brings r back over a pipe; r->failed on any failure,
 * crash included. */
static void run_in_child(void (*body)(const void *ctx, bench_result *r), const void *ctx,
                         bench_result *r)
{
    int fd[2];
    if (pipe(fd) != 0) {
        r->failed = 1;
        snprintf(r->error, sizeof r->error, "pipe: %s", strerror(errno));
        return;
    }
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        r->failed = 1;
        snprintf(r->error, sizeof r->error, "fork: %s", strerror(errno));
        close(fd[0]), close(fd[1]);
        return;
    }
    if (pid == 0) {
        close(fd[0]);
        body(ctx, r);
        const char *p = (const char *)r;
        size_t left = sizeof *r;
        while (left > 0) {
            const ssize_t w = write(fd[1], p, left);
            if (w <= 0)
                _exit(2);
            p += w, left -= (size_t)w;
        }
        _exit(0);
    }
    close(fd[1]);
    bench_result got;
    size_t have = 0;
    while (have < sizeof got) {
        const ssize_t n = read(fd[0], (char *)&got + have, sizeof got - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
    }
    close(fd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (have == sizeof got) {
        *r = got;
    } else {
        r->failed = 1;
        if (WIFSIGNALED(status))
            snprintf(r->error, sizeof r->error, "child killed by signal %d (%s)",
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            snprintf(r->error, sizeof r->error, "child exited with status %d, no result",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    }
}

typedef struct case_ctx {
    const bench_options *o;
    const case_spec *spec;
    int impl;
    uint64_t seed;
} case_ctx;

static void case_body(const void *ctx, bench_result *r)
{
    const case_ctx *c = ctx;
    run_child(c->o, c->spec, c->impl, c->seed, r);
}

/* Runs one (problem, impl) in a child; fills r (r->failed on any failure, crash included). */
static void run_case(const bench_options *o, const case_spec *spec, int impl, uint64_t seed,
                     bench_result *r)
{
    const case_ctx c = {o, spec, impl, seed};
    run_in_child(case_body, &c, r);
}

/* ---- --ceiling: the machine's practical peaks, measured in this run (ceiling.h) ------------- */

enum { CEIL_COPY, CEIL_SGEMM, CEIL_GEMM_BF16 };

typedef struct ceiling_ctx {
    int kind; /* CEIL_SGEMM: OpenBLAS sgemm, CEIL_GEMM_BF16: oneDNN bf16 gemm, CEIL_COPY */
    int threads;
    int64_t n, reps;
} ceiling_ctx;

/* In the child: sgemm unsets OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE in this process only, before
 * it loads OpenBLAS, so the ceiling is the library's best kernel for this CPU. */
static void ceiling_body(const void *ctx, bench_result *r)
{
    const ceiling_ctx *c = ctx;
    ceiling_result cr;
    const int64_t copy_bytes = (int64_t)512 << 20;
    const int reps = (int)c->reps;
    const int st = c->kind == CEIL_SGEMM       ? ceiling_sgemm(c->threads, c->n, reps, &cr)
                   : c->kind == CEIL_GEMM_BF16 ? ceiling_gemm_bf16(c->threads, c->n, reps, &cr)
                                               : ceiling_copy(c->threads, copy_bytes, reps, &cr);
    if (st != 0) {
        r->failed = 1;
        snprintf(r->error, sizeof r->error, "%s", cr.error);
        return;
    }
    r->reps = cr.reps;
    r->ms = cr.ms, r->ms_min = cr.ms_min;
    r->gflops = cr.gflops, r->gbps = cr.gbps;
    r->rss_mib = peak_rss_mib();
    /* the fewest bytes: a gemm reads A, B and writes C once; copy reads and writes the buffer */
    const double nn = (double)c->n * (double)c->n;
    r->traffic_mib = (c->kind == CEIL_SGEMM       ? 12.0 * nn
                      : c->kind == CEIL_GEMM_BF16 ? 8.0 * nn
                                                  : 2.0 * (double)copy_bytes) /
                     1048576.0;
    r->max_err = -1.0; /* a peer, not compared */
    snprintf(r->shape, sizeof r->shape, "%s", cr.detail);
}

static void run_ceiling(int kind, int threads, int64_t n, int64_t reps, bench_result *r)
{
    static const char *const op[3] = {"copy", "sgemm", "gemm_bf16"};
    static const char *const impl[3] = {"stream", "openblas", "onednn"};
    static const char *const what[3] = {"stream copy", "OpenBLAS sgemm", "oneDNN bf16 gemm"};
    const ceiling_ctx c = {kind, threads, n, reps};
    memset(r, 0, sizeof *r);
    run_in_child(ceiling_body, &c, r);
    snprintf(r->op, sizeof r->op, "%s", op[kind]);
    /* sgemm is float32, copy moves bytes; the bf16 gemm's operands are bf16 */
    snprintf(r->dtype, sizeof r->dtype, "%s", kind == CEIL_GEMM_BF16 ? "bf16" : "f32");
    snprintf(r->impl, sizeof r->impl, "%s", impl[kind]);
    if (r->failed)
        snprintf(r->shape, sizeof r->shape, "%s", what[kind]);
    r->n = kind != CEIL_COPY ? n : ((int64_t)512 << 20) / 1048576;
    r->d = kind != CEIL_COPY ? n : 0;
}

/* ---- options ------------------------------------------------------------------------------ */

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

/* Every name in list must be known: an op of bench_ops or "all". */
static int check_op_list(const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int known = strcmp(tok, "all") == 0;
        for (int i = 0; i < n_bench_ops && !known; i++)
            known = strcmp(bench_ops[i].op, tok) == 0;
        if (!known) {
            fprintf(stderr, "flashc bench: --op: unknown op '%s' (known: all", tok);
            for (int i = 0; i < n_bench_ops; i++)
                fprintf(stderr, ", %s", bench_ops[i].op);
            fprintf(stderr, ")\n");
            return 0;
        }
    }
    return 1;
}

static int check_impl_list(const char *list)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int known = 0;
        for (int i = 0; i < cases_n_ops && !known; i++)
            known = cases_find_impl(cases_ops[i], tok) >= 0;
        if (!known) {
            fprintf(stderr, "flashc bench: --impl: unknown implementation '%s' "
                            "(naive, flash, fused, merge, online)\n", tok);
            return 0;
        }
    }
    return 1;
}

/* The seeds' extra_memory(T): what one head keeps from the forward for the backward beyond
 * Q, K, V and O — naive: P, T x T elements (float32 here: 4 bytes); flash: L, T floats.
 * Printed beside the measured peak_mib of the attn_bwd / attn_fwdbwd rows. */
static void add_backward_notes(report_meta *meta, const case_spec *specs, int n_specs)
{
    char buf[256];
    size_t used = 0;
    for (int i = 0; i < n_specs; i++) {
        if (strcmp(specs[i].op, "attn_bwd") != 0 && strcmp(specs[i].op, "attn_fwdbwd") != 0)
            continue;
        case_spec full = specs[i];
        case_spec_defaults(&full);
        const double T = (double)full.sq, naive = T * T * 4.0 / 1048576.0, flash = T * 4.0 / 1024.0;
        char item[64];
        snprintf(item, sizeof item, "%sT=%lld: %.3f MiB vs %.1f KiB", used ? "; " : "",
                 (long long)full.sq, naive, flash);
        if (strstr(buf, item + (used ? 2 : 0)) && used)
            continue; /* the same T for the other op */
        if (used + strlen(item) < sizeof buf)
            used += (size_t)snprintf(buf + used, sizeof buf - used, "%s", item);
    }
    if (!used)
        return;
    report_note(meta, "backward: max_err over all of dq, dk, dv (full reference; --ref-rows does "
                      "not apply); naive = P and dS materialised (2 T x T floats per head)");
    report_note(meta, "seeds' extra_memory(T) per head, P (T*T*4 B) vs L (T*4 B): %s", buf);
}

static const char bench_intro[] =
    "Times naive vs flash attention and naive vs fused RMSNorm / SwiGLU, each (problem,\n"
    "implementation) in its own child process, and reports the median time, the rate, the\n"
    "library's measured extra memory (peak_mib), the child's peak RSS (rss_mib), the modeled\n"
    "memory traffic (traffic_mib, docs/traffic.md) and the error against the naive reference.\n"
    "Default: the seeds' exercise, attention at N = 512, 2048, 8192 with d = 64 (batch 1,\n"
    "1 head, non-causal), then RMSNorm (D = 1024) and SwiGLU (I = 3072) at Qwen3-0.6B sizes on\n"
    "4096 tokens. Exit status 1 when a case fails or exceeds its error tolerance, 2 on a bad\n"
    "option.\n"
    "\n"
    "--dtype bf16|f16 runs attn (naive and flash), rmsnorm, rmsnorm_res and swiglu in that\n"
    "storage (float32 accumulation; attention's LSE stays float32): the random float32 inputs\n"
    "are rounded into it once (round to nearest even), max_err compares the output (widened to\n"
    "float32) with the naive reference run in float32 on the same rounded inputs, and GB/s and\n"
    "traffic_mib count the dtype's element size. The other ops (attn_merge, attn_bwd,\n"
    "attn_fwdbwd, softmax) are float32 only in the library: with --dtype bf16|f16 they are\n"
    "refused (exit 2).";

/* --device cuda: the GPU's defaults for every option not given, then bench_cuda_run. */
static int seen(const cli_option *opts, int n_opts, const char *name)
{
    for (int i = 0; i < n_opts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return opts[i].seen;
    return 0;
}

static int bench_cuda_from_options(const bench_options *o, const cli_option *opts, int n_opts,
                                   int argc, char **argv)
{
    bench_cuda_opts g;
    memset(&g, 0, sizeof g);
    g.ops = o->ops, g.format = o->format;
    if (strcmp(g.ops, "all") != 0) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", g.ops);
        for (char *sv = NULL, *t = strtok_r(buf, ",", &sv); t; t = strtok_r(NULL, ",", &sv))
            if (!in_list(bench_cuda_op_names, t)) {
                fprintf(stderr, "flashc bench --device cuda: --op: unknown op '%s' (known: all, %s)\n",
                        t, bench_cuda_op_names);
                return 2;
            }
    }
    static const int64_t ns[5] = {512, 2048, 8192, 32768, 131072};
    if (seen(opts, n_opts, "n"))
        g.n = o->n;
    else
        for (g.n.n = 0; g.n.n < 5; g.n.n++)
            g.n.v[g.n.n] = ns[g.n.n];
    if (seen(opts, n_opts, "d"))
        g.d.n = 1, g.d.v[0] = o->d;
    else
        g.d.n = 2, g.d.v[0] = 64, g.d.v[1] = 128;
    g.heads = seen(opts, n_opts, "heads") ? o->heads : 16;
    g.batch = o->batch;
    g.tokens = seen(opts, n_opts, "tokens") ? o->tokens : 16384;
    g.hidden = seen(opts, n_opts, "hidden") ? o->hidden : 4096;
    g.inter = seen(opts, n_opts, "inter") ? o->inter : 4096;
    g.reps = o->reps;
    g.warmup = seen(opts, n_opts, "warmup") ? o->warmup : 3;
    g.calls = o->calls;
    if (g.calls > 1 && g.reps > BENCH_CUDA_MAX_ROUNDS) {
        fprintf(stderr, "flashc bench --device cuda: --calls > 1 takes at most %d rounds (--reps)\n",
                BENCH_CUDA_MAX_ROUNDS);
        return 2;
    }
    g.causal = o->causal;
    g.dt = seen(opts, n_opts, "dtype") ? o->dt : FLASHC_BF16;
    g.seed = seen(opts, n_opts, "seed") ? (uint64_t)o->seed : (uint64_t)time(NULL);
    report_meta meta;
    report_meta_init(&meta, argc, argv);
    meta.dtype = dtype_name(g.dt);
    meta.build = flashc_build_info();
    meta.threads = flashc_get_num_threads();
    meta.seed = g.seed;
    meta.device = "cuda";
    return bench_cuda_run(&g, &meta);
}

int bench_main(int argc, char **argv)
{
    bench_options o = {0};
    o.ops = "all", o.suite = "options", o.format = "md", o.dtype = "f32";
    o.n.n = 3, o.n.v[0] = 512, o.n.v[1] = 2048, o.n.v[2] = 8192;
    o.d = 64, o.heads = 1, o.batch = 1, o.reps = 10, o.warmup = 1;
    o.tokens = 4096, o.hidden = 1024, o.inter = 3072;
    o.budget = 2.0;
    o.ref_rows = 1024;
    o.ceiling_n = 4096;
    o.calls = 1;
    o.device = "cpu";
    o.cache_len.n = 1, o.cache_len.v[0] = 8192;

    cli_option opts[] = {
        {"op", CLI_STRING, &o.ops, 0, 0, NULL, "LIST",
         "all (= attn,rmsnorm,swiglu: the default) or op names, below",
         0},
        {"impl", CLI_STRING, &o.impls, 0, 0, NULL, "LIST",
         "only these implementations (naive, flash, fused, ...); default every one", 0},
        {"suite", CLI_CHOICE, &o.suite, 0, 0, "options,check", "NAME",
         "options: problems from these options (default); check: the `flashc check` table", 0},
        {"n", CLI_INT_LIST, &o.n, 1, 1 << 20, NULL, "LIST", "attention sequence lengths (512,2048,8192)", 0},
        {"d", CLI_INT, &o.d, 1, 1024, NULL, "N", "attention head dim (64)", 0},
        {"heads", CLI_INT, &o.heads, 1, 1024, NULL, "N", "query heads (1)", 0},
        {"kv-heads", CLI_INT, &o.kv_heads, 1, 1024, NULL, "N", "key/value heads (= heads)", 0},
        {"batch", CLI_INT, &o.batch, 1, 1 << 16, NULL, "N", "batch (1)", 0},
        {"causal", CLI_FLAG, &o.causal, 0, 0, NULL, NULL, "causal mask (bottom-right aligned)", 0},
        {"br", CLI_INT, &o.br, 1, 1 << 16, NULL, "N", "flash query tile rows (library default)", 0},
        {"bc", CLI_INT, &o.bc, 1, 1 << 16, NULL, "N", "flash key tile rows (library default)", 0},
        {"threads", CLI_INT, &o.threads, 1, 1024, NULL, "N", "CPU threads (library default)", 0},
        {"reps", CLI_INT, &o.reps, 1, MAX_REPS, NULL, "N",
         "timed runs per case, exactly (default: up to 10, fewer to fit --budget, >= 3)", 0},
        {"warmup", CLI_INT, &o.warmup, 0, 1000, NULL, "N",
         "untimed runs first (1; a run longer than --budget counts as timed)", 0},
        {"ref-rows", CLI_INT, &o.ref_rows, 0, 1 << 30, NULL, "N",
         "attention max_err over the last N query rows (1024; 0 = all)", 0},
        {"budget", CLI_DOUBLE, &o.budget, 0.001, 3600, NULL, "SEC",
         "target seconds of timed runs per case when --reps is not given (2)", 0},
        {"tokens", CLI_INT, &o.tokens, 1, 1 << 24, NULL, "N", "rows T for the row ops (4096)", 0},
        {"hidden", CLI_INT, &o.hidden, 1, 1 << 20, NULL, "N", "RMSNorm width D (1024)", 0},
        {"inter", CLI_INT, &o.inter, 1, 1 << 20, NULL, "N", "SwiGLU intermediate size I (3072)", 0},
        {"seed", CLI_INT, &o.seed, 0, 9e15, NULL, "N", "base seed of the inputs (default: time)", 0},
        {"format", CLI_CHOICE, &o.format, 0, 0, "md,csv,json", "FMT", "md (default), csv or json", 0},
        {"dtype", CLI_CHOICE, &o.dtype, 0, 0, dtype_choices, "TYPE",
         "storage dtype: f32 (default), bf16 or f16; bf16/f16 only for attn, rmsnorm, "
         "rmsnorm_res, swiglu (others refused, exit 2; see above)",
         0},
        {"window", CLI_INT, &o.window, 0, 1 << 30, NULL, "W",
         "attention: sliding window of W keys to the left (window_left = W; window_right 0 "
         "with --causal, else unbounded); 0 = none (default)", 0},
        {"softcap", CLI_DOUBLE, &o.softcap, 0, 1e30, NULL, "C", "attention: softcap (0 = off)", 0},
        {"alibi", CLI_FLAG, &o.alibi, 0, 0, NULL, NULL,
         "attention: ALiBi with the standard slopes 2^(-8 (h + 1) / heads)", 0},
        {"cache-len", CLI_INT_LIST, &o.cache_len, 1, 1 << 26, NULL, "LIST",
         "attn_kvcache: keys in the cache per sequence (8192)", 0},
        {"page-size", CLI_INT, &o.page_size, 0, 1 << 20, NULL, "N",
         "attn_kvcache: rows per page of a paged cache (pages shuffled); 0 = contiguous (default)",
         0},
        {"ceiling", CLI_FLAG, &o.ceiling, 0, 0, NULL, NULL,
         "add the machine's ceilings, measured in this run: OpenBLAS sgemm (op sgemm, impl "
         "openblas, GFLOP/s; libopenblas.so.0 loaded at run time, OPENBLAS_CORETYPE and "
         "OPENBLAS_L2_SIZE unset for it), a oneDNN bf16 gemm (op gemm_bf16, impl onednn; "
         "libdnnl.so.3 or .so.2 loaded at run time; optional: a missing oneDNN fails that row "
         "only) and a stream copy (op copy, GB/s); every flash/fused "
         "row is then also given as a fraction of its ceiling",
         0},
        {"ceiling-n", CLI_INT, &o.ceiling_n, 64, 16384, NULL, "N", "sgemm size N^3 (4096)", 0},
        {"calls", CLI_INT, &o.calls, 1, 10000, NULL, "N",
         "--device cuda, the row ops and copies: N back-to-back calls between one pair of CUDA "
         "events a timed sample (1: each call alone); N > 1 times every row op and copy in "
         "interleaved rounds (--reps of them, after a warm-up round) and adds a copy of each "
         "op's bytes (its row's of_copy)", 0},
        {"device", CLI_CHOICE, &o.device, 0, 0, "cpu,cuda", "DEV",
         "cpu (default) or cuda: the exercise on the GPU (ops attn, rmsnorm, rmsnorm_bwd, swiglu, "
         "swiglu_bwd, rope, copy; defaults there: --n 512,2048,8192,32768,131072, d 64 and 128 "
         "unless --d, --heads 16, --dtype bf16, --tokens 16384 --hidden 4096 --inter 4096)",
         0},
    };
    const int n_opts = (int)(sizeof opts / sizeof opts[0]);
    const int pr = cli_parse("bench", opts, n_opts, argc, argv);
    if (pr == CLI_HELP) {
        cli_usage(stdout, "bench", bench_intro, opts, n_opts);
        printf("\nops (impls[0] is the reference):\n");
        for (int i = 0; i < cases_n_ops; i++) {
            const op_desc *op = cases_ops[i];
            printf("  %-12s %s (", op->name, op->summary);
            for (int k = 0; k < op->n_impls; k++)
                printf("%s%s", k ? ", " : "", op->impls[k]);
            printf(")\n");
        }
        return 0;
    }
    if (pr != CLI_OK)
        return 2;
    int dtype_given = 0;
    for (int i = 0; i < n_opts; i++) {
        if (strcmp(opts[i].name, "reps") == 0)
            o.reps_given = opts[i].seen;
        if (strcmp(opts[i].name, "seed") == 0)
            o.seed_given = opts[i].seen;
        if (strcmp(opts[i].name, "dtype") == 0)
            dtype_given = opts[i].seen;
    }
    o.dt = (flashc_dtype)dtype_parse(o.dtype); /* one of dtype_choices: cli_parse checked */
    if (strcmp(o.device, "cuda") == 0)
        return bench_cuda_from_options(&o, opts, n_opts, argc, argv);
    if (o.calls != 1) {
        fprintf(stderr, "flashc bench: --calls is an option of --device cuda\n");
        return 2;
    }
    if (!check_op_list(o.ops) || (o.impls && !check_impl_list(o.impls)))
        return 2;
    const int64_t kvh = o.kv_heads ? o.kv_heads : o.heads;
    if (o.heads % kvh != 0) {
        fprintf(stderr, "flashc bench: --heads %lld is not a multiple of --kv-heads %lld\n",
                (long long)o.heads, (long long)kvh);
        return 2;
    }

    /* the problems */
    case_spec *specs = calloc(MAX_CASES, sizeof *specs);
    bench_result *res = calloc(MAX_CASES * 3 + 2, sizeof *res); /* + the --ceiling rows */
    if (!specs || !res) {
        fprintf(stderr, "flashc bench: out of memory\n");
        return 1;
    }
    int n_specs = 0;
    if (strcmp(o.suite, "check") == 0) {
        int n_table;
        const case_spec *table = cases_table(&n_table);
        for (int i = 0; i < n_table && n_specs < MAX_CASES; i++)
            if (in_list(o.ops, "all") || in_list(o.ops, table[i].op)) {
                specs[n_specs] = table[i];
                if (o.threads)
                    specs[n_specs].threads = (int)o.threads;
                if (dtype_given)
                    specs[n_specs].dtype = o.dt;
                n_specs++;
            }
    } else {
        for (int i = 0; i < n_bench_ops; i++)
            if ((in_list(o.ops, "all") && bench_ops[i].in_all) || in_list(o.ops, bench_ops[i].op))
                n_specs += bench_ops[i].make(&o, bench_ops[i].op, specs + n_specs,
                                             MAX_CASES - n_specs);
    }

    /* bf16 / f16: every op must take it (the library's backward, merge and softmax are
     * float32 only): a clear refusal, not a silently float32 row under a bf16 header */
    for (int i = 0; i < n_specs; i++) {
        const op_desc *op = cases_find_op(specs[i].op);
        if (specs[i].dtype != FLASHC_F32 && !op->any_dtype) {
            fprintf(stderr,
                    "flashc bench: --dtype %s: op %s runs float32 only in the library (bf16 and "
                    "f16: attn, rmsnorm, rmsnorm_res, swiglu)\n",
                    dtype_name(specs[i].dtype), op->name);
            free(specs);
            free(res);
            return 2;
        }
    }

    report_meta meta;
    report_meta_init(&meta, argc, argv);
    meta.dtype = "f32";
    for (int i = 0; i < n_specs; i++) {
        const char *name = dtype_name(specs[i].dtype);
        meta.dtype = i == 0 || strcmp(meta.dtype, name) == 0 ? name : "mixed (see the problems)";
    }
    meta.build = flashc_build_info();
    meta.threads = o.threads ? (int)o.threads : flashc_get_num_threads();
    meta.seed = o.seed_given ? (uint64_t)o.seed : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 16);
    if (strcmp(o.suite, "check") == 0) {
        report_note(&meta, "problems: the `flashc check` table (%d cases)", n_specs);
    } else {
        int has_attn = 0, has_rows = 0;
        for (int i = 0; i < n_specs; i++) {
            case_spec full = specs[i];
            case_spec_defaults(&full);
            has_attn |= full.sq > 0;
            has_rows |= full.rows > 0;
        }
        if (has_attn)
            report_note(&meta,
                        "attention: batch %lld, heads %lld (kv heads %lld), d %lld, %s, tiles %s; "
                        "n = Sq = Sk",
                        (long long)o.batch, (long long)o.heads, (long long)kvh, (long long)o.d,
                        o.causal ? "causal (bottom-right aligned)" : "non-causal",
                        o.br || o.bc ? "as given" : "library default");
        if (has_rows)
            report_note(&meta,
                        "row ops: n = T = %lld tokens; RMSNorm d = D = %lld, SwiGLU d = I = %lld "
                        "(Qwen3-0.6B: d_model 1024, I 3072); eps 1e-6",
                        (long long)o.tokens, (long long)o.hidden, (long long)o.inter);
    }
    add_backward_notes(&meta, specs, n_specs);
    if (strcmp(meta.dtype, "f32") != 0)
        report_note(&meta,
                    "dtype %s: the tensors in that storage (attention's LSE float32), float32 "
                    "accumulation; inputs rounded into it once; max_err of the output (widened) "
                    "vs the naive reference in float32 on the same rounded inputs",
                    meta.dtype);
    report_note(&meta, "%s; naive = the float64-accumulating reference; time = "
                       "median of `reps` runs after %lld warm-up run(s), except that a run longer "
                       "than --budget = %g s is not repeated for warm-up (it counts as the first "
                       "timed run; `warmup` in csv/json)",
                strcmp(meta.dtype, "f32") == 0 ? "float32 everywhere" : "float32 arithmetic",
                (long long)o.warmup, o.budget);
    report_note(&meta, "GFLOP/s = 4 * B * Hq * D * (visible q-k pairs) / t, so causal counts "
                       "only the unmasked half; GB/s = (inputs read once + outputs written once) / t");
    report_note(&meta, "peak MiB = the library's own allocations (counting allocator) during one "
                       "call; RSS MiB = the case's child process peak RSS (inputs included)");
    report_note(&meta, "traffic MiB = modeled bytes moved (docs/traffic.md); max_err vs the naive "
                       "reference (%s|diff|/(1+|ref|))%s",
                strcmp(meta.dtype, "f32") == 0 ? "attention O: absolute; others " : "all ",
                o.ref_rows && strcmp(o.suite, "check") != 0
                    ? "; attention: over the last --ref-rows query rows when n is larger (an "
                      "exact sub-problem)"
                    : "");

    /* run */
    int n_res = 0, bad = 0;
    int total = 0;
    for (int i = 0; i < n_specs; i++) {
        const op_desc *op = cases_find_op(specs[i].op);
        for (int k = 0; k < op->n_impls; k++)
            total += !o.impls || in_list(o.impls, op->impls[k]);
    }
    for (int i = 0; i < n_specs; i++) {
        const op_desc *op = cases_find_op(specs[i].op);
        case_spec full = specs[i];
        case_spec_defaults(&full);
        char shape[160];
        case_describe(&full, shape, sizeof shape);
        const int first = n_res;
        for (int k = 0; k < op->n_impls; k++) {
            if (o.impls && !in_list(o.impls, op->impls[k]))
                continue;
            bench_result *r = &res[n_res++];
            memset(r, 0, sizeof *r);
            fprintf(stderr, "[%d/%d] %s %s %s ... ", n_res, total, op->name, op->impls[k], shape);
            const double t0 = now_ms();
            run_case(&o, &specs[i], k, meta.seed + (uint64_t)i, r);
            snprintf(r->op, sizeof r->op, "%s", op->name);
            snprintf(r->impl, sizeof r->impl, "%s", op->impls[k]);
            snprintf(r->shape, sizeof r->shape, "%s", shape);
            snprintf(r->dtype, sizeof r->dtype, "%s", dtype_name(full.dtype));
            r->impl_index = k;
            r->n = full.sq ? full.sq : full.rows;
            r->d = full.sq ? full.d : full.width;
            r->tol = full.tol > 0 ? full.tol : case_default_tol(&full);
            const double secs = (now_ms() - t0) * 1e-3;
            if (r->failed) {
                fprintf(stderr, "FAILED: %s\n", r->error);
                bad = 1;
            } else {
                char err[32] = "reference";
                if (r->max_err >= 0.0)
                    snprintf(err, sizeof err, "err %.1e", r->max_err);
                fprintf(stderr, "%.3f ms median of %d, %s (%.1f s)\n", r->ms, r->reps, err, secs);
                if (!(r->max_err <= r->tol) || r->inputs_changed) { /* NaN fails too */
                    fprintf(stderr, "    %s %s: %s\n", op->name, op->impls[k],
                            r->inputs_changed ? "modified its inputs"
                                              : "max_err above the tolerance");
                    bad = 1;
                }
            }
        }
        /* ratios against the naive row of this problem */
        for (int j = first; j < n_res; j++) {
            const bench_result *ref = &res[first];
            bench_result *x = &res[j];
            if (ref->impl_index != 0 || ref->failed || x->failed || x->impl_index == 0)
                continue;
            x->speedup = ref->ms / x->ms;
            /* naive allocates, the fast path nothing: infinite; neither allocates: n/a (0) */
            x->mem_ratio = x->peak_mib > 0    ? ref->peak_mib / x->peak_mib
                           : ref->peak_mib > 0 ? INFINITY
                                               : 0.0;
            x->rss_ratio = ref->rss_mib / x->rss_mib;
        }
    }

    if (o.ceiling) {
        const int threads = o.threads ? (int)o.threads : flashc_get_num_threads();
        const int64_t reps = o.reps_given ? o.reps : 3;
        bench_result *peak[3] = {&res[n_res], &res[n_res + 1], &res[n_res + 2]};
        static const int kinds[3] = {CEIL_SGEMM, CEIL_COPY, CEIL_GEMM_BF16};
        static const char *const names[3] = {"sgemm openblas", "copy stream", "gemm_bf16 onednn"};
        for (int k = 0; k < 3; k++) {
            fprintf(stderr, "[ceiling] %s ... ", names[k]);
            run_ceiling(kinds[k], threads, o.ceiling_n, reps, peak[k]);
            if (peak[k]->failed) {
                fprintf(stderr, "FAILED: %s\n", peak[k]->error);
                if (k < 2) /* the bf16 gemm is an optional peer: its row says why it failed */
                    bad = 1;
            } else {
                fprintf(stderr, "%.3f ms median of %d\n", peak[k]->ms, peak[k]->reps);
            }
        }
        n_res += 3;
        /* each fast row as a fraction of its ceiling: FLOP rates of a gemm (bf16 rows: the bf16
         * gemm when it ran), byte rates of copy */
        char list[240] = "";
        size_t used = 0;
        for (int i = 0; i < n_res - 3 && used < sizeof list; i++) {
            const bench_result *x = &res[i];
            const bench_result *c = x->gflops < 0 ? peak[1]
                                    : !strcmp(x->dtype, "bf16") && !peak[2]->failed ? peak[2]
                                                                                   : peak[0];
            if (x->failed || x->impl_index == 0 || c->failed)
                continue;
            const double frac = x->gflops >= 0 ? x->gflops / c->gflops : x->gbps / c->gbps;
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s %s n=%lld %.0f%%",
                                     used ? ", " : "", x->op, x->impl, (long long)x->n,
                                     100.0 * frac);
        }
        report_note(&meta, "ceilings (--ceiling, same run): sgemm = OpenBLAS %lld^3 float32, "
                           "gemm_bf16 = oneDNN bf16 x bf16 -> float32 (the bf16 rows' ceiling), "
                           "copy = memcpy of 512 MiB in 1 MiB blocks (bytes read + written)",
                    (long long)o.ceiling_n);
        if (used)
            report_note(&meta, "of ceiling (GFLOP/s of sgemm or gemm_bf16, GB/s of copy): %s", list);
    }
    /* The library picks tiles per problem when --br/--bc are not given: list what it used. */
    char tiles[256] = "";
    size_t used = 0;
    for (int i = 0; i < n_res && used < sizeof tiles; i++)
        if (res[i].impl_index > 0 && res[i].tile_pairs > 0 && !res[i].failed)
            used += (size_t)snprintf(tiles + used, sizeof tiles - used, "%s%s n=%lld %lldx%lld",
                                     used ? "; " : "", res[i].op, (long long)res[i].n,
                                     (long long)res[i].block_q, (long long)res[i].block_k);
    if (used)
        report_note(&meta, "tiles used (Br x Bc): %s", tiles);
    report_write(stdout, o.format, &meta, res, n_res);
    free(specs);
    free(res);
    return bad ? 1 : 0;
}
