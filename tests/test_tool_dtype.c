/* test_tool_dtype.c — the CLI's dtype converters (tools/dtype.c) against the library's
 * (src/core: flashc__f32_to_bf16 / flashc__f32_to_f16 and back), bit for bit: the bench rounds
 * its inputs with the tool's and the kernels widen them with the library's, so they must agree.
 * Every 16-bit pattern is widened; rounding is checked on every bf16 / f16 value, the float32
 * neighbours of each rounding midpoint (ties, one ulp either side) and random bit patterns. */
#include "common.h"
#include "dtype.h"
#include "internal.h"

#include <math.h>
#include <string.h>

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Rounds the float with bit pattern u both ways; a mismatch names the pattern. */
static void same_rounding(uint32_t u)
{
    const float f = from_bits(u);
    const uint16_t b_tool = dtype_f32_to_bf16(f), b_lib = flashc__f32_to_bf16(f);
    const uint16_t h_tool = dtype_f32_to_f16(f), h_lib = flashc__f32_to_f16(f);
    if (b_tool != b_lib || h_tool != h_lib)
        fail_msg("float bits 0x%08x: bf16 tool 0x%04x lib 0x%04x, f16 tool 0x%04x lib 0x%04x",
                 (unsigned)u, b_tool, b_lib, h_tool, h_lib);
}

static void test_widen_every_pattern(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        const float bt = dtype_bf16_to_f32((uint16_t)h), bl = flashc__bf16_to_f32((uint16_t)h);
        const float ht = dtype_f16_to_f32((uint16_t)h), hl = flashc__f16_to_f32((uint16_t)h);
        /* bit equality, NaN payloads and the sign of zero included */
        if (bits(bt) != bits(bl) || bits(ht) != bits(hl))
            fail_msg("pattern 0x%04x: bf16 %a vs %a, f16 %a vs %a", (unsigned)h, bt, bl, ht, hl);
        /* widening then rounding gives the pattern back (NaNs: a NaN) */
        if (!isnan(bt))
            assert_int_equal(dtype_f32_to_bf16(bt), h);
        if (!isnan(ht))
            assert_int_equal(dtype_f32_to_f16(ht), h);
    }
}

static void test_round_midpoints(void **state)
{
    (void)state;
    for (uint32_t h = 0; h <= 0xffffu; h++) {
        /* bf16: value h << 16, midpoint to the next one at + 0x8000 */
        const uint32_t b = h << 16;
        for (int32_t d = -1; d <= 1; d++) {
            same_rounding(b + (uint32_t)d);
            same_rounding(b + 0x8000u + (uint32_t)d);
        }
        /* f16: each finite value and the midpoint to the next (exact in float32) */
        const float v = dtype_f16_to_f32((uint16_t)h);
        const uint16_t next = (uint16_t)(h + 1);
        if (isfinite(v) && (h & 0x7fffu) < 0x7bffu) {
            const float mid = (float)(((double)v + (double)dtype_f16_to_f32(next)) / 2.0);
            for (int32_t d = -1; d <= 1; d++) {
                same_rounding(bits(v) + (uint32_t)d);
                same_rounding(bits(mid) + (uint32_t)d);
            }
        }
    }
    /* the overflow edge of f16 (65520 rounds to infinity) and the subnormal floor */
    const float edges[] = {65504.0f, 65519.99f, 65520.0f, 1e30f, 5.9604645e-8f, 2.9802322e-8f,
                           2.9802326e-8f, 1e-30f, 0.0f, INFINITY, NAN};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        same_rounding(bits(edges[i]));
        same_rounding(bits(-edges[i]));
    }
}

static void test_round_random_patterns(void **state)
{
    (void)state;
    for (int i = 0; i < 1 << 20; i++)
        same_rounding((uint32_t)(tu_uniform() * 4294967296.0));
}

static void test_names(void **state)
{
    (void)state;
    assert_int_equal(dtype_parse("bf16"), FLASHC_BF16);
    assert_int_equal(dtype_parse("f16"), FLASHC_F16);
    assert_int_equal(dtype_parse("f32"), FLASHC_F32);
    assert_int_equal(dtype_parse("f64"), -1);
    assert_string_equal(dtype_name(FLASHC_BF16), "bf16");
    assert_true(dtype_unit_roundoff(FLASHC_BF16) == ldexp(1.0, -8));
    assert_true(dtype_unit_roundoff(FLASHC_F16) == ldexp(1.0, -11));
}

int main(void)
{
    tu_seed_from_env();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_widen_every_pattern),
        cmocka_unit_test(test_round_midpoints),
        cmocka_unit_test(test_round_random_patterns),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
