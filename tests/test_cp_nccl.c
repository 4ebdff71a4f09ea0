/*
 * test_cp_nccl.c — context parallelism on one GPU (issue 17): the CUDA half of the ring.
 *
 *   nccl_1rank   an NCCL communicator of one rank (flashc_cp_comm_nccl_init), bfloat16 and
 *                float16, three shards, causal and not, overlapped and serialized transfers:
 *                the one-step ring against single-call flashc_attn_fwd / _bwd on the device
 *                (the ring's own kernels: K/V pack, (O, LSE) merge, gradient adds, stores, the
 *                NCCL stream and events). With N = 1 no byte crosses NCCL (there is no peer);
 *                what a 2..8 rank NCCL ring sends is only run on a machine with that many GPUs
 *                (bench/gpu/cp_scaling.sh), never here.
 *   sim_ranks    N = 2, 3, 4, 8 simulated ranks on this one GPU (threads, one stream each,
 *                device-to-device copies as the transport): the whole ring schedule on the CUDA
 *                kernels, gathered and held to the same rule as the CPU test (test_cp.c): error
 *                vs the float64 reference <= 2 x the plain same-precision ring's.
 *   pending      an application's pending CUDA error is left to it (the ring launches nothing)
 * No CUDA device, or a build without CUDA: exit 77 (skipped). NCCL missing: nccl_1rank skips.
 * NCCL_NVLS_ENABLE=0 is set before NCCL starts (NVLink multicast stays off).
 */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef FLASHC_HAVE_CUDA
#include "cuda_common.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

static const flashc_cp_shard shards[3] = {FLASHC_CP_SHARD_CONTIGUOUS, FLASHC_CP_SHARD_ZIGZAG,
                                          FLASHC_CP_SHARD_STRIPED};
static const char *const shard_names[3] = {"contiguous", "zigzag", "striped"};

typedef struct gcase {
    int N, shard, causal, nccl, serialize;
    int64_t B, S, Hq, Hkv, D;
    flashc_dtype dt;
} gcase;

/* A device copy of h, or (h NULL) a buffer of NaN in every dtype, to show unwritten outputs. */
static void *dev_upload(const void *h, size_t bytes)
{
    if (h)
        return dupload(h, bytes);
    void *d = dalloc(bytes);
    CUDA_OK(cudaMemset(d, 0xff, bytes));
    return d;
}

static flashc_tensor dview4(void *d, flashc_dtype dt, int64_t B, int64_t S, int64_t H, int64_t D)
{
    flashc_tensor t = flashc_tensor_4d(d, dt, B, S, H, D);
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

static flashc_tensor dlse(float *d, int64_t B, int64_t H, int64_t S)
{
    flashc_tensor t = flashc_tensor_3d(d, FLASHC_F32, B, H, S);
    t.device = FLASHC_DEVICE_CUDA;
    return t;
}

/* rows of a global (B, S, HW) host buffer <-> a rank's (B, L, HW) slice, es-byte elements */
static void shard_rows(const gcase *c, int rank, void *global, void *local, int64_t HW, size_t es,
                       int gather)
{
    const int64_t L = flashc_cp_local_len(shards[c->shard], c->S, c->N, rank);
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t i = 0; i < L; i++) {
            const int64_t g = flashc_cp_global_index(shards[c->shard], c->S, c->N, rank, i);
            char *gp = (char *)global + (size_t)((b * c->S + g) * HW) * es;
            char *lp = (char *)local + (size_t)((b * L + i) * HW) * es;
            if (gather)
                memcpy(gp, lp, (size_t)HW * es);
            else
                memcpy(lp, gp, (size_t)HW * es);
        }
}

typedef struct rank_job {
    flashc_cp_params p;
    flashc_tensor q, k, v, o, lse, dout, dq, dk, dv;
    cudaStream_t stream;
    flashc_status st;
    char err[512];
} rank_job;

