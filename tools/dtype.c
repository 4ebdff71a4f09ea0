/* dtype.c — storage dtypes of the CLI (see dtype.h). */
#include "dtype.h"

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

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* bfloat16 is the top half of a float32: add 0x7fff plus the lowest kept bit, truncate. */
uint16_t dtype_f32_to_bf16(float f)
{
    const uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it a quiet NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float dtype_bf16_to_f32(uint16_t h) { return float_of((uint32_t)h << 16); }

/* binary32 -> binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits. */
uint16_t dtype_f32_to_f16(float f)
{
    const uint32_t u = bits_of(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return sign | 0x7e00u;
    if (a >= 0x477ff000u) /* rounds to 65520 or more: infinity */
        return sign | 0x7c00u;
    if (a >= 0x38800000u) /* normal: rebias the exponent (127 -> 15), round 13 bits away */
        return sign | (uint16_t)((a - (112u << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13);
    if (a < 0x33000000u) /* below half the smallest subnormal (2^-25): zero */
        return sign;
    /* subnormal: the full 24-bit significand shifted right by 14..24, ties to even */
    const uint32_t shift = 126u - (a >> 23);
    const uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u)))
        q++;
    return sign | (uint16_t)q;
}

float dtype_f16_to_f32(uint16_t h)
{
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1fu) /* infinity, NaN */
        return float_of(sign | 0x7f800000u | (m << 13));
    if (e != 0)
        return float_of(sign | ((e + 112u) << 23) | (m << 13));
    /* zero or subnormal: m * 2^-24, exact in float32 */
    const float v = (float)m * (1.0f / 16777216.0f);
    return sign ? -v : v;
}

float dtype_load(const void *base, flashc_dtype dt, size_t i)
{
    switch (dt) {
    case FLASHC_BF16: return dtype_bf16_to_f32(((const uint16_t *)base)[i]);
    case FLASHC_F16: return dtype_f16_to_f32(((const uint16_t *)base)[i]);
    default: return ((const float *)base)[i];
    }
}

void dtype_store(void *base, flashc_dtype dt, size_t i, float v)
{
    switch (dt) {
    case FLASHC_BF16: ((uint16_t *)base)[i] = dtype_f32_to_bf16(v); break;
    case FLASHC_F16: ((uint16_t *)base)[i] = dtype_f32_to_f16(v); break;
    default: ((float *)base)[i] = v; break;
    }
}
