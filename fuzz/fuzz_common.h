/*
 * fuzz_common.h — what every libFuzzer target of flashc shares (fuzz/README in run.sh):
 *
 *   - a byte reader that turns the fuzzer's input into decisions (never reads past the end:
 *     an exhausted input reads zeros);
 *   - a tensor decoder: a tensor the target means to pass (its shape, dtype) is decoded into a
 *     flashc_tensor descriptor that is usually valid and sometimes not: NULL tensor, NULL data,
 *     a wrong dtype, device or rank, a size of 0, -1 or beyond the bounds, permuted, padded,
 *     random, zero, negative or overflowing strides, a misaligned pointer, an output that
 *     points into another tensor's memory. Sizes are capped by the target, so one execution
 *     stays in the millisecond range; huge sizes are only ones the library must refuse.
 *   - guarded buffers: each tensor owns a malloc'ed buffer of exactly the bytes its view spans
 *     (ASan's redzones sit right after it), filled with decoded values (inputs) or a decoded
 *     byte pattern (outputs), and a snapshot taken before the call;
 *   - the oracle: inputs bit-identical after any call; outputs bit-identical after a refused
 *     call; after an accepted call, no byte of an output's buffer changed outside the elements
 *     of its view; a refusal has a status below FLASHC_STATUS_COUNT and a message.
 * Values are small finite numbers (|x| <= 8, steps of 1/16) unless the tensor draws "specials"
 * (NaN, +-Inf, signed zeros, subnormals) or FLASHC_FUZZ_WIDE=1 is set (raw float32 bits: also
 * finds the numeric findings still open in the attention kernels, F4/F5 of issue 10).
 * A violated oracle calls abort() with a message: libFuzzer records the input as a crash.
 */
#ifndef FLASHC_FUZZ_COMMON_H
#define FLASHC_FUZZ_COMMON_H

#include "flashc.h"
#include "internal.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the byte reader ------------------------------------------------------------------- */

typedef struct fz {
    const uint8_t *p;
    size_t n;
} fz;

static uint8_t fz_u8(fz *f)
{
    if (!f->n)
        return 0;
    f->n--;
    return *f->p++;
}

static uint32_t fz_u32(fz *f)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | fz_u8(f);
    return v;
}

/* an integer in [lo, hi] (hi - lo < 2^32) */
static int64_t fz_range(fz *f, int64_t lo, int64_t hi)
{
    const uint64_t span = (uint64_t)(hi - lo) + 1;
    const uint64_t r = span <= 256 ? fz_u8(f) : fz_u32(f);
    return lo + (int64_t)(r % span);
}

/* true with probability about 1 / n */
static int fz_one_in(fz *f, int n) { return fz_u8(f) % n == 0; }

/* perm = a Fisher-Yates shuffle of 0 .. n - 1 (shuffled pages, cache rows): n - 1 draws */
static void fz_shuffled_iota(fz *f, int32_t *perm, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        perm[i] = (int32_t)i;
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = fz_range(f, 0, i);
        const int32_t t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
}

static int fz_wide(void)
{
    static int w = -1;
    if (w < 0) {
        const char *s = getenv("FLASHC_FUZZ_WIDE");
        w = s && s[0] == '1';
    }
    return w;
}

static void fz_dump_all(void);

static void fz_die(const char *what, const char *detail)
{
    fz_dump_all();
    fprintf(stderr, "flashc fuzz oracle violated: %s%s%s\n", what, detail ? ": " : "",
            detail ? detail : "");
    abort();
}

/* ---- decoded tensors ------------------------------------------------------------------- */

enum { FZ_MAX_TENSORS = 16 };

typedef struct fz_tensor {
    flashc_tensor t;
    int present;           /* 0: the call gets a NULL tensor pointer                          */
    int output;            /* written by the call                                              */
    int owns;              /* 1: base is this tensor's own buffer; 0: aliases another's        */
    int specials;          /* values include NaN / Inf / ...                                   */
    unsigned char *base;   /* the buffer (owned) or NULL                                       */
    size_t bytes;
    unsigned char *snap;   /* the buffer before the call                                       */
    int64_t count;         /* elements of the view when enumerable, else -1                    */
} fz_tensor;

typedef struct fz_set {
    fz_tensor *t[FZ_MAX_TENSORS];
    int n;
} fz_set;

