/*
 * cpu_speed.c — the CPU speed targets of issue 6, every row against a ceiling measured in the
 * same run (the machines are shared and noisy: only same-run ratios mean anything).
 *
 *   flashc_cpu_speed [--threads N] [--reps R] [--quick] [--rows]
 *
 * Rows (medians of R timed calls after one warm-up, fresh random inputs):
 *   sgemm  OpenBLAS 4096^3, OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unset (tools/ceiling.c)
 *   copy   stream copy (memcpy in 1 MiB blocks), bytes read + written
 *   attn   flashc_attn_fwd, B = 1, H = 16, n = 2048, D = 128 and 64, f32 / bf16 / f16,
 *          causal and not; GFLOP/s with FLOPs = 4 H n^2 D (halved when causal); ratio to sgemm
 *   attn decode  1 query row, Sk = 32768, 16 query / 8 KV heads, D = 128, f32 / bf16 / f16;
 *          GB/s of K + V read once; ratio to copy
 *   rmsnorm, swiglu  T = 8192 rows of 4096, f32 / bf16 / f16; GB/s of the minimal bytes (read x,
 *          write y; read gate|up, write out); ratio to copy
 * and the derived checks: causal time / non-causal time, bf16 time / f32 time.
 * --rows: only the copy ceiling and the rmsnorm / swiglu rows (seconds instead of a minute: for
 * repeated before/after runs of the row kernels).
 * This is the ladder harness behind bench/RESULTS.md "CPU speed"; `flashc bench --ceiling`
 * gives the same ceilings beside the CLI's own rows.
 */
#define _POSIX_C_SOURCE 200809L
#include "../tools/ceiling.h"
#include "internal.h" /* flashc__store: the library's rounding */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static uint64_t rng = 0x2545f4914f6cdd1dull;

static float rnd_normal(void)
{
    double s = 0.0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (double)(rng >> 11) * (1.0 / 9007199254740992.0);
    }
    return (float)((s - 2.0) * 1.7320508);
}

/* A buffer of n random N(0, 1) values in dtype dt (rounded once). */
static void *random_buf(int64_t n, flashc_dtype dt)
{
    void *p = malloc((size_t)n * flashc_dtype_size(dt));
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        flashc__store(p, dt, i, rnd_normal()); /* rounded to nearest even once */
    return p;
}

typedef struct opts {
    int threads, reps, quick, rows;
} opts;

/* ---- ceilings (sgemm in a child: it edits its environment before loading OpenBLAS) ---------- */

static int ceiling_in_child(int sgemm, const opts *o, ceiling_result *r)
{
    int fd[2];
    if (pipe(fd) != 0)
        return -1;
    fflush(NULL);
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        ceiling_result c;
        if (sgemm)
            ceiling_sgemm(o->threads, o->quick ? 2048 : 4096, 3, &c);
        else
            ceiling_copy(o->threads, (int64_t)512 << 20, o->reps, &c);
        ssize_t w = write(fd[1], &c, sizeof c);
        _exit(w == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fd[1]);
    ssize_t n = read(fd[0], r, sizeof *r);
    close(fd[0]);
    waitpid(pid, NULL, 0);
    if (n != (ssize_t)sizeof *r) {
        memset(r, 0, sizeof *r);
        snprintf(r->error, sizeof r->error, "the ceiling child failed");
        return -1;
    }
    return r->error[0] ? -1 : 0;
}

/* ---- attention ------------------------------------------------------------------------------ */

static double time_attn(const opts *o, int64_t n, int64_t D, int causal, flashc_dtype dt)
{
    const int64_t H = 16, elems = n * H * D;
    void *q = random_buf(elems, dt), *k = random_buf(elems, dt), *v = random_buf(elems, dt);
    void *out = random_buf(elems, dt);
    flashc_tensor tq = flashc_tensor_4d(q, dt, 1, n, H, D), tk = flashc_tensor_4d(k, dt, 1, n, H, D);
    flashc_tensor tv = flashc_tensor_4d(v, dt, 1, n, H, D), to = flashc_tensor_4d(out, dt, 1, n, H, D);
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = causal;
    p.num_threads = o->threads;
    double t[64];
    if (flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, NULL) != FLASHC_OK) {
        fprintf(stderr, "flashc_attn_fwd: %s\n", flashc_last_error());
        exit(1);
    }
    for (int r = 0; r < o->reps; r++) {
        const double t0 = now_s();
        flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, NULL);
        t[r] = now_s() - t0;
    }
    qsort(t, (size_t)o->reps, sizeof(double), cmp_double);
    free(q), free(k), free(v), free(out);
    return t[o->reps / 2];
}

