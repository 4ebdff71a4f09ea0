/*
 * cp_scale.c — strong and weak scaling of context-parallel attention (flashc_cp_attn_fwd/_bwd
 * over NCCL) on the GPUs of one host: one thread per GPU, no torchrun, no MPI.
 *
 *   flashc_cp_scale --gpus 1,2,4,8 --mode strong --seqlens 131072,262144,524288,1048576
 *                   [--heads 32 --kv-heads 8 --dim 128 --batch 1 --shard zigzag|contiguous|striped
 *                    --causal 1 --bwd 1 --reps 5 --warmup 2 --serialize 0]
 *   strong: seqlen is the whole sequence, split over the GPUs; weak: seqlen is each GPU's slice.
 *
 * For each (GPU count, seqlen): fwd (and fwd+bwd) time = median over reps of the slowest rank's
 * time (events around the call on each rank's stream, a barrier before each rep); tokens/s;
 * TFLOP/s per GPU (4 B Hq D S^2 for the forward, half of it causal, the backward 2.5x); and two
 * references measured in the same run on GPU 0: the single-GPU kernel (flashc_attn_fwd/_bwd) on
 * the whole sequence (strong-scaling efficiency T1 / (N TN), when it fits) and on one GPU's
 * slice against itself (per-GPU TFLOP/s of the ring vs the kernel's at the same slice: the
 * issue's 90% target). FLOPs are those of the whole problem (a causal triangle counts half the
 * square): the ring's per GPU is flops(S) / N, the slice kernel's flops(S / N).
 * Inputs are a constant bf16 pattern (flash attention's time does not depend on the values).
 * One JSON object per line on stdout; a table on stderr. NCCL_NVLS_ENABLE=0 is set before NCCL
 * starts. Needs the CUDA backend and NCCL (exits 77 otherwise).
 */
#define _POSIX_C_SOURCE 200809L
#include "flashc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FLASHC_HAVE_CUDA
#include <cuda_runtime_api.h>

typedef struct opts {
    int gpus[8], ngpus;
    int64_t seqlens[16];
    int nseq;
    int strong, causal, bwd, reps, warmup, serialize;
    int64_t B, Hq, Hkv, D;
    flashc_cp_shard shard;
} opts;

static int parse_list(const char *s, int64_t *out, int max)
{
    int n = 0;
    while (*s && n < max) {
        char *end;
        out[n++] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (end == s && *s)
            break;
    }
    return n;
}

typedef struct world {
    int N;
    const opts *o;
    int64_t S;
    unsigned char id[FLASHC_CP_NCCL_ID_BYTES];
    pthread_barrier_t bar;
    double *ms_fwd, *ms_bwd; /* [rep * N + rank] */
    int failed;
    char err[512];
} world;

typedef struct rank_arg {
    world *w;
    int rank;
} rank_arg;

static void fail_rank(world *w, const char *what)
{
    if (!w->failed)
        snprintf(w->err, sizeof w->err, "%s: %s", what, flashc_last_error());
    w->failed = 1;
}

