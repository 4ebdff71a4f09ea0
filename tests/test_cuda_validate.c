/*
 * test_cuda_validate.c — params.validate_indices on CUDA tensors: the index tensors of the
 * varlen, KV-cache and varlen-backward entry points are copied to the host and checked exactly
 * as a CPU call checks them.
 *
 *   valid      a validated call gives the same bits as an unvalidated one (validation reads the
 *              indices, nothing else);
 *   refusals   each bad entry (cu_seqlens not starting at 0, decreasing, past the packed rows or
 *              longer than max_seqlen; cache_seqlens past the capacity; a page outside the
 *              cache; cache_batch_idx outside the cache or repeated while appending) gives
 *              FLASHC_ERR_INVALID_ARGUMENT naming the problem, and no output (o, lse, the
 *              caches, dq/dk/dv) is written: their device bytes are compared with the poison
 *              put there first; an entry the call would never read (a page past a sequence's
 *              length) is no error;
 *   capture    inside a CUDA graph capture the validating call fails cleanly (it synchronises),
 *              and the stream works afterwards.
 *
 * No CUDA device (or a build without CUDA): exits 77 (skipped).
 */
#define _POSIX_C_SOURCE 200809L /* cuda_common.h's env_save / env_restore: strdup, setenv */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>

#ifdef FLASHC_HAVE_CUDA
#include "cuda_common.h"

#include <string.h>

enum { D = 64, HQ = 2, HKV = 1 };

/* n bf16 values from N(0, 1) (the test's seeded stream), on the device */
static void *dev_bf16(int64_t n)
{
    float *h = tu_alloc_normal(n, 1.0f);
    uint16_t *b = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++)
        b[i] = flashc__f32_to_bf16(h[i]);
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, (size_t)n * 2));
    CUDA_OK(cudaMemcpy(d, b, (size_t)n * 2, cudaMemcpyHostToDevice));
    free(h), free(b);
    return d;
}

/* bytes of device memory, filled with 0xA5: a pattern no output takes by chance */
static void *dev_poison(size_t bytes)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, bytes));
    CUDA_OK(cudaMemset(d, 0xA5, bytes));
    return d;
}

static void *dev_i32(const int32_t *h, int64_t n)
{
    void *d = NULL;
    CUDA_OK(cudaMalloc(&d, (size_t)n * 4));
    CUDA_OK(cudaMemcpy(d, h, (size_t)n * 4, cudaMemcpyHostToDevice));
    return d;
}

static void set_i32(void *d, int64_t i, int32_t v)
{
    CUDA_OK(cudaMemcpy((int32_t *)d + i, &v, 4, cudaMemcpyHostToDevice));
}

static unsigned char *host_copy(const void *d, size_t bytes)
{
    unsigned char *h = malloc(bytes);
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
    return h;
}

static int all_poison(const void *d, size_t bytes)
{
    unsigned char *h = host_copy(d, bytes);
    int ok = 1;
    for (size_t i = 0; i < bytes && ok; i++)
        ok = h[i] == 0xA5;
    free(h);
    return ok;
}

static void expect_refusal(flashc_status st, const char *says, const char *what)
{
    if (st != FLASHC_ERR_INVALID_ARGUMENT || !strstr(flashc_last_error(), says))
        print_error("%s: %s: %s (expected \"%s\")\n", what, flashc_status_string(st),
                    flashc_last_error(), says);
    assert_int_equal(st, FLASHC_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(flashc_last_error(), says));
}

/* ---- varlen forward and backward ----------------------------------------------------------- */

