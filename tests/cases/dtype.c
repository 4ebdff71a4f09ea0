/* dtype.c — storage dtypes of the CLI (see dtype.h). */
#include "dtype.h"
#include "internal.h"

#include <string.h>

const char dtype_choices[] = "f32,f16,bf16";

static const char *const names[FLASHC_DTYPE_COUNT] = {
    [FLASHC_F32] = "f32", [FLASHC_F16] = "f16", [FLASHC_BF16] = "bf16"};

const char *dtype_name(flashc_dtype dt)
{
    return (unsigned)dt < FLASHC_DTYPE_COUNT ? names[dt] : "?";
}

int dtype_parse(const char *name)
{
    for (int i = 0; i < FLASHC_DTYPE_COUNT; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

double dtype_unit_roundoff(flashc_dtype dt)
{
    switch (dt) {
    case FLASHC_BF16: return 1.0 / 256.0;   /* 8 significant bits  */
    case FLASHC_F16: return 1.0 / 2048.0;   /* 11 significant bits */
    default: return 0.0;
    }
}

/* The library's converters (src/core/internal.h): the bench rounds its inputs exactly as the
 * kernels widen and narrow them. */
float dtype_load(const void *base, flashc_dtype dt, size_t i)
{
    return flashc__load(base, dt, (int64_t)i);
}

void dtype_store(void *base, flashc_dtype dt, size_t i, float v)
{
    flashc__store(base, dt, (int64_t)i, v);
}