static void *rank_main(void *arg)
{
    rank_arg *a = arg;
    world *w = a->w;
    const opts *o = w->o;
    const int r = a->rank, N = w->N;
    flashc_cp_comm *comm = NULL;
    if (cudaSetDevice(o->gpus[r]) != cudaSuccess) {
        snprintf(w->err, sizeof w->err, "rank %d: cudaSetDevice(%d) failed", r, o->gpus[r]);
        w->failed = 1;
    } else if (flashc_cp_comm_nccl_init(N, r, w->id, sizeof w->id, &comm) != FLASHC_OK) {
        fail_rank(w, "flashc_cp_comm_nccl_init");
    }
    if (!comm) {
        /* meet the others at the two barriers they pass before seeing the failure (the first
         * rep's and the last), so that none waits forever */
        pthread_barrier_wait(&w->bar);
        pthread_barrier_wait(&w->bar);
        return NULL;
    }
    const int64_t L = flashc_cp_local_len(o->shard, w->S, N, r);
    const size_t nq = (size_t)(o->B * L * o->Hq * o->D) * 2, nk = (size_t)(o->B * L * o->Hkv * o->D) * 2;
    void *q = NULL, *k = NULL, *v = NULL, *out = NULL, *dout = NULL, *dq = NULL, *dk = NULL,
         *dv = NULL;
    float *lse = NULL;
    cudaStream_t st;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    int ok = cudaMalloc(&q, nq) == cudaSuccess && cudaMalloc(&k, nk) == cudaSuccess &&
             cudaMalloc(&v, nk) == cudaSuccess && cudaMalloc(&out, nq) == cudaSuccess &&
             cudaMalloc(&dout, nq) == cudaSuccess && cudaMalloc(&dq, nq) == cudaSuccess &&
             cudaMalloc(&dk, nk) == cudaSuccess && cudaMalloc(&dv, nk) == cudaSuccess &&
             cudaMalloc((void **)&lse, (size_t)(o->B * o->Hq * L) * 4) == cudaSuccess;
    if (!ok) {
        snprintf(w->err, sizeof w->err, "rank %d: cudaMalloc failed (L = %lld)", r, (long long)L);
        w->failed = 1;
    } else {
        cudaMemset(q, 0x3c, nq), cudaMemset(k, 0x3b, nk), cudaMemset(v, 0x3c, nk);
        cudaMemset(dout, 0x3c, nq);
    }
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_BF16, o->B, L, o->Hq, o->D);
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_BF16, o->B, L, o->Hkv, o->D);
    flashc_tensor tv = flashc_tensor_4d(v, FLASHC_BF16, o->B, L, o->Hkv, o->D);
    flashc_tensor to = flashc_tensor_4d(out, FLASHC_BF16, o->B, L, o->Hq, o->D);
    flashc_tensor tdo = flashc_tensor_4d(dout, FLASHC_BF16, o->B, L, o->Hq, o->D);
    flashc_tensor tdq = flashc_tensor_4d(dq, FLASHC_BF16, o->B, L, o->Hq, o->D);
    flashc_tensor tdk = flashc_tensor_4d(dk, FLASHC_BF16, o->B, L, o->Hkv, o->D);
    flashc_tensor tdv = flashc_tensor_4d(dv, FLASHC_BF16, o->B, L, o->Hkv, o->D);
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, o->B, o->Hq, L);
    flashc_tensor *all[] = {&tq, &tk, &tv, &to, &tdo, &tdq, &tdk, &tdv, &tl};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        all[i]->device = FLASHC_DEVICE_CUDA;
    flashc_cp_params p = flashc_cp_params_default();
    p.comm = comm;
    p.seqlen = w->S;
    p.shard = o->shard;
    p.causal = o->causal;
    p.serialize = o->serialize;
    p.cuda_stream = st;
    cudaEvent_t e0, e1, e2;
    cudaEventCreate(&e0), cudaEventCreate(&e1), cudaEventCreate(&e2);
    for (int it = 0; it < o->warmup + o->reps; it++) {
        pthread_barrier_wait(&w->bar);
        if (w->failed)
            break;
        cudaEventRecord(e0, st);
        if (flashc_cp_attn_fwd(&p, &tq, &tk, &tv, &to, &tl) != FLASHC_OK)
            fail_rank(w, "flashc_cp_attn_fwd");
        cudaEventRecord(e1, st);
        if (o->bwd && !w->failed &&
            flashc_cp_attn_bwd(&p, &tq, &tk, &tv, &to, &tdo, &tl, &tdq, &tdk, &tdv) != FLASHC_OK)
            fail_rank(w, "flashc_cp_attn_bwd");
        cudaEventRecord(e2, st);
        if (cudaStreamSynchronize(st) != cudaSuccess) {
            snprintf(w->err, sizeof w->err, "rank %d: %s", r, cudaGetErrorString(cudaGetLastError()));
            w->failed = 1;
        }
        float f = 0, b = 0;
        cudaEventElapsedTime(&f, e0, e1), cudaEventElapsedTime(&b, e1, e2);
        if (it >= o->warmup)
            w->ms_fwd[(it - o->warmup) * N + r] = f, w->ms_bwd[(it - o->warmup) * N + r] = b;
    }
    pthread_barrier_wait(&w->bar);
    cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(out), cudaFree(dout), cudaFree(dq);
    cudaFree(dk), cudaFree(dv), cudaFree(lse);
    cudaStreamDestroy(st);
    flashc_cp_comm_destroy(comm);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* median over reps of the slowest rank */
