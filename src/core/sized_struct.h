/*
 * sized_struct.h — the growth rule of the public sized structs (flashc_attn_params,
 * flashc_cp_params): what a caller's struct_size may be. Kept out of internal.h, which every
 * CUDA source includes, because only the two readers of those structs need it.
 */
#ifndef FLASHC_SIZED_STRUCT_H
#define FLASHC_SIZED_STRUCT_H

#include "internal.h"

/* The fields of a sized struct (flashc_attn_params, flashc_cp_params), for
 * flashc__check_struct_cut: name, first byte, one past the last byte. */
typedef struct flashc__field {
    const char *name;
    size_t off, end;
} flashc__field;
#define FLASHC__FIELD(T, f) {#f, offsetof(T, f), offsetof(T, f) + sizeof(((T *)0)->f)}

/* A caller's struct_size is the sizeof of its header's version of the struct, so it never ends
 * inside a field. One that does (a corrupted or made-up size) would copy part of that field,
 * e.g. the low bytes of a pointer: refused with FLASHC_ERR_INVALID_ARGUMENT naming the field. */
flashc_status flashc__check_struct_cut(const char *fn, const char *what, size_t size,
                                       const flashc__field *fields, int n);

#endif /* FLASHC_SIZED_STRUCT_H */
