/*
 * dtype.h — the CLI's storage dtypes: names, element sizes and float <-> storage conversion.
 *
 * Conversion is the library's own (src/core/internal.h, linked from libflashc.a): float32 ->
 * bfloat16 / binary16 rounds to nearest, ties to even; NaN stays NaN; binary16 keeps subnormals
 * and overflows to infinity.
 */
#ifndef FLASHC_TOOLS_DTYPE_H
#define FLASHC_TOOLS_DTYPE_H

#include "flashc.h"

#include <stddef.h>
#include <stdint.h>

/* The choices of --dtype, in flashc_dtype order: "f32,f16,bf16". */
extern const char dtype_choices[];

/* "f32", "f16", "bf16" ("?" for anything else). */
const char *dtype_name(flashc_dtype dt);
/* The dtype called name; -1 when there is none. */
int dtype_parse(const char *name);

/* Largest relative error of one round-to-nearest-even into dt: 2^-p for p significant bits
 * (bf16 2^-8, f16 2^-11; 0 for f32, whose rounding the fp32 tolerances already cover). */
double dtype_unit_roundoff(flashc_dtype dt);

/* Element i of a dt buffer as float / a float rounded into element i. */
float dtype_load(const void *base, flashc_dtype dt, size_t i);
void dtype_store(void *base, flashc_dtype dt, size_t i, float v);

#endif /* FLASHC_TOOLS_DTYPE_H */