static double median_max(const double *ms, int reps, int N)
{
    double *m = malloc(sizeof *m * (size_t)reps);
    for (int i = 0; i < reps; i++) {
        m[i] = 0;
        for (int r = 0; r < N; r++)
            m[i] = ms[i * N + r] > m[i] ? ms[i * N + r] : m[i];
    }
    qsort(m, (size_t)reps, sizeof *m, cmp_d);
    const double v = m[reps / 2];
    free(m);
    return v;
}

static int run_world(const opts *o, int N, int64_t S, double *fwd_ms, double *bwd_ms, char *err)
{
    world w = {.N = N, .o = o, .S = S};
    w.ms_fwd = calloc((size_t)(o->reps * N), sizeof(double));
    w.ms_bwd = calloc((size_t)(o->reps * N), sizeof(double));
    if (flashc_cp_nccl_unique_id(w.id, sizeof w.id) != FLASHC_OK) {
        snprintf(err, 512, "%s", flashc_last_error());
        return 1;
    }
    pthread_barrier_init(&w.bar, NULL, (unsigned)N);
    pthread_t th[8];
    rank_arg args[8];
    for (int r = 0; r < N; r++) {
        args[r] = (rank_arg){&w, r};
        pthread_create(&th[r], NULL, rank_main, &args[r]);
    }
    for (int r = 0; r < N; r++)
        pthread_join(th[r], NULL);
    pthread_barrier_destroy(&w.bar);
    *fwd_ms = median_max(w.ms_fwd, o->reps, N);
    *bwd_ms = median_max(w.ms_bwd, o->reps, N);
    free(w.ms_fwd), free(w.ms_bwd);
    if (w.failed)
        snprintf(err, 512, "%s", w.err);
    return w.failed;
}