static void test_varlen(void **state)
{
    (void)state;
    enum { B = 3 };
    const int32_t lq[B] = {3, 0, 37}, lk[B] = {4, 2, 41};
    int32_t cuq[B + 1] = {0}, cuk[B + 1] = {0};
    for (int b = 0; b < B; b++)
        cuq[b + 1] = cuq[b] + lq[b], cuk[b + 1] = cuk[b] + lk[b];
    const int64_t Tq = cuq[B] + 1, Tk = cuk[B];
    void *q = dev_bf16(Tq * HQ * D), *k = dev_bf16(Tk * HKV * D), *v = dev_bf16(Tk * HKV * D);
    const size_t ob = (size_t)(Tq * HQ * D) * 2, lb = (size_t)(HQ * Tq) * 4;
    void *o0 = dev_poison(ob), *l0 = dev_poison(lb), *o1 = dev_poison(ob), *l1 = dev_poison(lb);
    void *dcq = dev_i32(cuq, B + 1), *dck = dev_i32(cuk, B + 1);
    flashc_tensor tq = dev(flashc_tensor_3d(q, FLASHC_BF16, Tq, HQ, D));
    flashc_tensor tk = dev(flashc_tensor_3d(k, FLASHC_BF16, Tk, HKV, D));
    flashc_tensor tv = dev(flashc_tensor_3d(v, FLASHC_BF16, Tk, HKV, D));
    flashc_tensor to0 = dev(flashc_tensor_3d(o0, FLASHC_BF16, Tq, HQ, D));
    flashc_tensor to1 = dev(flashc_tensor_3d(o1, FLASHC_BF16, Tq, HQ, D));
    flashc_tensor tl0 = dev(flashc_tensor_2d(l0, FLASHC_F32, HQ, Tq));
    flashc_tensor tl1 = dev(flashc_tensor_2d(l1, FLASHC_F32, HQ, Tq));
    flashc_tensor tcq = dev(flashc_tensor_1d(dcq, FLASHC_I32, B + 1));
    flashc_tensor tck = dev(flashc_tensor_1d(dck, FLASHC_I32, B + 1));
    flashc_varlen vl = {sizeof vl, &tcq, &tck, 37, 41, NULL};
    flashc_attn_params p = flashc_attn_params_default();
    p.causal = 1;

    TU_OK(flashc_attn_varlen_fwd(&p, &vl, &tq, &tk, &tv, &to0, &tl0, NULL));
    p.validate_indices = 1;
    TU_OK(flashc_attn_varlen_fwd(&p, &vl, &tq, &tk, &tv, &to1, &tl1, NULL));
    unsigned char *a = host_copy(o0, ob), *b = host_copy(o1, ob);
    assert_memory_equal(a, b, ob);
    free(a), free(b);
    a = host_copy(l0, lb), b = host_copy(l1, lb);
    assert_memory_equal(a, b, lb);
    free(a), free(b);

    /* refusals: o1 / l1 poisoned again, never written */
    CUDA_OK(cudaMemset(o1, 0xA5, ob));
    CUDA_OK(cudaMemset(l1, 0xA5, lb));
    const struct {
        int at; /* 0: cu_q, 1: cu_k */
        int idx;
        int32_t val;
        int big_max; /* lift max_seqlen so the check under test is the one that fires */
        const char *says;
    } bad[] = {{0, 0, 1, 0, "must be 0"},
               {0, 2, 1, 0, "non-decreasing"},
               {1, 3, (int32_t)Tk + 5, 1, "exceeds"},
               {0, 3, (int32_t)Tq + 2, 1, "exceeds"},
               {1, 2, 5, 0, "max_seqlen_k"}}; /* sequence 2 then has 42 keys > 41 */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *arr = bad[i].at ? dck : dcq;
        const int32_t keep = (bad[i].at ? cuk : cuq)[bad[i].idx];
        set_i32(arr, bad[i].idx, bad[i].val);
        vl.max_seqlen_q = bad[i].big_max ? 1000 : 37, vl.max_seqlen_k = bad[i].big_max ? 1000 : 41;
        const flashc_status st = flashc_attn_varlen_fwd(&p, &vl, &tq, &tk, &tv, &to1, &tl1, NULL);
        char what[64];
        snprintf(what, sizeof what, "varlen fwd case %zu", i);
        expect_refusal(st, bad[i].says, what);
        assert_true(all_poison(o1, ob) && all_poison(l1, lb));
        /* the workspace query validates too */
        size_t bytes = 7;
        expect_refusal(flashc_attn_varlen_fwd_workspace_size(&p, &vl, &tq, &tk, &tv, &to1, &tl1,
                                                             &bytes),
                       bad[i].says, what);
        assert_int_equal(bytes, 7);
        set_i32(arr, bad[i].idx, keep);
    }
    vl.max_seqlen_q = 37, vl.max_seqlen_k = 41;

    /* the backward (whether or not this build's CUDA backward serves varlen, a bad index is
     * refused first): dq / dk / dv stay poisoned */
    const size_t kb = (size_t)(Tk * HKV * D) * 2;
    void *dq = dev_poison(ob), *dk = dev_poison(kb), *dv = dev_poison(kb), *dout = dev_bf16(Tq * HQ * D);
    flashc_tensor tdq = dev(flashc_tensor_3d(dq, FLASHC_BF16, Tq, HQ, D));
    flashc_tensor tdk = dev(flashc_tensor_3d(dk, FLASHC_BF16, Tk, HKV, D));
    flashc_tensor tdv = dev(flashc_tensor_3d(dv, FLASHC_BF16, Tk, HKV, D));
    flashc_tensor tdo = dev(flashc_tensor_3d(dout, FLASHC_BF16, Tq, HQ, D));
    set_i32(dcq, 2, 1); /* decreasing */
    expect_refusal(flashc_attn_varlen_bwd(&p, &vl, &tq, &tk, &tv, &to0, &tdo, &tl0, &tdq, &tdk,
                                          &tdv, NULL),
                   "non-decreasing", "varlen bwd");
    assert_true(all_poison(dq, ob) && all_poison(dk, kb) && all_poison(dv, kb));
    set_i32(dcq, 2, cuq[2]);
    assert_int_equal(cudaPeekAtLastError(), cudaSuccess);

    void *ptrs[] = {q, k, v, o0, l0, o1, l1, dcq, dck, dq, dk, dv, dout};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        cudaFree(ptrs[i]);
}