/* Decode: 1 query row, Sk keys, 16 query heads on 8 KV heads, D = 128 (PERF.md's shape). */
static double time_decode(const opts *o, int64_t Sk, flashc_dtype dt)
{
    const int64_t Hq = 16, Hkv = 8, D = 128;
    void *q = random_buf(Hq * D, dt), *out = random_buf(Hq * D, dt);
    void *k = random_buf(Sk * Hkv * D, dt), *v = random_buf(Sk * Hkv * D, dt);
    flashc_tensor tq = flashc_tensor_4d(q, dt, 1, 1, Hq, D), to = flashc_tensor_4d(out, dt, 1, 1, Hq, D);
    flashc_tensor tk = flashc_tensor_4d(k, dt, 1, Sk, Hkv, D), tv = flashc_tensor_4d(v, dt, 1, Sk, Hkv, D);
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = 1;
    p.num_threads = o->threads;
    double t[64];
    for (int r = -1; r < o->reps; r++) {
        const double t0 = now_s();
        if (flashc_attn_fwd(&p, &tq, &tk, &tv, &to, NULL, NULL) != FLASHC_OK) {
            fprintf(stderr, "flashc_attn_fwd: %s\n", flashc_last_error());
            exit(1);
        }
        if (r >= 0)
            t[r] = now_s() - t0;
    }
    qsort(t, (size_t)o->reps, sizeof(double), cmp_double);
    free(q), free(out), free(k), free(v);
    return t[o->reps / 2];
}

/* ---- row ops --------------------------------------------------------------------------------- */

static double time_rows(const opts *o, int swiglu, flashc_dtype dt, int64_t T, int64_t D)
{
    void *x = random_buf(T * D * (swiglu ? 2 : 1), dt), *w = random_buf(D, dt);
    void *y = random_buf(T * D, dt);
    flashc_tensor tx = flashc_tensor_2d(x, dt, T, D * (swiglu ? 2 : 1));
    flashc_tensor tw = flashc_tensor_1d(w, dt, D), ty = flashc_tensor_2d(y, dt, T, D);
    flashc_set_num_threads(o->threads);
    double t[64];
    for (int r = -1; r < o->reps; r++) {
        const double t0 = now_s();
        const flashc_status s = swiglu ? flashc_swiglu(&tx, &ty) : flashc_rmsnorm(&tx, &tw, 1e-5f, &ty);
        if (s != FLASHC_OK) {
            fprintf(stderr, "%s: %s\n", swiglu ? "swiglu" : "rmsnorm", flashc_last_error());
            exit(1);
        }
        if (r >= 0)
            t[r] = now_s() - t0;
    }
    qsort(t, (size_t)o->reps, sizeof(double), cmp_double);
    free(x), free(w), free(y);
    return t[o->reps / 2];
}

static const char *dname(flashc_dtype dt)
{
    return dt == FLASHC_F32 ? "f32" : dt == FLASHC_BF16 ? "bf16" : "f16";
}