static const int64_t FZ_HUGE[] = {(INT64_C(1) << 38) + 1, (INT64_C(1) << 62) + 5, INT64_MAX};

/* A value for an input element. */
static float fz_value(fz *f, int specials)
{
    if (fz_wide()) {
        union { uint32_t u; float x; } c = {fz_u32(f)};
        return c.x;
    }
    const uint8_t b = fz_u8(f);
    if (specials && b >= 248) {
        static const float sp[8] = {NAN, INFINITY, -INFINITY, -0.0f, 1e-40f, -1e-42f, 65504.0f,
                                    3e38f};
        return sp[b - 248];
    }
    return (float)(int8_t)b / 16.0f;
}

/* Element off of a view, loaded through memcpy (the harness also reads misaligned views). */
static float fz_load(const void *base, flashc_dtype dt, int64_t off)
{
    if ((unsigned)dt >= FLASHC_DTYPE_COUNT)
        dt = FLASHC_F32;
    float one[1];
    memcpy(one, (const char *)base + off * (int64_t)flashc_dtype_size(dt), flashc_dtype_size(dt));
    return flashc__load(one, dt, 0);
}

/* The largest element offset of a valid view, or -1 when the view is not addressable (a
 * negative or overflowing stride or size, or more dims than the struct has). */
static int64_t fz_max_offset(const flashc_tensor *t)
{
    if (t->ndim < 1 || t->ndim > FLASHC_MAX_DIMS)
        return -1;
    int64_t m = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t term;
        if (t->shape[i] <= 0 || t->stride[i] < 0 ||
            __builtin_mul_overflow(t->shape[i] - 1, t->stride[i], &term) ||
            __builtin_add_overflow(m, term, &m))
            return -1;
    }
    return m;
}

static int64_t fz_count(const flashc_tensor *t)
{
    if (t->ndim < 1 || t->ndim > FLASHC_MAX_DIMS)
        return -1;
    int64_t c = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] <= 0 || __builtin_mul_overflow(c, t->shape[i], &c) || c > (1 << 20))
            return -1;
    return c;
}

/* Element offset of the e-th index (row-major order over the shape). */
static int64_t fz_offset_of(const flashc_tensor *t, int64_t e)
{
    int64_t o = 0;
    for (int i = t->ndim - 1; i >= 0; i--) {
        o += e % t->shape[i] * t->stride[i];
        e /= t->shape[i];
    }
    return o;
}

/* Decodes one tensor the target means to be (ndim, shape, dtype), then mutates it now and
 * then. max_bytes caps the buffer (a view larger than that is given a small buffer only when
 * the library must refuse it). */
