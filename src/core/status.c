/* status.c — status names and the per-thread detail of the last failure. */
#include "internal.h"
#include "sized_struct.h"

#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

const char *flashc_status_string(flashc_status status)
{
    switch (status) {
    case FLASHC_OK: return "ok";
    case FLASHC_ERR_NULL_POINTER: return "null pointer";
    case FLASHC_ERR_INVALID_SHAPE: return "invalid shape";
    case FLASHC_ERR_INVALID_STRIDE: return "invalid stride";
    case FLASHC_ERR_HEAD_MISMATCH: return "head count mismatch";
    case FLASHC_ERR_DIM_MISMATCH: return "dimension mismatch";
    case FLASHC_ERR_DTYPE_MISMATCH: return "dtype mismatch";
    case FLASHC_ERR_UNSUPPORTED_DTYPE: return "unsupported dtype";
    case FLASHC_ERR_OVERLAP: return "output overlaps another tensor";
    case FLASHC_ERR_OVERFLOW: return "size overflows 64 bits";
    case FLASHC_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FLASHC_ERR_OUT_OF_MEMORY: return "out of memory";
    case FLASHC_ERR_UNSUPPORTED: return "unsupported";
    case FLASHC_ERR_DEVICE: return "device error";
    default: return "unknown status";
    }
}

const char *flashc_last_error(void) { return last_error; }

flashc_status flashc__fail(flashc_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return status;
}

flashc_status flashc__check_struct_cut(const char *fn, const char *what, size_t size,
                                       const flashc__field *fields, int n)
{
    for (int i = 0; i < n; i++)
        if (fields[i].off < size && size < fields[i].end)
            return flashc__fail(FLASHC_ERR_INVALID_ARGUMENT,
                                "%s: %s.struct_size = %zu ends inside the field %s (bytes %zu to "
                                "%zu); set it to sizeof of the struct of your header",
                                fn, what, size, fields[i].name, fields[i].off, fields[i].end - 1);
    return FLASHC_OK;
}

flashc_status flashc__read_sized(const char *fn, const char *what, const void *in, size_t size,
                                 void *out, size_t out_size, const flashc__field *fields, int n)
{
    if (size > out_size) {
        const unsigned char *tail = (const unsigned char *)in + out_size;
        for (size_t i = 0; i < size - out_size; i++)
            if (tail[i])
                return flashc__fail(FLASHC_ERR_UNSUPPORTED,
                                    "%s: %s.struct_size = %zu is larger than this library's "
                                    "%zu and the unknown fields are set (a newer flashc feature)",
                                    fn, what, size, out_size);
    }
    FLASHC_TRY(flashc__check_struct_cut(fn, what, size, fields, n));
    memcpy(out, in, size < out_size ? size : out_size);
    return FLASHC_OK;
}
