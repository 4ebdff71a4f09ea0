/*
 * tile.h — loading a rows x D tile of a strided (B, S, H, D) attention tensor as float32,
 * shared by the CPU forward and backward loop nests.
 */
#ifndef FLASHC_CPU_TILE_H
#define FLASHC_CPU_TILE_H

#include "internal.h"

/* Rows [off, off + rows * st[1]) of a tensor with strides st (elements) as a row-major float32
 * tile: points into the tensor when it already is float32 with unit feature stride (no copy),
 * otherwise converts into buf (rows x D). *ld receives the leading dimension in floats. */
static inline const float *cpu_load_tile_f32(const void *base, flashc_dtype dt, const int64_t *st,
                                             int64_t off, int64_t rows, int64_t D, float *buf,
                                             int64_t *ld)
{
    if (dt == FLASHC_F32 && st[3] == 1) {
        *ld = st[1];
        return (const float *)base + off;
    }
    for (int64_t r = 0; r < rows; r++)
        for (int64_t d = 0; d < D; d++)
            buf[r * D + d] = flashc__load(base, dt, off + r * st[1] + d * st[3]);
    *ld = D;
    return buf;
}

#endif /* FLASHC_CPU_TILE_H */