static void fz_decode(fz *f, fz_tensor *ft, int ndim, const int64_t *shape, flashc_dtype dtype,
                      int output)
{
    memset(ft, 0, sizeof *ft);
    ft->present = 1;
    ft->output = output;
    ft->owns = 1;
    ft->count = -1;
    flashc_tensor *t = &ft->t;
    t->ndim = ndim;
    t->dtype = dtype;
    t->device = FLASHC_DEVICE_CPU;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    const uint8_t mut = fz_u8(f);
    int misalign = 0, null_data = 0;
    if (mut < 16) { /* one mutation of the descriptor, mostly harmless-looking */
        switch (mut) {
        case 0: ft->present = 0; break;
        case 1: null_data = 1; break;
        case 2: t->dtype = (flashc_dtype)fz_range(f, -1, 3); break;
        case 3: t->device = fz_one_in(f, 2) ? FLASHC_DEVICE_CUDA : (flashc_device)7; break;
        case 4: t->ndim = (int32_t)fz_range(f, 0, 4); break;
        case 5: t->shape[fz_range(f, 0, ndim - 1)] = fz_range(f, -1, 0); break;
        case 6: t->shape[fz_range(f, 0, ndim - 1)] += fz_one_in(f, 2) ? 1 : -1; break;
        case 7: t->shape[fz_range(f, 0, ndim - 1)] = FZ_HUGE[fz_range(f, 0, 2)]; break;
        case 8: misalign = 1; break;
        default: break; /* 9..15: layout mutations below */
        }
    }
    /* strides: contiguous, permuted, padded, random, with one zero / negative / huge */
    const int lay = (int)fz_range(f, 0, 7);
    int order[FLASHC_MAX_DIMS] = {0, 1, 2, 3};
    if (lay == 1 || lay == 2)
        for (int i = ndim - 1; i > 0; i--) {
            const int j = (int)fz_range(f, 0, i);
            const int tmp = order[i];
            order[i] = order[j], order[j] = tmp;
        }
    int64_t s = 1;
    for (int a = ndim - 1; a >= 0; a--) {
        const int i = lay == 1 || lay == 2 ? order[a] : a;
        t->stride[i] = s;
        const int64_t n = t->shape[i] > 0 && t->shape[i] < (1 << 20) ? t->shape[i] : 1;
        s = s * n + (lay == 2 ? fz_range(f, 0, 3) : 0);
    }
    if (lay == 3)
        for (int i = 0; i < ndim; i++)
            t->stride[i] = fz_range(f, 0, 12);
    if (lay == 4 || (mut >= 9 && mut < 16)) {
        const int i = (int)fz_range(f, 0, ndim - 1);
        switch (mut >= 9 && mut < 16 ? mut - 9 : 0) {
        case 0: case 1: case 2: t->stride[i] = 0; break;                    /* broadcast  */
        case 3: t->stride[i] = -fz_range(f, 1, 3); break;                  /* negative   */
        case 4: /* overflows the extent whatever the dtype: refused */
            t->stride[i] = INT64_MAX / 2 + 1;
            t->shape[i] = t->shape[i] < 3 ? 3 : t->shape[i];
            break;
        default: t->stride[i] += 1; break;                                 /* off by one */
        }
    }
    /* the buffer: exactly the bytes the view spans */
    const size_t es = flashc_dtype_size(t->dtype) ? flashc_dtype_size(t->dtype) : 4;
    const int64_t mo = fz_max_offset(t);
    int64_t count = fz_count(t);
    size_t bytes = 64; /* a view the library must refuse gets a token buffer */
    if (mo >= 0 && mo < (1 << 22) && count >= 0)
        bytes = (size_t)(mo + 1) * es;
    else
        count = -1;
    ft->count = count;
    ft->bytes = bytes + (size_t)misalign;
    ft->base = malloc(ft->bytes);
    ft->specials = fz_one_in(f, 8);
    if (output) {
        const uint8_t pat = fz_u8(f);
        memset(ft->base, pat, ft->bytes);
    } else {
        const flashc_dtype sdt = t->dtype < FLASHC_DTYPE_COUNT && t->dtype >= 0 ? t->dtype
                                                                               : FLASHC_F32;
        for (size_t e = 0; e + es <= bytes; e += es) { /* memcpy: the start may be misaligned */
            float one[1];
            flashc__store(one, sdt, 0, fz_value(f, ft->specials));
            memcpy(ft->base + misalign + e, one, es);
        }
    }
    t->data = null_data ? NULL : ft->base + misalign;
}

/* An output that points into another tensor's memory (the library must refuse it). */
static void fz_alias(fz *f, fz_tensor *out, const fz_tensor *other)
{
    if (!other->present || !other->base || !out->t.data)
        return;
    free(out->base);
    out->base = NULL;
    out->owns = 0;
    out->bytes = 0;
    const size_t es = flashc_dtype_size(out->t.dtype) ? flashc_dtype_size(out->t.dtype) : 4;
    const size_t slots = other->bytes / es;
    out->t.data = other->base + (slots ? (size_t)fz_range(f, 0, (int64_t)slots - 1) * es : 0);
    out->count = -1;
}

static void fz_snapshot(fz_set *s)
{
    for (int i = 0; i < s->n; i++) {
        fz_tensor *t = s->t[i];
        if (t->owns) {
            t->snap = malloc(t->bytes);
            memcpy(t->snap, t->base, t->bytes);
        }
    }
}

static void fz_free(fz_set *s)
{
    for (int i = 0; i < s->n; i++) {
        free(s->t[i]->base), free(s->t[i]->snap);
        s->t[i]->base = s->t[i]->snap = NULL;
    }
    s->n = 0;
}