/* the single-GPU kernel on GPU 0 over S tokens: median fwd and bwd ms; 1 if it does not fit */
static int run_single(const opts *o, int64_t S, double *fwd_ms, double *bwd_ms)
{
    cudaSetDevice(o->gpus[0]);
    const size_t nq = (size_t)(o->B * S * o->Hq * o->D) * 2, nk = (size_t)(o->B * S * o->Hkv * o->D) * 2;
    void *b[8] = {0};
    float *lse = NULL;
    const size_t sz[8] = {nq, nk, nk, nq, nq, nq, nk, nk};
    for (int i = 0; i < 8; i++)
        if (cudaMalloc(&b[i], sz[i]) != cudaSuccess) {
            cudaGetLastError();
            for (int j = 0; j < i; j++)
                cudaFree(b[j]);
            return 1;
        }
    if (cudaMalloc((void **)&lse, (size_t)(o->B * o->Hq * S) * 4) != cudaSuccess) {
        cudaGetLastError();
        for (int j = 0; j < 8; j++)
            cudaFree(b[j]);
        return 1;
    }
    for (int i = 0; i < 8; i++)
        cudaMemset(b[i], 0x3c, sz[i]);
    flashc_tensor t[8];
    const int64_t H[8] = {o->Hq, o->Hkv, o->Hkv, o->Hq, o->Hq, o->Hq, o->Hkv, o->Hkv};
    for (int i = 0; i < 8; i++) {
        t[i] = flashc_tensor_4d(b[i], FLASHC_BF16, o->B, S, H[i], o->D);
        t[i].device = FLASHC_DEVICE_CUDA;
    }
    flashc_tensor tl = flashc_tensor_3d(lse, FLASHC_F32, o->B, o->Hq, S);
    tl.device = FLASHC_DEVICE_CUDA;
    flashc_attn_params ap = flashc_attn_params_default();
    ap.causal = o->causal;
    cudaEvent_t e0, e1, e2;
    cudaEventCreate(&e0), cudaEventCreate(&e1), cudaEventCreate(&e2);
    double *f = malloc(sizeof *f * (size_t)o->reps), *g = malloc(sizeof *g * (size_t)o->reps);
    int bad = 0;
    for (int it = 0; it < o->warmup + o->reps && !bad; it++) {
        cudaEventRecord(e0, 0);
        bad |= flashc_attn_fwd(&ap, &t[0], &t[1], &t[2], &t[3], &tl, NULL) != FLASHC_OK;
        cudaEventRecord(e1, 0);
        if (o->bwd && !bad)
            bad |= flashc_attn_bwd(&ap, &t[0], &t[1], &t[2], &t[3], &t[4], &tl, &t[5], &t[6],
                                   &t[7], NULL) != FLASHC_OK;
        cudaEventRecord(e2, 0);
        bad |= cudaDeviceSynchronize() != cudaSuccess;
        float x = 0, y = 0;
        cudaEventElapsedTime(&x, e0, e1), cudaEventElapsedTime(&y, e1, e2);
        if (it >= o->warmup)
            f[it - o->warmup] = x, g[it - o->warmup] = y;
    }
    if (!bad) {
        qsort(f, (size_t)o->reps, sizeof *f, cmp_d), qsort(g, (size_t)o->reps, sizeof *g, cmp_d);
        *fwd_ms = f[o->reps / 2], *bwd_ms = g[o->reps / 2];
    } else {
        fprintf(stderr, "single-GPU kernel at S=%lld: %s\n", (long long)S, flashc_last_error());
    }
    free(f), free(g);
    for (int j = 0; j < 8; j++)
        cudaFree(b[j]);
    cudaFree(lse);
    return bad;
}

/* multiply-adds x 2 of attention over S tokens (the whole causal triangle or square) */
static double flops_fwd(const opts *o, int64_t S)
{
    const double f = 4.0 * (double)o->B * (double)o->Hq * (double)o->D * (double)S * (double)S;
    return o->causal ? f / 2 : f;
}