static void *rank_main(void *arg)
{
    rank_job *j = arg;
    j->st = flashc_cp_attn_fwd(&j->p, &j->q, &j->k, &j->v, &j->o, &j->lse);
    if (j->st == FLASHC_OK)
        j->st = flashc_cp_attn_bwd(&j->p, &j->q, &j->k, &j->v, &j->o, &j->dout, &j->lse, &j->dq,
                                   &j->dk, &j->dv);
    if (j->st == FLASHC_OK && cudaStreamSynchronize(j->stream) != cudaSuccess)
        j->st = FLASHC_ERR_DEVICE;
    if (j->st != FLASHC_OK)
        snprintf(j->err, sizeof j->err, "%s", flashc_last_error());
    return NULL;
}

static double max_err(const float *x, const float *ref, int64_t n)
{
    double e = 0.0;
    for (int64_t i = 0; i < n; i++) {
        if (isinf(ref[i]) && x[i] == ref[i])
            continue;
        const double d = fabs((double)x[i] - (double)ref[i]);
        if (!(d <= e))
            e = isnan(d) ? INFINITY : d;
    }
    return e;
}

static float *to_f32(const void *buf, int64_t n, flashc_dtype dt)
{
    float *y = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++)
        y[i] = flashc__load(buf, dt, i);
    return y;
}

static int64_t rule(const char *what, const gcase *c, const void *cp, const void *single,
                    const float *naive, const float *ref, int64_t n, flashc_dtype dt)
{
    float *a = to_f32(cp, n, dt), *b = to_f32(single, n, dt);
    const double e_cp = max_err(a, ref, n), e_single = max_err(b, ref, n);
    const double e_naive = naive ? max_err(naive, ref, n) : e_single;
    const double bound = naive ? 2.0 * e_naive : 2.0 * e_single + 1e-5;
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++)
        same += memcmp(&a[i], &b[i], 4) == 0;
    print_message("  %-4s cp %.3g  single %.3g  naive ring %.3g  bound %.3g  bitwise = single: "
                  "%lld/%lld\n", what, e_cp, e_single, e_naive, bound, (long long)same,
                  (long long)n);
    if (!(e_cp <= bound))
        fail_msg("%s: N=%d %s causal=%d %s: cp error %.3g > bound %.3g", what, c->N,
                 shard_names[c->shard], c->causal, flashc__dtype_name(dt), e_cp, bound);
    free(a), free(b);
    return same;
}

