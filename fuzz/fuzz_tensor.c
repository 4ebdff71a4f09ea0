/*
 * fuzz_tensor.c — the helpers and settings: flashc_tensor_1d..4d with any sizes, the
 * validation they feed (through flashc_rmsnorm, the cheapest entry point taking 1-d and 2-d
 * views, and flashc_attn_fwd_supported for 3-d / 4-d), flashc_dtype_size,
 * flashc_status_string, flashc_last_error, flashc_build_info, flashc_set/get_num_threads,
 * flashc_mem_get / reset_peak, flashc_cuda_available. Oracle: no sanitizer report; the
 * helpers' strides are the row-major products (or refused by validation when those overflow);
 * a status string is never NULL or empty; the thread setting reads back clamped.
 */
#include "fuzz_common.h"

static int64_t any_size(fz *f)
{
    const uint8_t b = fz_u8(f);
    if (b < 128)
        return b % 9;
    static const int64_t odd[12] = {-1, INT64_MIN, INT64_MAX, INT64_C(1) << 31, INT64_C(1) << 32,
                                    (INT64_C(1) << 38) + 1, INT64_C(1) << 62, 3037000500,
                                    -(INT64_C(1) << 40), 65536, 1 << 20, 1000003};
    return odd[b % 12];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    float store[64] = {0};
    const flashc_dtype dt = (flashc_dtype)fz_range(&f, -1, 3);
    int64_t n[4];
    for (int i = 0; i < 4; i++)
        n[i] = any_size(&f);
    const int nd = (int)fz_range(&f, 1, 4);
    flashc_tensor t = nd == 1   ? flashc_tensor_1d(store, dt, n[0])
                      : nd == 2 ? flashc_tensor_2d(store, dt, n[0], n[1])
                      : nd == 3 ? flashc_tensor_3d(store, dt, n[0], n[1], n[2])
                                : flashc_tensor_4d(store, dt, n[0], n[1], n[2], n[3]);
    if (t.ndim != nd || t.data != store || t.dtype != dt || t.device != FLASHC_DEVICE_CPU)
        fz_die("helper fields", NULL);
    /* strides: row-major products while they fit */
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; i--) {
        if (t.shape[i] != n[i])
            fz_die("helper shape", NULL);
        if (t.stride[i] != s && s != INT64_MAX)
            fz_die("helper stride", NULL);
        if (__builtin_mul_overflow(s, n[i] > 0 ? n[i] : 1, &s))
            s = INT64_MAX;
    }
    /* validation on those views: a view that does not fit store must be refused; one that
     * fits (all sizes small) may run. The last error must say something on a refusal. */
    int64_t count = 1;
    int fits = 1;
    for (int i = 0; i < nd; i++)
        if (n[i] <= 0 || __builtin_mul_overflow(count, n[i], &count))
            fits = 0;
    const int64_t es = (int64_t)flashc_dtype_size(dt);
    fits = fits && es > 0 && count <= (int64_t)sizeof store / es;
    float w[64] = {0}, y[64];
    memset(y, 0x55, sizeof y);
    flashc_status st;
    if (nd <= 2) {
        flashc_tensor tw = flashc_tensor_1d(w, dt, nd == 2 ? n[1] : n[0]);
        flashc_tensor x2 = nd == 2 ? t : flashc_tensor_2d(store, dt, 1, n[0]);
        flashc_tensor ty = x2;
        ty.data = y;
        st = fits ? flashc_rmsnorm(&x2, &tw, 1e-6f, &ty) : FLASHC_OK;
        if (!fits) {
            ty.data = NULL; /* never written: a NULL output is refused whatever the sizes */
            st = flashc_rmsnorm(&x2, &tw, 1e-6f, &ty);
            if (st == FLASHC_OK)
                fz_die("rmsnorm accepted a NULL output", NULL);
        }
    } else {
        flashc_tensor q = nd == 4 ? t : flashc_tensor_4d(store, dt, 1, n[0], n[1], n[2]);
        st = flashc_attn_fwd_supported(NULL, &q, &q, &q, &q, NULL); /* o = q: refused anyway */
        if (st == FLASHC_OK)
            fz_die("supported() accepted o aliasing q", NULL);
    }
    if ((unsigned)st >= FLASHC_STATUS_COUNT || (st != FLASHC_OK && !flashc_last_error()[0]))
        fz_die("status or message", NULL);
    /* the rest of the small API */
    const int code = (int)(int8_t)fz_u8(&f);
    const char *name = flashc_status_string((flashc_status)code);
    if (!name || !name[0])
        fz_die("status string", NULL);
    const size_t dsz = flashc_dtype_size((flashc_dtype)code);
    if ((code >= 0 && code < FLASHC_DTYPE_COUNT) != (dsz != 0) || (code == 0 && dsz != 4) ||
        ((code == 1 || code == 2) && dsz != 2))
        fz_die("dtype size", NULL);
    const char *bi = flashc_build_info();
    if (!bi || strncmp(bi, "0.", 2) != 0 || bi != flashc_build_info())
        fz_die("build info", NULL);
    const int th = (int)(int32_t)fz_u32(&f) % 4096;
    flashc_set_num_threads(th);
    const int got = flashc_get_num_threads();
    if (th > 0 && got != (th > FLASHC_MAX_THREADS ? FLASHC_MAX_THREADS : th))
        fz_die("thread setting", NULL);
    if (got < 1 || got > FLASHC_MAX_THREADS)
        fz_die("thread count out of range", NULL);
    flashc_set_num_threads(2);
    const flashc_mem_stats m = flashc_mem_get();
    if (m.current_bytes < 0 || m.peak_bytes < m.current_bytes || m.alloc_count < 0)
        fz_die("memory stats", NULL);
    if (fz_one_in(&f, 4))
        flashc_mem_reset_peak();
    (void)flashc_cuda_available();
    return 0;
}