/* The attention rows and their derived checks; sg / cp: the ceilings, NULL if they failed. */
static void attention_rows(const opts *o, const ceiling_result *sg, const ceiling_result *cp)
{
    const int64_t n = o->quick ? 1024 : 2048;
    double t32[2][2] = {{0}}; /* [D = 128, 64][causal] */
    const int64_t Ds[2] = {128, 64};
    for (int di = 0; di < 2; di++)
        for (int dt = 0; dt < 3; dt++)
            for (int causal = 0; causal < 2; causal++) {
                const flashc_dtype d = dt == 0 ? FLASHC_F32 : dt == 1 ? FLASHC_BF16 : FLASHC_F16;
                if (d != FLASHC_F32 && causal)
                    continue;
                const double t = time_attn(o, n, Ds[di], causal, d);
                const double gf = 4.0 * 16 * (double)n * (double)n * (double)Ds[di] *
                                  (causal ? 0.5 : 1.0) / t * 1e-9;
                if (d == FLASHC_F32)
                    t32[di][causal] = t;
                printf("| attn fwd %s | flash | H16 n%lld D%lld%s | %.1f | %.1f | | %.0f%% of sgemm |\n",
                       dname(d), (long long)n, (long long)Ds[di], causal ? " causal" : "",
                       t * 1e3, gf, sg ? 100.0 * gf / sg->gflops : NAN);
                if (d != FLASHC_F32)
                    printf("| | | %s time / f32 time | %.3f | | | |\n", dname(d),
                           t / t32[di][0]);
            }
    for (int di = 0; di < 2; di++)
        printf("| | | D%lld causal time / non-causal time | %.3f | | | |\n", (long long)Ds[di],
               t32[di][1] / t32[di][0]);

    const int64_t Sk = o->quick ? 8192 : 32768;
    for (int dt = 0; dt < 3; dt++) {
        const flashc_dtype d = dt == 0 ? FLASHC_F32 : dt == 1 ? FLASHC_BF16 : FLASHC_F16;
        const double t = time_decode(o, Sk, d);
        const double gbps = 2.0 * (double)Sk * 8 * 128 * (double)flashc_dtype_size(d) / t * 1e-9;
        printf("| attn decode %s | flash | 1 query, Sk %lld, H 16/8, D128 | %.2f | | %.1f (K+V) | %.0f%% of copy |\n",
               dname(d), (long long)Sk, t * 1e3, gbps, cp ? 100.0 * gbps / cp->gbps : NAN);
    }
}

int main(int argc, char **argv)
{
    opts o = {2, 7, 0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc)
            o.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            o.reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--quick"))
            o.quick = 1;
        else if (!strcmp(argv[i], "--rows"))
            o.rows = 1;
        else {
            fprintf(stderr, "usage: %s [--threads N] [--reps R] [--quick] [--rows]\n", argv[0]);
            return 2;
        }
    }
    if (o.reps < 1 || o.reps > 64 || o.threads < 1) {
        fprintf(stderr, "--reps must be 1..64 and --threads >= 1\n");
        return 2;
    }
    ceiling_result sg, cp;
    const int sg_ok = !o.rows && ceiling_in_child(1, &o, &sg) == 0;
    const int cp_ok = ceiling_in_child(0, &o, &cp) == 0;
    time_t now = time(NULL);
    char when[32];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", gmtime(&now));
    printf("%s, %d threads, %s\n\n", when, o.threads, flashc_build_info());
    printf("| op | impl | shape | ms | GFLOP/s | GB/s | of ceiling |\n|---|---|---|---|---|---|---|\n");
    if (!o.rows) {
        if (sg_ok)
            printf("| sgemm | openblas | %d^3 | %.1f | %.1f | | 100%% |\n", o.quick ? 2048 : 4096, sg.ms,
                   sg.gflops);
        else
            printf("| sgemm | openblas | | | | | %s |\n", sg.error);
    }
    if (cp_ok)
        printf("| copy | stream | 512 MiB | %.1f | | %.1f | 100%% |\n", cp.ms, cp.gbps);
    else
        printf("| copy | stream | | | | | %s |\n", cp.error);

    if (!o.rows)
        attention_rows(&o, sg_ok ? &sg : NULL, cp_ok ? &cp : NULL);

    const int64_t T = o.quick ? 2048 : 8192, W = 4096;
    for (int op = 0; op < 2; op++)
        for (int dt = 0; dt < 3; dt++) {
            const flashc_dtype d = dt == 0 ? FLASHC_F32 : dt == 1 ? FLASHC_BF16 : FLASHC_F16;
            const double t = time_rows(&o, op, d, T, W);
            const double bytes = (op ? 3.0 : 2.0) * (double)T * (double)W * (double)flashc_dtype_size(d);
            const double gbps = bytes / t * 1e-9;
            printf("| %s %s | fused | %lldx%lld | %.2f | | %.1f | %.0f%% of copy |\n",
                   op ? "swiglu" : "rmsnorm", dname(d), (long long)T, (long long)W, t * 1e3, gbps,
                   cp_ok ? 100.0 * gbps / cp.gbps : NAN);
        }
    if (sg_ok)
        printf("\nsgemm: %s\n", sg.detail);
    if (cp_ok)
        printf("copy: %s\n", cp.detail);
    return 0;
}