static void run_gcase(const gcase *c)
{
    const int N = c->N;
    const int64_t B = c->B, S = c->S, Hq = c->Hq, Hkv = c->Hkv, D = c->D;
    const flashc_dtype dt = c->dt;
    const size_t es = 2;
    const int64_t nq = B * S * Hq * D, nk = B * S * Hkv * D, nl = B * Hq * S;
    print_message("N=%d S=%lld %s causal=%d %s %s%s\n", N, (long long)S, shard_names[c->shard],
                  c->causal, flashc__dtype_name(dt), c->nccl ? "NCCL" : "simulated",
                  c->serialize ? " serialized" : "");
    float *qf = tu_alloc_normal(nq, 1.0f), *kf = tu_alloc_normal(nk, 1.0f);
    float *vf = tu_alloc_normal(nk, 1.0f), *dof = tu_alloc_normal(nq, 1.0f);
    uint16_t *qh = malloc((size_t)nq * es), *kh = malloc((size_t)nk * es);
    uint16_t *vh = malloc((size_t)nk * es), *doh = malloc((size_t)nq * es);
    for (int64_t i = 0; i < nq; i++) {
        flashc__store(qh, dt, i, qf[i]), qf[i] = flashc__load(qh, dt, i);
        flashc__store(doh, dt, i, dof[i]), dof[i] = flashc__load(doh, dt, i);
    }
    for (int64_t i = 0; i < nk; i++) {
        flashc__store(kh, dt, i, kf[i]), kf[i] = flashc__load(kh, dt, i);
        flashc__store(vh, dt, i, vf[i]), vf[i] = flashc__load(vh, dt, i);
    }
    /* single call on the device over the whole sequence */
    flashc_attn_params ap = flashc_attn_params_default();
    ap.causal = c->causal;
    ap.deterministic = 1;
    void *dq_ = dev_upload(qh, nq * es), *dk_ = dev_upload(kh, nk * es), *dv_ = dev_upload(vh, nk * es);
    void *ddo = dev_upload(doh, nq * es), *dO = dev_upload(NULL, nq * es);
    float *dL = dev_upload(NULL, nl * 4);
    void *gq = dev_upload(NULL, nq * es), *gk = dev_upload(NULL, nk * es), *gv = dev_upload(NULL, nk * es);
    flashc_tensor tq = dview4(dq_, dt, B, S, Hq, D), tk = dview4(dk_, dt, B, S, Hkv, D);
    flashc_tensor tv = dview4(dv_, dt, B, S, Hkv, D), tdo = dview4(ddo, dt, B, S, Hq, D);
    flashc_tensor to = dview4(dO, dt, B, S, Hq, D), tl = dlse(dL, B, Hq, S);
    flashc_tensor tgq = dview4(gq, dt, B, S, Hq, D), tgk = dview4(gk, dt, B, S, Hkv, D);
    flashc_tensor tgv = dview4(gv, dt, B, S, Hkv, D);
    TU_OK(flashc_attn_fwd(&ap, &tq, &tk, &tv, &to, &tl, NULL));
    TU_OK(flashc_attn_bwd(&ap, &tq, &tk, &tv, &to, &tdo, &tl, &tgq, &tgk, &tgv, NULL));
    CUDA_OK(cudaDeviceSynchronize());
    uint16_t *o1 = malloc((size_t)nq * es), *dq1 = malloc((size_t)nq * es);
    uint16_t *dk1 = malloc((size_t)nk * es), *dv1 = malloc((size_t)nk * es);
    float *l1 = malloc((size_t)nl * 4);
    CUDA_OK(cudaMemcpy(o1, dO, nq * es, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(l1, dL, nl * 4, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(dq1, gq, nq * es, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(dk1, gk, nk * es, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(dv1, gv, nk * es, cudaMemcpyDeviceToHost));
    void *single_bufs[] = {dq_, dk_, dv_, ddo, dO, dL, gq, gk, gv};
    for (size_t i = 0; i < sizeof single_bufs / sizeof *single_bufs; i++)
        CUDA_OK(cudaFree(single_bufs[i]));

    /* float64 references on the rounded inputs */
    float *o_ref = malloc((size_t)nq * 4), *l_ref = malloc((size_t)nl * 4);
    float *dq_ref = malloc((size_t)nq * 4), *dk_ref = malloc((size_t)nk * 4), *dv_ref = malloc((size_t)nk * 4);
    {
        flashc_attn_params rp = flashc_attn_params_default();
        rp.causal = c->causal;
        flashc_tensor q32 = flashc_tensor_4d(qf, FLASHC_F32, B, S, Hq, D);
        flashc_tensor k32 = flashc_tensor_4d(kf, FLASHC_F32, B, S, Hkv, D);
        flashc_tensor v32 = flashc_tensor_4d(vf, FLASHC_F32, B, S, Hkv, D);
        flashc_tensor do32 = flashc_tensor_4d(dof, FLASHC_F32, B, S, Hq, D);
        flashc_tensor o32 = flashc_tensor_4d(o_ref, FLASHC_F32, B, S, Hq, D);
        flashc_tensor l32 = flashc_tensor_3d(l_ref, FLASHC_F32, B, Hq, S);
        flashc_tensor dq32 = flashc_tensor_4d(dq_ref, FLASHC_F32, B, S, Hq, D);
        flashc_tensor dk32 = flashc_tensor_4d(dk_ref, FLASHC_F32, B, S, Hkv, D);
        flashc_tensor dv32 = flashc_tensor_4d(dv_ref, FLASHC_F32, B, S, Hkv, D);
        TU_OK(flashc_attn_fwd_naive(&rp, &q32, &k32, &v32, &o32, &l32, NULL));
        TU_OK(flashc_attn_bwd_naive(&rp, &q32, &k32, &v32, &o32, &do32, &l32, &dq32, &dk32, &dv32, NULL));
    }
    int *owner = malloc((size_t)S * sizeof *owner);
    for (int r = 0; r < N; r++)
        for (int64_t i = 0; i < flashc_cp_local_len(shards[c->shard], S, N, r); i++)
            owner[flashc_cp_global_index(shards[c->shard], S, N, r, i)] = r;
    const tu_ring_shape rs = {N, c->causal, dt, B, S, Hq, Hkv, D, D, 1.0f / sqrtf((float)D)};
    tu_ring_out nv = tu_naive_ring(&rs, owner, qf, kf, vf, dof);

    /* the ranks */
    flashc_cp_comm *comm[8];
    if (c->nccl) {
        unsigned char id[FLASHC_CP_NCCL_ID_BYTES];
        TU_OK(flashc_cp_nccl_unique_id(id, sizeof id));
        TU_OK(flashc_cp_comm_nccl_init(1, 0, id, sizeof id, &comm[0]));
        assert_int_equal(flashc_cp_comm_size(comm[0]), 1);
    } else {
        TU_OK(flashc_cp_comm_sim_create(N, comm));
    }
    rank_job jobs[8];
    void *bufs[8][9];
    void *hl[8][9];
    memset(jobs, 0, sizeof jobs);
    for (int r = 0; r < N; r++) {
        const int64_t L = flashc_cp_local_len(shards[c->shard], S, N, r);
        rank_job *j = &jobs[r];
        CUDA_OK(cudaStreamCreateWithFlags(&j->stream, cudaStreamNonBlocking));
        j->p = flashc_cp_params_default();
        j->p.comm = comm[r];
        j->p.seqlen = S;
        j->p.shard = shards[c->shard];
        j->p.causal = c->causal;
        j->p.deterministic = 1;
        j->p.serialize = c->serialize;
        j->p.cuda_stream = j->stream;
        const int64_t hw[9] = {Hq * D, Hkv * D, Hkv * D, Hq * D, 0, Hq * D, Hq * D, Hkv * D, Hkv * D};
        void *src[9] = {qh, kh, vh, NULL, NULL, doh, NULL, NULL, NULL};
        for (int b = 0; b < 9; b++) {
            const size_t bytes = b == 4 ? (size_t)(B * Hq * L) * 4 : (size_t)(B * L * hw[b]) * es;
            hl[r][b] = malloc(bytes);
            if (src[b])
                shard_rows(c, r, src[b], hl[r][b], hw[b], es, 0);
            bufs[r][b] = dev_upload(src[b] ? hl[r][b] : NULL, bytes);
        }
        j->q = dview4(bufs[r][0], dt, B, L, Hq, D);
        j->k = dview4(bufs[r][1], dt, B, L, Hkv, D);
        j->v = dview4(bufs[r][2], dt, B, L, Hkv, D);
        j->o = dview4(bufs[r][3], dt, B, L, Hq, D);
        j->lse = dlse(bufs[r][4], B, Hq, L);
        j->dout = dview4(bufs[r][5], dt, B, L, Hq, D);
        j->dq = dview4(bufs[r][6], dt, B, L, Hq, D);
        j->dk = dview4(bufs[r][7], dt, B, L, Hkv, D);
        j->dv = dview4(bufs[r][8], dt, B, L, Hkv, D);
    }
    pthread_t th[8];
    for (int r = 0; r < N; r++)
        assert_int_equal(pthread_create(&th[r], NULL, rank_main, &jobs[r]), 0);
    for (int r = 0; r < N; r++)
        pthread_join(th[r], NULL);
    for (int r = 0; r < N; r++) {
        if (jobs[r].st != FLASHC_OK)
            fail_msg("rank %d: %s: %s", r, flashc_status_string(jobs[r].st), jobs[r].err);
    }
    uint16_t *o_cp = malloc((size_t)nq * es), *dq_cp = malloc((size_t)nq * es);
    uint16_t *dk_cp = malloc((size_t)nk * es), *dv_cp = malloc((size_t)nk * es);
    float *l_cp = malloc((size_t)nl * 4);
    for (int r = 0; r < N; r++) {
        const int64_t L = flashc_cp_local_len(shards[c->shard], S, N, r);
        const int64_t hw[9] = {0, 0, 0, Hq * D, 0, 0, Hq * D, Hkv * D, Hkv * D};
        for (int b = 3; b < 9; b++)
            if (b != 5) {
                const size_t bytes = b == 4 ? (size_t)(B * Hq * L) * 4 : (size_t)(B * L * hw[b]) * es;
                CUDA_OK(cudaMemcpy(hl[r][b], bufs[r][b], bytes, cudaMemcpyDeviceToHost));
            }
        shard_rows(c, r, o_cp, hl[r][3], Hq * D, es, 1);
        shard_rows(c, r, dq_cp, hl[r][6], Hq * D, es, 1);
        shard_rows(c, r, dk_cp, hl[r][7], Hkv * D, es, 1);
        shard_rows(c, r, dv_cp, hl[r][8], Hkv * D, es, 1);
        const float *ll = hl[r][4];
        for (int64_t b = 0; b < B; b++)
            for (int64_t h = 0; h < Hq; h++)
                for (int64_t i = 0; i < L; i++)
                    l_cp[(b * Hq + h) * S + flashc_cp_global_index(shards[c->shard], S, N, r, i)] =
                        ll[(b * Hq + h) * L + i];
    }
    rule("o", c, o_cp, o1, nv.o, o_ref, nq, dt);
    rule("lse", c, l_cp, l1, NULL, l_ref, nl, FLASHC_F32);
    rule("dq", c, dq_cp, dq1, nv.dq, dq_ref, nq, dt);
    rule("dk", c, dk_cp, dk1, nv.dk, dk_ref, nk, dt);
    rule("dv", c, dv_cp, dv1, nv.dv, dv_ref, nk, dt);

    for (int r = 0; r < N; r++) {
        for (int b = 0; b < 9; b++) {
            CUDA_OK(cudaFree(bufs[r][b]));
            free(hl[r][b]);
        }
        CUDA_OK(cudaStreamDestroy(jobs[r].stream));
    }
    for (int r = 0; r < (c->nccl ? 1 : N); r++)
        flashc_cp_comm_destroy(comm[r]);
    free(o_cp), free(dq_cp), free(dk_cp), free(dv_cp), free(l_cp), free(owner);
    free(nv.o), free(nv.dq), free(nv.dk), free(nv.dv);
    free(o_ref), free(l_ref), free(dq_ref), free(dk_ref), free(dv_ref);
    free(o1), free(dq1), free(dk1), free(dv1), free(l1);
    free(qh), free(kh), free(vh), free(doh), free(qf), free(kf), free(vf), free(dof);
}

static void test_nccl_1rank(void **state)
{
    if (!flashc_cp_nccl_available()) {
        unsigned char id[FLASHC_CP_NCCL_ID_BYTES];
        const flashc_status st = flashc_cp_nccl_unique_id(id, sizeof id);
        print_message("SKIPPED: no NCCL here (%s)\n",
                      st == FLASHC_OK ? "?" : flashc_last_error());
        skip();
    }
    const flashc_dtype dts[2] = {FLASHC_BF16, FLASHC_F16};
    /* (kept short: bench/gpu/final_check.sh gives the whole program 120 s, most of it the
     * host's float64 references) */
    for (int d = 0; d < 2; d++)
        for (int sh = 0; sh < 3; sh++)
            for (int causal = 0; causal < 2; causal++) {
                const int ser = (sh + causal + d) % 2; /* overlapped and serialized, alternately */
                const gcase c = {1, sh, causal, 1, ser, 1, 257, 4, 2, 128, dts[d]};
                run_gcase(&c);
            }
}

static void test_sim_ranks(void **state)
{
    const int ns[4] = {2, 3, 4, 8};
    for (int a = 0; a < 4; a++)
        for (int sh = 0; sh < 3; sh++)
            for (int causal = 0; causal < 2; causal++) {
                const int N = ns[a];
                const gcase c = {N, sh, causal, 0, 0, 1, 2 * N * 12 + 3, 4, 2, 128,
                                 a == 1 ? FLASHC_F16 : FLASHC_BF16};
                run_gcase(&c);
            }
    const gcase d64 = {4, 1, 1, 0, 0, 2, 203, 4, 1, 64, FLASHC_BF16};
    run_gcase(&d64);
}

/* An application error pending before the call is left to the application: the ring refuses
 * (FLASHC_ERR_DEVICE) before launching anything, and cudaGetLastError still returns it. */
static void test_pending_error_is_left_alone(void **state)
{
    const int64_t L = 8, H = 1, D = 64;
    void *b[4];
    for (int i = 0; i < 4; i++)
        b[i] = dev_upload(NULL, (size_t)(L * H * D) * 2);
    flashc_tensor q = dview4(b[0], FLASHC_BF16, 1, L, H, D), k = dview4(b[1], FLASHC_BF16, 1, L, H, D);
    flashc_tensor v = dview4(b[2], FLASHC_BF16, 1, L, H, D), o = dview4(b[3], FLASHC_BF16, 1, L, H, D);
    flashc_cp_comm *comm;
    TU_OK(flashc_cp_comm_sim_create(1, &comm));
    flashc_cp_params p = flashc_cp_params_default();
    p.comm = comm;
    p.seqlen = L;
    void *huge = NULL;
    CUDA_OK(cudaDeviceSynchronize());
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);
    assert_int_not_equal(cudaMalloc(&huge, (size_t)1 << 62), cudaSuccess); /* now pending */
    const cudaError_t pending = cudaPeekAtLastError();
    assert_int_not_equal(pending, cudaSuccess);
    assert_int_equal(flashc_cp_attn_fwd(&p, &q, &k, &v, &o, NULL), FLASHC_ERR_DEVICE);
    print_message("  pending: %s\n", flashc_last_error());
    assert_non_null(strstr(flashc_last_error(), cudaGetErrorName(pending)));
    assert_int_equal(cudaGetLastError(), pending); /* still the application's, once */
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    flashc_cp_comm_destroy(comm);
    for (int i = 0; i < 4; i++)
        CUDA_OK(cudaFree(b[i]));
}

int main(void)
{
    /* before NCCL initialises: no NVLink SHARP / multicast objects (KINDS.md) */
    setenv("NCCL_NVLS_ENABLE", "0", 1);
    if (!flashc_cuda_available()) {
        printf("test_cp_nccl: SKIPPED: no CUDA device visible (%s)\n", flashc_build_info());
        return 77;
    }
    tu_seed_from_env();
    printf("test_cp_nccl: %s; NCCL %s\n", flashc_build_info(),
           flashc_cp_nccl_available() ? "available" : "not available");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nccl_1rank),
        cmocka_unit_test(test_sim_ranks),
        cmocka_unit_test(test_pending_error_is_left_alone),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !FLASHC_HAVE_CUDA */

int main(void)
{
    printf("test_cp_nccl: SKIPPED: this build has no CUDA backend (%s)\n", flashc_build_info());
    return 77;
}

#endif