/* The oracle after one call. name: the entry point, for messages. */
static void fz_check(const char *name, const fz_set *s, flashc_status st)
{
    char msg[600];
    if ((unsigned)st >= FLASHC_STATUS_COUNT) {
        snprintf(msg, sizeof msg, "%s returned %d", name, (int)st);
        fz_die("status out of range", msg);
    }
    if (st != FLASHC_OK && flashc_last_error()[0] == '\0') {
        snprintf(msg, sizeof msg, "%s: %s", name, flashc_status_string(st));
        fz_die("a refusal without a message", msg);
    }
    for (int i = 0; i < s->n; i++) {
        const fz_tensor *t = s->t[i];
        if (!t->owns)
            continue;
        if (!t->output || st != FLASHC_OK) {
            if (memcmp(t->base, t->snap, t->bytes) != 0) {
                snprintf(msg, sizeof msg, "%s -> %s (%s): tensor %d (%s) changed", name,
                         flashc_status_string(st), flashc_last_error(), i,
                         t->output ? "an output of a refused call" : "an input");
                fz_die("memory changed", msg);
            }
            continue;
        }
        /* accepted: only the bytes of the view's elements may change */
        if (t->count < 0) {
            snprintf(msg, sizeof msg, "%s accepted output %d whose view the harness cannot "
                     "enumerate (it is not addressable)", name, i);
            fz_die("accepted an invalid output", msg);
        }
        const size_t es = flashc_dtype_size(t->t.dtype);
        const size_t skip = (size_t)((unsigned char *)t->t.data - t->base);
        unsigned char *mask = calloc(t->bytes, 1);
        for (int64_t e = 0; e < t->count; e++)
            memset(mask + skip + (size_t)fz_offset_of(&t->t, e) * es, 1, es);
        for (size_t b = 0; b < t->bytes; b++)
            if (!mask[b] && t->base[b] != t->snap[b]) {
                snprintf(msg, sizeof msg, "%s: output %d byte %zu (outside its view) changed",
                         name, i, b);
                free(mask);
                fz_die("write outside an output", msg);
            }
        free(mask);
    }
}

/* Restores every owned buffer to its snapshot (to run a second entry point on the same data). */
static void fz_restore(const fz_set *s)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i]->owns)
            memcpy(s->t[i]->base, s->t[i]->snap, s->t[i]->bytes);
}

static const flashc_tensor *fz_arg(const fz_tensor *t) { return t->present ? &t->t : NULL; }
static flashc_tensor *fz_out(fz_tensor *t) { return t->present ? &t->t : NULL; }

/* True when every element of the (enumerable) view is finite. */
static int fz_finite(const fz_tensor *t)
{
    if (t->count < 0 || !t->t.data)
        return 0;
    for (int64_t e = 0; e < t->count; e++)
        if (!isfinite(fz_load(t->t.data, t->t.dtype, fz_offset_of(&t->t, e))))
            return 0;
    return 1;
}

static double fz_maxabs(const fz_tensor *t)
{
    double m = 0.0;
    for (int64_t e = 0; t->count > 0 && e < t->count; e++)
        m = fmax(m, fabs((double)fz_load(t->t.data, t->t.dtype, fz_offset_of(&t->t, e))));
    return m;
}

/* Elementwise |a - b| <= tol over two views with the same shape (buffers a->t.data,
 * b_data laid out like a). */
static void fz_compare(const char *what, const fz_tensor *a, const void *b_data, double tol)
{
    for (int64_t e = 0; e < a->count; e++) {
        const int64_t off = fz_offset_of(&a->t, e);
        const double x = fz_load(a->t.data, a->t.dtype, off);
        const double y = fz_load(b_data, a->t.dtype, off);
        if (!(fabs(x - y) <= tol) && !(x == y) && !(isnan(x) && isnan(y))) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s element %lld: %.9g vs %.9g (tol %.3g)", what,
                     (long long)e, x, y, tol);
            fz_die("fast path and reference disagree", msg);
        }
    }
}

/* A second buffer with a's layout and a's current contents (for the reference's outputs). */
static unsigned char *fz_twin(const fz_tensor *a, flashc_tensor *view)
{
    unsigned char *m = malloc(a->bytes);
    memcpy(m, a->base, a->bytes);
    *view = a->t;
    view->data = m + ((unsigned char *)a->t.data - a->base);
    return m;
}

/* FLASHC_FUZZ_DEBUG=1: the decoded tensors of the failing input, for the report. */
static const fz_set *fz_current;

