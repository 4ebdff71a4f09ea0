/* host_ops.c — the ring's tensor ops on host memory (cp_dev_ops for FLASHC_DEVICE_CPU). Plain
 * loops, OpenMP over rows: they touch each element once per ring step, next to an attention
 * call that reads it D times. */
#include "cp.h"

#include <string.h>

static flashc_status host_begin(cp_exec *x) { return FLASHC_OK; }

static void *host_alloc(cp_exec *x, size_t bytes)
{
    void *p = flashc__malloc(bytes ? bytes : 1);
    if (!p)
        flashc__fail(FLASHC_ERR_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of ring buffers",
                     x->fn, bytes);
    return p;
}

static void host_free(cp_exec *x, void *ptr) { flashc__free(ptr); }

static flashc_status host_pack(cp_exec *x, const flashc_tensor *src, void *dst)
{
    const int64_t *n = src->shape, *s = src->stride;
    const size_t es = flashc_dtype_size(src->dtype);
    const char *base = src->data;
    char *out = dst;
#pragma omp parallel for collapse(2) num_threads(x->threads) schedule(static)
    for (int64_t b = 0; b < n[0]; b++)
        for (int64_t i = 0; i < n[1]; i++)
            for (int64_t h = 0; h < n[2]; h++) {
                const int64_t o = ((b * n[1] + i) * n[2] + h) * n[3];
                const char *in = base + (size_t)(b * s[0] + i * s[1] + h * s[2]) * es;
                if (s[3] == 1)
                    memcpy(out + (size_t)o * es, in, (size_t)n[3] * es);
                else
                    for (int64_t d = 0; d < n[3]; d++)
                        memcpy(out + (size_t)(o + d) * es, in + (size_t)(d * s[3]) * es, es);
            }
    return FLASHC_OK;
}

static flashc_status host_fill(cp_exec *x, float *dst, int64_t n, float value)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = value;
    return FLASHC_OK;
}

static flashc_status host_merge(cp_exec *x, int64_t B, int64_t L, int64_t H, int64_t Dv,
                                int64_t r0, int64_t n, float *o_acc, float *lse_acc,
                                const void *o_part, flashc_dtype dt, const float *lse_part)
{
#pragma omp parallel for collapse(2) num_threads(x->threads) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = r0; i < r0 + n; i++)
            for (int64_t h = 0; h < H; h++) {
                const int64_t li = (b * H + h) * L + i, oi = ((b * L + i) * H + h) * Dv;
                const float l2 = lse_part[li], l1 = lse_acc[li];
                if (l2 == -INFINITY)
                    continue; /* the part saw no key: its o is not read */
                float *acc = o_acc + oi;
                if (l1 == -INFINITY) {
                    for (int64_t d = 0; d < Dv; d++)
                        acc[d] = flashc__load(o_part, dt, oi + d);
                    lse_acc[li] = l2;
                    continue;
                }
                const float m = l1 > l2 ? l1 : l2;
                const float w1 = expf(l1 - m), w2 = expf(l2 - m), s = w1 + w2;
                const float a1 = w1 / s, a2 = w2 / s;
                for (int64_t d = 0; d < Dv; d++)
                    acc[d] = a1 * acc[d] + a2 * flashc__load(o_part, dt, oi + d);
                lse_acc[li] = m + logf(s);
            }
    return FLASHC_OK;
}

static flashc_status host_add(cp_exec *x, int64_t B, int64_t L, int64_t W, int64_t r0,
                              int64_t n, float *acc, const void *part, flashc_dtype dt)
{
#pragma omp parallel for collapse(2) num_threads(x->threads) schedule(static)
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = r0; i < r0 + n; i++) {
            const int64_t o = (b * L + i) * W;
            for (int64_t w = 0; w < W; w++)
                acc[o + w] += flashc__load(part, dt, o + w);
        }
    return FLASHC_OK;
}

static flashc_status host_store(cp_exec *x, const float *acc, flashc_tensor *out)
{
    const int64_t *n = out->shape, *s = out->stride;
#pragma omp parallel for collapse(2) num_threads(x->threads) schedule(static)
    for (int64_t b = 0; b < n[0]; b++)
        for (int64_t i = 0; i < n[1]; i++)
            for (int64_t h = 0; h < n[2]; h++) {
                const float *a = acc + ((b * n[1] + i) * n[2] + h) * n[3];
                const int64_t o = b * s[0] + i * s[1] + h * s[2];
                for (int64_t d = 0; d < n[3]; d++)
                    flashc__store(out->data, out->dtype, o + d * s[3], a[d]);
            }
    return FLASHC_OK;
}

static flashc_status host_store_lse(cp_exec *x, const float *acc, flashc_tensor *out)
{
    const int64_t *n = out->shape, *s = out->stride;
    float *o = out->data;
    for (int64_t b = 0; b < n[0]; b++)
        for (int64_t h = 0; h < n[1]; h++)
            for (int64_t i = 0; i < n[2]; i++)
                o[b * s[0] + h * s[1] + i * s[2]] = acc[(b * n[1] + h) * n[2] + i];
    return FLASHC_OK;
}

static flashc_status host_sync(cp_exec *x) { return FLASHC_OK; }

static flashc_status host_copy(cp_exec *x, void *dst, const void *src, size_t bytes)
{
    if (bytes)
        memcpy(dst, src, bytes);
    return FLASHC_OK;
}

const cp_dev_ops cp_host_ops = {
    .device = FLASHC_DEVICE_CPU,
    .begin = host_begin,
    .alloc = host_alloc,
    .free = host_free,
    .pack = host_pack,
    .fill = host_fill,
    .merge = host_merge,
    .add = host_add,
    .store = host_store,
    .store_lse = host_store_lse,
    .sync = host_sync,
    .copy = host_copy,
};
