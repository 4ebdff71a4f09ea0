/*
 * sized_struct.h — the growth rule of the public sized structs (flashc_attn_params,
 * flashc_cp_params, flashc_kv_cache, flashc_varlen): what a caller's struct_size may be. Kept
 * out of internal.h, which every CUDA source includes, because only the readers of those
 * structs need it.
 */
#ifndef FLASHC_SIZED_STRUCT_H
#define FLASHC_SIZED_STRUCT_H

#include "internal.h"

/* The fields of a sized struct (flashc_attn_params, flashc_cp_params, flashc_kv_cache,
 * flashc_varlen), for flashc__check_struct_cut: name, first byte, one past the last byte. */
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

/* The rest of the growth rule, then the copy: a struct_size larger than this library's struct
 * (out_size) only with the unknown tail zero (else FLASHC_ERR_UNSUPPORTED: a newer header's
 * feature this library lacks), none ending inside a field (flashc__check_struct_cut); then the
 * known bytes of in copied over out, whose later fields the caller has defaulted. The caller
 * checks the smallest size it takes (its message names its own default) and sets
 * out's struct_size after. */
flashc_status flashc__read_sized(const char *fn, const char *what, const void *in, size_t size,
                                 void *out, size_t out_size, const flashc__field *fields, int n);

#endif /* FLASHC_SIZED_STRUCT_H */