static void fz_dump_all(void)
{
    if (!getenv("FLASHC_FUZZ_DEBUG") || !fz_current)
        return;
    for (int i = 0; i < fz_current->n; i++) {
        const fz_tensor *ft = fz_current->t[i];
        const flashc_tensor *t = &ft->t;
        fprintf(stderr, "tensor %d: present %d output %d owns %d dtype %d device %d ndim %d "
                "data %p base %p count %lld\n  shape", i, ft->present, ft->output, ft->owns,
                (int)t->dtype, (int)t->device, (int)t->ndim, t->data, (void *)ft->base,
                (long long)ft->count);
        for (int d = 0; d < 4; d++)
            fprintf(stderr, " %lld", (long long)t->shape[d]);
        fprintf(stderr, "  stride");
        for (int d = 0; d < 4; d++)
            fprintf(stderr, " %lld", (long long)t->stride[d]);
        fprintf(stderr, "\n  values");
        for (int64_t e = 0; e < ft->count && e < 64; e++)
            fprintf(stderr, " %g", (double)fz_load(t->data, t->dtype, fz_offset_of(t, e)));
        fprintf(stderr, "\n");
    }
}

/* Every owned buffer equals its snapshot (a call that must write nothing). */
static void fz_check_untouched(const char *name, const fz_set *s, flashc_status st)
{
    for (int i = 0; i < s->n; i++)
        if (s->t[i]->owns && memcmp(s->t[i]->base, s->t[i]->snap, s->t[i]->bytes) != 0) {
            char msg[300];
            snprintf(msg, sizeof msg, "%s -> %s: tensor %d changed", name,
                     flashc_status_string(st), i);
            fz_die("a call that writes nothing wrote", msg);
        }
}

/* A twin of output a (same layout, a's snapshot as contents), owned, for the reference. */
/* x rounded into dtype dt (to nearest even, as the library stores; float32 and wider: x as a
 * float, so a double past FLT_MAX is inf too). */
static double fz_round(flashc_dtype dt, double x)
{
    if (!(fabs(x) <= FLT_MAX)) /* NaN, or past every dtype's range (no float cast: UB) */
        return isnan(x) ? x : x > 0 ? INFINITY : -INFINITY;
    unsigned char b[4];
    flashc__store(b, dt, 0, (float)x);
    return flashc__load(b, dt, 0);
}

/* Nonzero when ft is present with exactly the shape it was drawn with. */
static int fz_same_shape(const fz_tensor *ft, const int64_t *shape, int ndim)
{
    if (!ft->present || ft->t.ndim != ndim)
        return 0;
    for (int i = 0; i < ndim; i++)
        if (ft->t.shape[i] != shape[i])
            return 0;
    return 1;
}

static void fz_make_twin(const fz_tensor *a, fz_tensor *tw)
{
    *tw = *a;
    if (!a->owns) {
        tw->base = tw->snap = NULL;
        return;
    }
    tw->base = malloc(a->bytes);
    tw->snap = malloc(a->bytes);
    memcpy(tw->base, a->snap, a->bytes);
    memcpy(tw->snap, a->snap, a->bytes);
    if (a->t.data)
        tw->t.data = tw->base + ((unsigned char *)a->t.data - a->base);
}

/* Values and parameters the targets draw. */
static float fz_scale(fz *f)
{
    static const float tab[16] = {0.0f, 0.0f, 0.0f, 0.0f, 0.125f, 0.5f, 1.0f, 2.0f,
                                  -0.25f, -1.0f, 1e-30f, 0.3f, NAN, INFINITY, -INFINITY, 4.0f};
    if (fz_wide() && fz_one_in(f, 4)) {
        union { uint32_t u; float x; } c = {fz_u32(f)};
        return c.x;
    }
    return tab[fz_u8(f) % 16];
}

static int64_t fz_tile(fz *f)
{
    const uint8_t b = fz_u8(f);
    if (b < 160)
        return 0;
    if (b < 240)
        return 1 + b % 24;
    static const int64_t odd[16] = {-1, -1000, INT64_C(1) << 30, INT64_C(1) << 58, INT64_MAX,
                                    INT64_MIN, 48, 96, 288, 4096, 7, 13, 64, 128, 192, 100};
    return odd[b % 16];
}

static int fz_threads(fz *f)
{
    const uint8_t b = fz_u8(f);
    if (b < 250)
        return b % 4; /* 0 = the default */
    static const int odd[6] = {-1, FLASHC_MAX_THREADS + 1, 0x7fffffff, -0x7fffffff, 5, 8};
    return odd[b - 250];
}

static flashc_dtype fz_dtype(fz *f)
{
    static const flashc_dtype tab[4] = {FLASHC_F32, FLASHC_F32, FLASHC_BF16, FLASHC_F16};
    return tab[fz_u8(f) % 4];
}