int main(int argc, char **argv)
{
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    opts o = {.ngpus = 0, .strong = 1, .causal = 1, .bwd = 1, .reps = 5, .warmup = 2,
              .B = 1, .Hq = 32, .Hkv = 8, .D = 128, .shard = FLASHC_CP_SHARD_ZIGZAG};
    int64_t g[8];
    o.ngpus = parse_list("1,2,4,8", g, 8);
    o.nseq = parse_list("131072,262144,524288,1048576", o.seqlens, 16);
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--gpus")) o.ngpus = parse_list(v, g, 8);
        else if (!strcmp(a, "--seqlens")) o.nseq = parse_list(v, o.seqlens, 16);
        else if (!strcmp(a, "--mode")) o.strong = strcmp(v, "weak") != 0;
        else if (!strcmp(a, "--heads")) o.Hq = atoll(v);
        else if (!strcmp(a, "--kv-heads")) o.Hkv = atoll(v);
        else if (!strcmp(a, "--dim")) o.D = atoll(v);
        else if (!strcmp(a, "--batch")) o.B = atoll(v);
        else if (!strcmp(a, "--causal")) o.causal = atoi(v);
        else if (!strcmp(a, "--bwd")) o.bwd = atoi(v);
        else if (!strcmp(a, "--reps")) o.reps = atoi(v);
        else if (!strcmp(a, "--warmup")) o.warmup = atoi(v);
        else if (!strcmp(a, "--serialize")) o.serialize = atoi(v);
        else if (!strcmp(a, "--shard"))
            o.shard = !strcmp(v, "contiguous") ? FLASHC_CP_SHARD_CONTIGUOUS
                      : !strcmp(v, "striped")  ? FLASHC_CP_SHARD_STRIPED
                                               : FLASHC_CP_SHARD_ZIGZAG;
        else {
            fprintf(stderr, "unknown option %s\n", a);
            return 2;
        }
    }
    if (o.reps < 1)
        o.reps = 1;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1 || !flashc_cp_nccl_available()) {
        fprintf(stderr, "flashc_cp_scale: needs CUDA devices and NCCL (%s)\n", flashc_build_info());
        return 77;
    }
    for (int i = 0; i < 8; i++)
        o.gpus[i] = i;
    fprintf(stderr, "%-6s %4s %9s %9s %10s %10s %9s %9s %8s %8s\n", "mode", "gpus", "seqlen",
            "slice", "fwd ms", "bwd ms", "Mtok/s", "TF/GPU", "eff", "vs-slice");
    for (int si = 0; si < o.nseq; si++) {
        double t1f = 0, t1b = 0;
        const int have1 = o.strong && run_single(&o, o.seqlens[si], &t1f, &t1b) == 0;
        for (int gi = 0; gi < o.ngpus; gi++) {
            const int N = (int)g[gi];
            if (N > count) {
                fprintf(stderr, "(skipping %d GPUs: %d visible)\n", N, count);
                continue;
            }
            const int64_t S = o.strong ? o.seqlens[si] : o.seqlens[si] * N;
            double f = 0, b = 0, sf = 0, sb = 0;
            char err[512] = "";
            if (run_world(&o, N, S, &f, &b, err)) {
                fprintf(stderr, "N=%d S=%lld failed: %s\n", N, (long long)S, err);
                continue;
            }
            /* the single-GPU kernel on one GPU's slice: per-GPU throughput reference */
            const int have_slice = run_single(&o, S / N, &sf, &sb) == 0;
            const double ms = f + (o.bwd ? b : 0);
            const double flop = flops_fwd(&o, S) * (o.bwd ? 3.5 : 1.0);
            const double tf_gpu = flop / N / (ms * 1e-3) / 1e12;
            const double slice_flop = flops_fwd(&o, S / N) * (o.bwd ? 3.5 : 1.0);
            const double tf_slice = have_slice ? slice_flop / ((sf + (o.bwd ? sb : 0)) * 1e-3) / 1e12 : 0;
            const double t1 = t1f + (o.bwd ? t1b : 0);
            const double eff = o.strong ? (have1 ? t1 / (N * ms) : -1) : -1;
            fprintf(stderr, "%-6s %4d %9lld %9lld %10.2f %10.2f %9.3f %9.1f %8.3f %8.3f\n",
                    o.strong ? "strong" : "weak", N, (long long)S, (long long)(S / N), f, b,
                    (double)o.B * S / (ms * 1e-3) / 1e6, tf_gpu, eff,
                    have_slice ? tf_gpu / tf_slice : -1.0);
            printf("{\"mode\":\"%s\",\"gpus\":%d,\"seqlen\":%lld,\"B\":%lld,\"Hq\":%lld,\"Hkv\":%lld,"
                   "\"D\":%lld,\"causal\":%d,\"shard\":%d,\"serialize\":%d,\"fwd_ms\":%.4f,"
                   "\"bwd_ms\":%.4f,\"single_fwd_ms\":%.4f,\"single_bwd_ms\":%.4f,"
                   "\"slice_fwd_ms\":%.4f,\"slice_bwd_ms\":%.4f,\"tflops_per_gpu\":%.2f,"
                   "\"efficiency\":%.4f,\"vs_slice_kernel\":%.4f}\n",
                   o.strong ? "strong" : "weak", N, (long long)S, (long long)o.B,
                   (long long)o.Hq, (long long)o.Hkv, (long long)o.D, o.causal, (int)o.shard,
                   o.serialize, f, b, have1 ? t1f : -1.0, have1 ? t1b : -1.0,
                   have_slice ? sf : -1.0, have_slice ? sb : -1.0, tf_gpu, eff,
                   have_slice ? tf_gpu / tf_slice : -1.0);
            fflush(stdout);
        }
    }
    return 0;
}

#else
int main(void)
{
    fprintf(stderr, "flashc_cp_scale: this build has no CUDA backend\n");
    return 77;
}
#endif
