/* tensor.c — tensor views and the validation every entry point runs before touching outputs. */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

static flashc_tensor make(void *data, flashc_dtype dtype, int ndim, const int64_t *n)
{
    flashc_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.device = FLASHC_DEVICE_CPU;
    t.ndim = ndim;
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        t.shape[i] = n[i];
        t.stride[i] = s;
        /* sizes whose product overflows saturate the outer strides: validation then refuses
         * the view (FLASHC_ERR_OVERFLOW) instead of the product wrapping here */
        if (__builtin_mul_overflow(s, n[i] > 0 ? n[i] : 1, &s))
            s = INT64_MAX;
    }
    return t;
}

flashc_tensor flashc_tensor_1d(void *data, flashc_dtype dtype, int64_t n0)
{
    int64_t n[1] = {n0};
    return make(data, dtype, 1, n);
}

flashc_tensor flashc_tensor_2d(void *data, flashc_dtype dtype, int64_t n0, int64_t n1)
{
    int64_t n[2] = {n0, n1};
    return make(data, dtype, 2, n);
}

flashc_tensor flashc_tensor_3d(void *data, flashc_dtype dtype, int64_t n0, int64_t n1, int64_t n2)
{
    int64_t n[3] = {n0, n1, n2};
    return make(data, dtype, 3, n);
}

flashc_tensor flashc_tensor_4d(void *data, flashc_dtype dtype, int64_t n0, int64_t n1, int64_t n2,
                               int64_t n3)
{
    int64_t n[4] = {n0, n1, n2, n3};
    return make(data, dtype, 4, n);
}

flashc_status flashc__check_tensor(const char *fn, const char *name, const flashc_tensor *t,
                                   int ndim)
{
    if (!t)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: tensor %s is NULL", fn, name);
    if (!t->data)
        return flashc__fail(FLASHC_ERR_NULL_POINTER, "%s: %s.data is NULL", fn, name);
    if ((unsigned)t->dtype >= FLASHC_DTYPE_COUNT)
        return flashc__fail(FLASHC_ERR_UNSUPPORTED_DTYPE, "%s: %s.dtype = %d is not a flashc_dtype",
                            fn, name, (int)t->dtype);
    if (t->device != FLASHC_DEVICE_CPU && t->device != FLASHC_DEVICE_CUDA)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT, "%s: %s.device = %d is not a flashc_device",
                            fn, name, (int)t->device);
    /* The backends load elements as float / uint16_t (C's alignment rules), so a view must
     * start on an element boundary; strides are in elements, so every element then is too. */
    if ((uintptr_t)t->data % flashc_dtype_size(t->dtype) != 0)
        return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                            "%s: %s.data = %p is not aligned to its %zu-byte %s elements", fn,
                            name, t->data, flashc_dtype_size(t->dtype),
                            flashc__dtype_name(t->dtype));
    if (t->ndim != ndim)
        return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: %s.ndim = %d, expected %d", fn, name,
                            (int)t->ndim, ndim);
    /* Largest element offset, with every product and sum checked: a view whose byte extent
     * does not fit in 64 bits cannot be addressed safely. */
    int64_t max_off = 0;
    for (int i = 0; i < ndim; i++) {
        if (t->shape[i] <= 0)
            return flashc__fail(FLASHC_ERR_INVALID_SHAPE, "%s: %s.shape[%d] = %lld, must be > 0",
                                fn, name, i, (long long)t->shape[i]);
        if (t->stride[i] < 0)
            return flashc__fail(FLASHC_ERR_INVALID_STRIDE, "%s: %s.stride[%d] = %lld is negative",
                                fn, name, i, (long long)t->stride[i]);
        int64_t term;
        if (__builtin_mul_overflow(t->shape[i] - 1, t->stride[i], &term) ||
            __builtin_add_overflow(max_off, term, &max_off))
            return flashc__fail(FLASHC_ERR_OVERFLOW,
                                "%s: %s spans more than 2^63 elements (shape[%d] = %lld, "
                                "stride %lld)",
                                fn, name, i, (long long)t->shape[i], (long long)t->stride[i]);
    }
    int64_t bytes;
    int64_t esize = (int64_t)flashc_dtype_size(t->dtype);
    if (__builtin_add_overflow(max_off, 1, &bytes) ||
        __builtin_mul_overflow(bytes, esize, &bytes) ||
        (uint64_t)bytes > UINTPTR_MAX - (uintptr_t)t->data)
        return flashc__fail(FLASHC_ERR_OVERFLOW, "%s: the byte extent of %s overflows 64 bits", fn,
                            name);
    /* The per-call bound (flashc.h): the logical element count, which a broadcast view can
     * make far larger than its memory. Every size product inside the library then stays well
     * inside 64 bits, and no call can be asked for 2^60 elements of work by a 4-byte buffer. */
    int64_t count = 1;
    for (int i = 0; i < ndim; i++)
        if (__builtin_mul_overflow(count, t->shape[i], &count) || count > FLASHC_MAX_ELEMENTS)
            return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                                "%s: %s has more than FLASHC_MAX_ELEMENTS = 2^38 elements "
                                "(shape[%d] = %lld); broadcast views count in full",
                                fn, name, i, (long long)t->shape[i]);
    return FLASHC_OK;
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        int64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

enum { EXACT_MAX_ELEMENTS = 4096 }; /* offsets sorted on the stack: 32 KiB */