/* Relative rounding of one stored value of dt. */
static double fz_eps(flashc_dtype dt)
{
    return dt == FLASHC_BF16 ? 0x1p-8 : dt == FLASHC_F16 ? 0x1p-11 : 0x1p-24;
}

/* The rounding a case's comparison must allow: the coarsest of dt (the dtype the target meant)
 * and the dtypes its present floating-point tensors ended up with. A mutation may give every
 * tensor another dtype the call still accepts (all bf16 where the target meant f32, say), and
 * then the fast path and the reference round to that dtype: a tolerance from dt alone would
 * flag one bf16 ulp as a disagreement (CI's fuzz run of 2026-12-04 afternoon, swiglu). */
static double fz_eps_set(const fz_set *s, flashc_dtype dt)
{
    double e = fz_eps(dt);
    for (int i = 0; i < s->n; i++) {
        const flashc_dtype d = s->t[i]->t.dtype;
        if (s->t[i]->present && (d == FLASHC_F32 || d == FLASHC_BF16 || d == FLASHC_F16))
            e = fmax(e, fz_eps(d));
    }
    return e;
}

/* ---- Attention v2: modifiers, index tensors, per-sequence views ----------------------------- */

/* The Attention v2 modifiers, drawn into pr: a window (one in 3; any negative side means
 * unbounded), softcap (one in 4; -1 and NaN among the values: refused), num_splits now and
 * then (-1 among them: refused), and ALiBi slopes (one in 5): a float32 (Hq) or (B, Hq) tensor
 * decoded into *alibi like any other tensor, so sometimes invalid; alibi->present stays 0 when
 * none is drawn. S: the longest row/key extent. Returns the largest |bias| ALiBi can add
 * (|slope| * distance), for the oracle's bounds. */
static double fz_attn_mods(fz *f, flashc_attn_params *pr, int64_t B, int64_t Hq, int64_t S,
                           fz_tensor *alibi)
{
    memset(alibi, 0, sizeof *alibi);
    if (fz_one_in(f, 3)) {
        pr->window_left = fz_range(f, -2, S);
        pr->window_right = fz_range(f, -2, S);
    }
    if (fz_one_in(f, 4)) {
        static const float caps[8] = {0.5f, 1.0f, 5.0f, 30.0f, 50.0f, 0.0f, -1.0f, NAN};
        pr->softcap = caps[fz_u8(f) % 8];
    }
    if (fz_one_in(f, 16))
        pr->num_splits = (int)fz_range(f, -1, 6);
    if (!fz_one_in(f, 5))
        return 0.0;
    const int per_batch = fz_u8(f) & 1;
    const int64_t sh[2] = {B, Hq};
    fz_decode(f, alibi, per_batch ? 2 : 1, per_batch ? sh : sh + 1, FLASHC_F32, 0);
    pr->alibi_slopes = alibi->present ? &alibi->t : NULL;
    return alibi->count > 0 && alibi->t.data ? fz_maxabs(alibi) * (double)S : 0.0;
}

/* Every attention target's parameters, drawn in one order (so the committed corpora keep their
 * meaning): softmax scale (given or not), causal, tiles, threads, then fz_attn_mods. Returns
 * fz_attn_mods's bias bound. */
static double fz_attn_params(fz *f, flashc_attn_params *pr, int64_t B, int64_t Hq, int64_t S,
                             fz_tensor *alibi)
{
    *pr = flashc_attn_params_default();
    pr->softmax_scale = fz_scale(f);
    pr->has_softmax_scale = pr->softmax_scale != 0.0f || fz_one_in(f, 8);
    pr->causal = fz_u8(f) & 1;
    pr->block_q = fz_tile(f), pr->block_k = fz_tile(f);
    pr->num_threads = fz_threads(f);
    return fz_attn_mods(f, pr, B, Hq, S, alibi);
}

/* The params ABI, in two draws. fz_abi_draw picks a case and applies the first: a struct_size of
 * 0 or too small (abi < 8). fz_abi_params, later, returns what the call gets: NULL (not
 * use_params), pr itself, or (8 <= abi < 16) a copy of pr inside a caller's struct larger than
 * this library's (a newer header), its unknown tail zero or set (abi odd). The memory behind a
 * larger struct_size really is the caller's, as the contract requires. */