/* ---- KV cache: paged and contiguous ---------------------------------------------------------- */

static void test_kvcache(void **state)
{
    (void)state;
    enum { B = 2, PS = 16, NP = 8, MP = 4, SNEW = 2 };
    const int64_t cap = (int64_t)MP * PS;
    int32_t lens[B] = {20, 33}, table[B * MP] = {5, 2, 7, 1, 0, 6, 3, 4};
    void *q = dev_bf16(B * HQ * D);
    const size_t cb = (size_t)(NP * PS * HKV * D) * 2, ob = (size_t)(B * HQ * D) * 2;
    void *kc = dev_bf16(NP * PS * HKV * D), *vc = dev_bf16(NP * PS * HKV * D);
    void *o0 = dev_poison(ob), *o1 = dev_poison(ob);
    void *dl = dev_i32(lens, B), *dt = dev_i32(table, B * MP);
    flashc_tensor tq = dev(flashc_tensor_4d(q, FLASHC_BF16, B, 1, HQ, D));
    flashc_tensor tkc = dev(flashc_tensor_4d(kc, FLASHC_BF16, NP, PS, HKV, D));
    flashc_tensor tvc = dev(flashc_tensor_4d(vc, FLASHC_BF16, NP, PS, HKV, D));
    flashc_tensor to0 = dev(flashc_tensor_4d(o0, FLASHC_BF16, B, 1, HQ, D));
    flashc_tensor to1 = dev(flashc_tensor_4d(o1, FLASHC_BF16, B, 1, HQ, D));
    flashc_tensor tl = dev(flashc_tensor_1d(dl, FLASHC_I32, B));
    flashc_tensor tt = dev(flashc_tensor_2d(dt, FLASHC_I32, B, MP));
    flashc_kv_cache c = {sizeof c, &tkc, &tvc, &tl, &tt, NULL, NULL, NULL, NULL};
    flashc_attn_params p = flashc_attn_params_default();

    TU_OK(flashc_attn_kvcache_fwd(&p, &c, &tq, &to0, NULL, NULL));
    p.validate_indices = 1;
    TU_OK(flashc_attn_kvcache_fwd(&p, &c, &tq, &to1, NULL, NULL));
    unsigned char *a = host_copy(o0, ob), *b = host_copy(o1, ob);
    assert_memory_equal(a, b, ob);
    free(a), free(b);
    /* a page past every sequence's length is never read: no error */
    set_i32(dt, 1 * MP + 3, NP + 9);
    TU_OK(flashc_attn_kvcache_fwd(&p, &c, &tq, &to1, NULL, NULL));
    set_i32(dt, 1 * MP + 3, table[1 * MP + 3]);

    /* refusals, with an append (so the caches are outputs too) */
    void *kn = dev_bf16(B * SNEW * HKV * D), *vn = dev_bf16(B * SNEW * HKV * D);
    flashc_tensor tkn = dev(flashc_tensor_4d(kn, FLASHC_BF16, B, SNEW, HKV, D));
    flashc_tensor tvn = dev(flashc_tensor_4d(vn, FLASHC_BF16, B, SNEW, HKV, D));
    c.k_new = &tkn, c.v_new = &tvn;
    unsigned char *k_before = host_copy(kc, cb), *v_before = host_copy(vc, cb);
    CUDA_OK(cudaMemset(o1, 0xA5, ob));
    const struct {
        int at; /* 0: cache_seqlens, 1: block_table */
        int idx;
        int32_t val;
        const char *says;
    } bad[] = {{0, 1, (int32_t)cap - SNEW + 1, "does not fit"},
               {0, 0, -1, "does not fit"},
               {1, 0 * MP + 1, NP, "outside the cache's"},
               {1, 1 * MP + 2, -3, "outside the cache's"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        void *arr = bad[i].at ? dt : dl;
        const int32_t keep = (bad[i].at ? table : lens)[bad[i].idx];
        set_i32(arr, bad[i].idx, bad[i].val);
        char what[64];
        snprintf(what, sizeof what, "paged case %zu", i);
        expect_refusal(flashc_attn_kvcache_fwd(&p, &c, &tq, &to1, NULL, NULL), bad[i].says, what);
        set_i32(arr, bad[i].idx, keep);
        assert_true(all_poison(o1, ob));
        unsigned char *k_after = host_copy(kc, cb), *v_after = host_copy(vc, cb);
        assert_memory_equal(k_before, k_after, cb);
        assert_memory_equal(v_before, v_after, cb);
        free(k_after), free(v_after);
    }
    free(k_before), free(v_before);

    /* contiguous cache with cache_batch_idx: out of range, and two sequences appending into one
     * row */
    enum { ROWS = 3, S_CACHE = 48 };
    const size_t ccb = (size_t)(ROWS * S_CACHE * HKV * D) * 2;
    void *ck = dev_bf16(ROWS * S_CACHE * HKV * D), *cv = dev_bf16(ROWS * S_CACHE * HKV * D);
    int32_t idx[B] = {2, 0};
    void *di = dev_i32(idx, B);
    flashc_tensor tck = dev(flashc_tensor_4d(ck, FLASHC_BF16, ROWS, S_CACHE, HKV, D));
    flashc_tensor tcv = dev(flashc_tensor_4d(cv, FLASHC_BF16, ROWS, S_CACHE, HKV, D));
    flashc_tensor ti = dev(flashc_tensor_1d(di, FLASHC_I32, B));
    flashc_kv_cache cc = {sizeof cc, &tck, &tcv, &tl, NULL, &ti, &tkn, &tvn, NULL};
    unsigned char *ck_before = host_copy(ck, ccb);
    set_i32(di, 1, ROWS);
    expect_refusal(flashc_attn_kvcache_fwd(&p, &cc, &tq, &to1, NULL, NULL), "outside the cache's",
                   "cache_batch_idx out of range");
    set_i32(di, 1, 2);
    expect_refusal(flashc_attn_kvcache_fwd(&p, &cc, &tq, &to1, NULL, NULL), "both append",
                   "cache_batch_idx repeated");
    set_i32(di, 1, 0);
    /* cache_leftpad past a sequence's cache_seqlens (validated from the device): refused */
    int32_t lpad[B] = {3, lens[1] + 1};
    void *dlp = dev_i32(lpad, B);
    flashc_tensor tlp = dev(flashc_tensor_1d(dlp, FLASHC_I32, B));
    flashc_kv_cache cl = cc;
    cl.cache_leftpad = &tlp;
    expect_refusal(flashc_attn_kvcache_fwd(&p, &cl, &tq, &to1, NULL, NULL), "cache_leftpad",
                   "cache_leftpad past cache_seqlens");
    CUDA_OK(cudaFree(dlp));
    assert_true(all_poison(o1, ob));
    unsigned char *ck_after = host_copy(ck, ccb);
    assert_memory_equal(ck_before, ck_after, ccb);
    free(ck_before), free(ck_after);
    TU_OK(flashc_attn_kvcache_fwd(&p, &cc, &tq, &to1, NULL, NULL)); /* valid again: appends */
    CUDA_OK(cudaDeviceSynchronize());

    /* inside a graph capture the validating call cannot synchronise: a clean refusal */
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    c.k_new = c.v_new = NULL;
    p.cuda_stream = s;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    const flashc_status st = flashc_attn_kvcache_fwd(&p, &c, &tq, &to1, NULL, NULL);
    cudaGraph_t g = NULL;
    (void)cudaStreamEndCapture(s, &g);
    if (g)
        cudaGraphDestroy(g);
    (void)cudaGetLastError();
    if (st != FLASHC_ERR_DEVICE)
        print_error("capture: %s: %s\n", flashc_status_string(st), flashc_last_error());
    assert_int_equal(st, FLASHC_ERR_DEVICE);
    p.validate_indices = 0; /* the stream still works */
    TU_OK(flashc_attn_kvcache_fwd(&p, &c, &tq, &to1, NULL, NULL));
    CUDA_OK(cudaStreamSynchronize(s));
    CUDA_OK(cudaStreamDestroy(s));

    void *ptrs[] = {q, kc, vc, o0, o1, dl, dt, kn, vn, ck, cv, di};
    for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
        cudaFree(ptrs[i]);
}

int main(void)
{
    if (!flashc_cuda_available()) {
        printf("test_cuda_validate: SKIPPED: no CUDA device visible (%s)\n", flashc_build_info());
        return 77;
    }
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_varlen),
        cmocka_unit_test(test_kvcache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#else /* !FLASHC_HAVE_CUDA */

int main(void)
{
    printf("test_cuda_validate: SKIPPED: this build has no CUDA backend (%s)\n",
           flashc_build_info());
    return 77;
}

#endif
