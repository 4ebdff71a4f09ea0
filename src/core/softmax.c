/* softmax.c — the online-softmax primitive and the merge of partial attention states. */
#include "internal.h"

#include <math.h>

flashc_softmax_state flashc_softmax_state_init(void)
{
    flashc_softmax_state s = {-INFINITY, 0.0f};
    return s;
}

flashc_status flashc_online_softmax(flashc_softmax_state *state, const float *x, int64_t n)
{
    if (!state)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "flashc_online_softmax: state is NULL");
    if (n < 0)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "flashc_online_softmax: n = %lld < 0",
                            (long long)n);
    if (n > FLASHC_MAX_ELEMENTS)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                            "flashc_online_softmax: n = %lld exceeds FLASHC_MAX_ELEMENTS = 2^38",
                            (long long)n);
    if (n > 0 && !x)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "flashc_online_softmax: x is NULL");
    if (n > 0 && (uintptr_t)x % _Alignof(float) != 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "flashc_online_softmax: x = %p is not aligned to float", (void *)x);
    float m = state->m, l = state->l;
    for (int64_t i = 0; i < n; i++) {
        float xi = x[i];
        if (xi == -INFINITY) /* masked: contributes exp(-inf) = 0; never compute -inf - -inf */
            continue;
        if (xi > m) {
            l = l * expf(m - xi) + 1.0f; /* m = -inf on the first element: exp(-inf) = 0 */
            m = xi;
        } else {
            l += expf(xi - m);
        }
    }
    state->m = m;
    state->l = l;
    return FLASHC_OK;
}

flashc_softmax_state flashc_softmax_state_merge(flashc_softmax_state a, flashc_softmax_state b)
{
    if (a.m == -INFINITY)
        return b;
    if (b.m == -INFINITY)
        return a;
    flashc_softmax_state r;
    r.m = a.m > b.m ? a.m : b.m;
    r.l = a.l * expf(a.m - r.m) + b.l * expf(b.m - r.m);
    return r;
}

static flashc_status check_like(const char *fn, const char *name, const flashc_tensor *t,
                                const flashc_tensor *ref, int ndim)
{
    FLASHC_TRY(flashc__check_tensor(fn, name, t, ndim));
    /* partial outputs (rank 4) in any float storage; the LSEs are float32 */
    if (ndim == 4 ? t->dtype == FLASHC_I32 : t->dtype != FLASHC_F32)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: %s must be %s (%s given)", fn,
                            name, ndim == 4 ? "float32, bfloat16 or float16" : "float32",
                            flashc__dtype_name(t->dtype));
    /* every tensor where o1 is: host memory, or (CUDA builds) CUDA device memory */
    const flashc_device want = ref ? ref->device : t->device;
#ifdef FLASHC_HAVE_CUDA
    if (t->device != FLASHC_DEVICE_CPU && t->device != FLASHC_DEVICE_CUDA)
#else
    if (t->device != FLASHC_DEVICE_CPU)
#endif
        return flashc__fail(FLASHC_ERR_UNSUPPORTED, "%s: %s must be in host memory%s", fn, name,
#ifdef FLASHC_HAVE_CUDA
                            " or CUDA device memory"
#else
                            " (this build has no CUDA backend)"
#endif
        );
    if (t->device != want)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s is on device %d but o1 is on device %d", fn, name,
                            (int)t->device, (int)want);
    for (int i = 0; i < ndim; i++)
        if (ref && t->shape[i] != ref->shape[i])
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: %s.shape[%d] = %lld, expected %lld",
                                fn, name, i, (long long)t->shape[i], (long long)ref->shape[i]);
    return FLASHC_OK;
}

flashc_status flashc_attn_merge(const flashc_tensor *o1, const flashc_tensor *lse1,
                                const flashc_tensor *o2, const flashc_tensor *lse2,
                                flashc_tensor *o, flashc_tensor *lse)
{
    static const char fn[] = "flashc_attn_merge";
    FLASHC_TRY(check_like(fn, "o1", o1, NULL, 4));
    FLASHC_TRY(check_like(fn, "o2", o2, o1, 4));
    FLASHC_TRY(check_like(fn, "o", o, o1, 4));
    FLASHC_TRY(check_like(fn, "lse1", lse1, NULL, 3));
    if (lse1->device != o1->device)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: lse1 is on device %d but o1 is on device %d", fn,
                            (int)lse1->device, (int)o1->device);
    int64_t B = o1->shape[0], S = o1->shape[1], H = o1->shape[2], D = o1->shape[3];
    if (lse1->shape[0] != B || lse1->shape[1] != H || lse1->shape[2] != S)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: lse1 must be (B, H, S) of o1", fn);
    FLASHC_TRY(check_like(fn, "lse2", lse2, lse1, 3));
    if (lse)
        FLASHC_TRY(check_like(fn, "lse", lse, lse1, 3));
    const flashc_tensor *outs[2] = {o, lse}, *ins[4] = {o1, lse1, o2, lse2};
    static const char *const out_names[2] = {"o", "lse"},
                             *const in_names[4] = {"o1", "lse1", "o2", "lse2"};
    FLASHC_TRY(flashc__check_outputs(fn, 2, outs, out_names, 4, ins, in_names));

#ifdef FLASHC_HAVE_CUDA
    if (o1->device == FLASHC_DEVICE_CUDA)
        return cuda_attn_merge(o1, lse1, o2, lse2, o, lse);
#endif
    const float *la = lse1->data, *lb = lse2->data;
    float *lo = lse ? lse->data : NULL;
    for (int64_t bi = 0; bi < B; bi++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t s = 0; s < S; s++) {
                float x = la[bi * lse1->stride[0] + h * lse1->stride[1] + s * lse1->stride[2]];
                float y = lb[bi * lse2->stride[0] + h * lse2->stride[1] + s * lse2->stride[2]];
                float m = x > y ? x : y;
                /* Weights relative to the larger LSE; an empty state (-inf) weighs 0. */
                float wa = 0.0f, wb = 0.0f, L = -INFINITY;
                if (isnan(x) || isnan(y)) /* NaN never passes: m would drop it (found by fuzz) */
                    wa = wb = L = NAN;
                else if (m != -INFINITY) {
                    float ea = expf(x - m), eb = expf(y - m);
                    float sum = ea + eb;
                    wa = ea / sum, wb = eb / sum;
                    L = m + logf(sum);
                }
                const int64_t ra = bi * o1->stride[0] + s * o1->stride[1] + h * o1->stride[2];
                const int64_t rb = bi * o2->stride[0] + s * o2->stride[1] + h * o2->stride[2];
                const int64_t ro = bi * o->stride[0] + s * o->stride[1] + h * o->stride[2];
                /* An empty state's o is never read: 0 * NaN or 0 * Inf would be NaN. A finite
                 * LSE whose weight underflows to 0 is read (its NaN still propagates). */
                const int use_a = x != -INFINITY, use_b = y != -INFINITY;
                for (int64_t d = 0; d < D; d++) /* float32 math; o rounded once */
                    flashc__store(
                        o->data, o->dtype, ro + d * o->stride[3],
                        (use_a ? wa * flashc__load(o1->data, o1->dtype, ra + d * o1->stride[3])
                               : 0.0f) +
                            (use_b ? wb * flashc__load(o2->data, o2->dtype, rb + d * o2->stride[3])
                                   : 0.0f));
                if (lo)
                    lo[bi * lse->stride[0] + h * lse->stride[1] + s * lse->stride[2]] = L;
            }
    return FLASHC_OK;
}