static uint8_t fz_abi_draw(fz *f, flashc_attn_params *pr)
{
    const uint8_t abi = fz_u8(f);
    if (abi < 8)
        pr->struct_size = (size_t)fz_range(f, 0, (int64_t)sizeof *pr - 1);
    return abi;
}

/* True when the call got every field of pr as drawn (no struct_size cut it short, no set tail). */
static int fz_abi_complete(uint8_t abi, int use_params)
{
    return use_params && (abi >= 16 || (abi >= 8 && !(abi & 1)));
}

static const flashc_attn_params *fz_abi_params(fz *f, uint8_t abi, const flashc_attn_params *pr,
                                               int use_params)
{
    static union {
        flashc_attn_params p;
        unsigned char b[2 * sizeof(flashc_attn_params)];
    } big;
    if (!use_params)
        return NULL;
    if (abi < 8 || abi >= 16)
        return pr;
    memset(&big, 0, sizeof big);
    big.p = *pr;
    const size_t extra = (size_t)fz_range(f, 1, (int64_t)sizeof *pr);
    big.p.struct_size = sizeof *pr + extra;
    if (abi & 1)
        big.b[sizeof *pr + (size_t)fz_range(f, 0, (int64_t)extra - 1)] = 1;
    return &big.p;
}

/* True when the ALiBi slopes (if any) are usable by the oracle's bounds (finite). */
static int fz_mods_finite(const fz_tensor *alibi)
{
    return !alibi->present || !alibi->t.data || fz_finite(alibi);
}

/* An int32 index tensor (ndim, shape) decoded like any other (so sometimes invalid), holding
 * vals (n of them, row-major; repeated if a mutated shape has more elements). */
static void fz_index(fz *f, fz_tensor *ft, int ndim, const int64_t *shape, const int32_t *vals,
                     int64_t n)
{
    fz_decode(f, ft, ndim, shape, FLASHC_I32, 1);
    ft->output = 0;
    if (ft->count < 0 || !ft->t.data || ft->t.dtype != FLASHC_I32 || n <= 0)
        return;
    for (int64_t e = 0; e < ft->count; e++)
        memcpy((char *)ft->t.data + fz_offset_of(&ft->t, e) * 4, &vals[e % n], 4);
}

/* Element e (row-major) of an int32 view, read back (the oracle reads what the call saw). */
static int32_t fz_i32(const fz_tensor *t, int64_t e)
{
    int32_t v;
    memcpy(&v, (const char *)t->t.data + fz_offset_of(&t->t, e) * 4, 4);
    return v;
}

/* The view of rows [r0, r0 + n) along dimension dim of t, with one more leading dimension of
 * size 1 (a dense (1, n, ...) problem cut from packed varlen rows). t->ndim < FLASHC_MAX_DIMS. */
static flashc_tensor fz_rows_view(const flashc_tensor *t, int dim, int64_t r0, int64_t n)
{
    flashc_tensor v = *t;
    v.data = (char *)t->data + r0 * t->stride[dim] * (int64_t)flashc_dtype_size(t->dtype);
    v.shape[dim] = n;
    for (int i = t->ndim; i > 0; i--)
        v.shape[i] = v.shape[i - 1], v.stride[i] = v.stride[i - 1];
    v.shape[0] = 1;
    v.stride[0] = 0;
    v.ndim = t->ndim + 1;
    return v;
}

/* The 1-D slopes of sequence b: a (B, Hq) table's row b, a (Hq) table as it is. */
static flashc_tensor fz_alibi_row(const flashc_tensor *a, int64_t b)
{
    flashc_tensor r = *a;
    if (a->ndim == 2) {
        r.ndim = 1;
        r.shape[0] = a->shape[1];
        r.stride[0] = a->stride[1];
        r.data = (char *)a->data + b * a->stride[0] * 4;
    }
    return r;
}

/* The scale a call used: params cut short by struct_size fall back to the default scale
 * (all_params: the struct the call saw held every field). */
static double fz_used_scale(const flashc_attn_params *pr, int use_params, int all_params,
                            int64_t D)
{
    const double def = 1.0 / sqrt((double)D);
    if (all_params && pr->has_softmax_scale)
        return fabs(pr->softmax_scale);
    return use_params && !all_params ? fmax(fabs(pr->softmax_scale), def) : def;
}

#endif /* FLASHC_FUZZ_COMMON_H */