flashc_status flashc__check_output_layout(const char *fn, const char *name, const flashc_tensor *t)
{
    int order[FLASHC_MAX_DIMS], n = 0;
    int64_t count = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > 1) {
            if (t->stride[i] == 0)
                return flashc__fail(FLASHC_ERR_INVALID_STRIDE,
                                    "%s: output %s has stride[%d] = 0 on a dim of size %lld, so "
                                    "two of its elements share memory (an output must not alias "
                                    "itself)",
                                    fn, name, i, (long long)t->shape[i]);
            order[n++] = i;
            count *= t->shape[i]; /* <= FLASHC_MAX_ELEMENTS: check_tensor bounded it */
        }
    for (int a = 1; a < n; a++) /* insertion sort by stride */
        for (int b = a; b > 0 && t->stride[order[b]] < t->stride[order[b - 1]]; b--) {
            int tmp = order[b];
            order[b] = order[b - 1];
            order[b - 1] = tmp;
        }
    /* 1. Sufficient, and the common case: with the dims sorted by stride, each stride exceeds
     *    the largest offset reachable through the smaller ones (nested dims, any padding). */
    int64_t reach = 0;
    int bad = -1;
    for (int a = 0; a < n && bad < 0; a++) {
        const int i = order[a];
        if (t->stride[i] <= reach)
            bad = i;
        reach += (t->shape[i] - 1) * t->stride[i]; /* no overflow: check_tensor bounded it */
    }
    if (bad < 0)
        return FLASHC_OK;
    int alias;
    if (n == 2) {
        /* 2. Exact for two dims (strides s < S, sizes n_s, n_S): x s = y S with 0 < x < n_s,
         *    0 < y < n_S has its smallest solution at x = S / g, y = s / g, g = gcd(s, S). */
        const int64_t s0 = t->stride[order[0]], s1 = t->stride[order[1]];
        const int64_t g = gcd64(s0, s1);
        alias = s1 / g < t->shape[order[0]] && s0 / g < t->shape[order[1]];
    } else if (count <= EXACT_MAX_ELEMENTS) {
        /* 3. Exact for small views: every offset, sorted, compared with its neighbour. */
        int64_t off[EXACT_MAX_ELEMENTS];
        for (int64_t e = 0; e < count; e++) {
            int64_t rem = e, o = 0;
            for (int a = 0; a < n; a++) {
                const int i = order[a];
                o += rem % t->shape[i] * t->stride[i];
                rem /= t->shape[i];
            }
            off[e] = o;
        }
        qsort(off, (size_t)count, sizeof off[0], cmp_i64);
        alias = 0;
        for (int64_t e = 1; e < count && !alias; e++)
            alias = off[e] == off[e - 1];
    } else {
        return flashc__fail(FLASHC_ERR_INVALID_STRIDE,
                            "%s: output %s: sorted by stride, stride[%d] = %lld does not exceed "
                            "the largest offset of the smaller-stride dims, and a view of more "
                            "than two such dims and more than %d elements is accepted only with "
                            "nested strides (it may alias itself)",
                            fn, name, bad, (long long)t->stride[bad], (int)EXACT_MAX_ELEMENTS);
    }
    if (alias)
        return flashc__fail(FLASHC_ERR_INVALID_STRIDE,
                            "%s: output %s has strides under which two of its elements share "
                            "memory (an output must not alias itself)",
                            fn, name);
    return FLASHC_OK;
}

void flashc__tensor_extent(const flashc_tensor *t, uintptr_t *lo, uintptr_t *hi)
{
    int64_t max_off = 0;
    for (int i = 0; i < t->ndim; i++)
        max_off += (t->shape[i] - 1) * t->stride[i];
    *lo = (uintptr_t)t->data;
    *hi = *lo + (uintptr_t)(max_off + 1) * flashc_dtype_size(t->dtype);
}

flashc_status flashc__check_no_overlap(const char *fn, const char *na, const flashc_tensor *a,
                                       const char *nb, const flashc_tensor *b)
{
    if (!a || !b || a->device != b->device)
        return FLASHC_OK;
    uintptr_t alo, ahi, blo, bhi;
    flashc__tensor_extent(a, &alo, &ahi);
    flashc__tensor_extent(b, &blo, &bhi);
    /* Conservative: views interleaved in one buffer that share no element are refused too. */
    if (alo < bhi && blo < ahi)
        return flashc__fail(FLASHC_ERR_OVERLAP,
                            "%s: the byte range %s spans overlaps the byte range of %s (ranges "
                            "from the first to the last element are compared, so interleaved "
                            "views are refused even when they share no element)",
                            fn, na, nb);
    return FLASHC_OK;
}

flashc_status flashc__check_outputs(const char *fn, int n_out, const flashc_tensor *const *outs,
                                    const char *const *out_names, int n_in,
                                    const flashc_tensor *const *ins, const char *const *in_names)
{
    for (int i = 0; i < n_out; i++)
        if (outs[i])
            FLASHC_TRY(flashc__check_output_layout(fn, out_names[i], outs[i]));
    for (int i = 0; i < n_out; i++) {
        for (int j = 0; j < n_in; j++)
            FLASHC_TRY(flashc__check_no_overlap(fn, out_names[i], outs[i], in_names[j], ins[j]));
        for (int j = i + 1; j < n_out; j++)
            FLASHC_TRY(flashc__check_no_overlap(fn, out_names[j], outs[j], out_names[i], outs[i]));
    }
    return FLASHC_OK;
}
