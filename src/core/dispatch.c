/* dispatch.c — the attention dispatch table: one row per (op, backend), each answering
 * supports / workspace / run (internal.h, attn_impl). The public entry points (api_attn.c) take
 * the device's default row; tests and `flashc check` may force another by name
 * (attn_force_backend) to run the float64 reference through the same entry points, on every
 * layout. */
#include "internal.h"

#include <string.h>

/* First row of each (op, device) is its default. */
static const attn_impl table[] = {
    {"cpu", ATTN_OP_FWD, FLASHC_DEVICE_CPU, 1, cpu_attn_fwd_supports, cpu_attn_fwd_workspace,
     cpu_attn_fwd},
    {"ref", ATTN_OP_FWD, FLASHC_DEVICE_CPU, 1, ref_attn_fwd_supports, ref_attn_fwd_workspace,
     ref_attn_fwd},
    {"unfused", ATTN_OP_FWD, FLASHC_DEVICE_CPU, 1, cpu_attn_fwd_unfused_supports,
     cpu_attn_fwd_unfused_workspace, cpu_attn_fwd_unfused},
    {"cpu", ATTN_OP_BWD, FLASHC_DEVICE_CPU, 1, cpu_attn_bwd_supports, cpu_attn_bwd_workspace,
     cpu_attn_bwd},
    {"ref", ATTN_OP_BWD, FLASHC_DEVICE_CPU, 1, ref_attn_bwd_supports, ref_attn_bwd_workspace,
     ref_attn_bwd},
#ifdef FLASHC_HAVE_CUDA
    {"cuda", ATTN_OP_FWD, FLASHC_DEVICE_CUDA, 0, cuda_attn_fwd_supports, cuda_attn_fwd_workspace,
     cuda_attn_fwd},
    {"cuda", ATTN_OP_BWD, FLASHC_DEVICE_CUDA, 0, cuda_attn_bwd_supports, cuda_attn_bwd_workspace,
     cuda_attn_bwd},
#endif
};

const attn_impl *attn_impl_find(attn_op op, flashc_device device, const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].op == op && table[i].device == device &&
            (!name || strcmp(name, table[i].name) == 0))
            return &table[i];
    return NULL;
}

static _Thread_local const char *forced;

void attn_force_backend(const char *name) { forced = name; }
const char *attn_forced_backend(void) { return forced; }

/* ---- scratch ------------------------------------------------------------------------------ */

enum { SCRATCH_ALIGN = 64 };

static size_t round_up(size_t n) { return (n + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN; }

size_t attn_scratch_bytes(size_t n, const size_t *sizes)
{
    size_t total = SCRATCH_ALIGN; /* slack to align a caller's workspace of any alignment */
    for (size_t i = 0; i < n; i++)
        total += round_up(sizes[i]);
    return total;
}

void attn_scratch_init(attn_scratch *s, const attn_problem *p)
{
    s->base = NULL, s->size = 0, s->used = 0;
    if (p->workspace && p->workspace_bytes > SCRATCH_ALIGN) {
        const uintptr_t a = ((uintptr_t)p->workspace + SCRATCH_ALIGN - 1) & ~(uintptr_t)(SCRATCH_ALIGN - 1);
        s->base = (char *)a;
        s->size = p->workspace_bytes - (size_t)(a - (uintptr_t)p->workspace);
    }
}

void *attn_scratch_take(attn_scratch *s, size_t bytes)
{
    if (!s->base)
        return flashc__malloc(bytes);
    const size_t need = round_up(bytes);
    if (need > s->size - s->used)
        return NULL;
    void *ptr = s->base + s->used;
    s->used += need;
    return ptr;
}

void attn_scratch_free(attn_scratch *s, void *ptr)
{
    if (!s->base)
        flashc__free(ptr);
    /* pieces of a caller's workspace are released with it */
}

/* ---- tile accounting ---------------------------------------------------------------------- */

int64_t attn_tile_pairs_per_head(const attn_problem *p, int64_t br, int64_t bc)
{
    int64_t pairs = 0;
    for (int64_t i0 = 0; i0 < p->Sq; i0 += br) {
        int64_t i1 = i0 + br < p->Sq ? i0 + br : p->Sq;
        int64_t kend = attn_key_end(p, i1 - 1); /* the last row of the block sees the most */
        if (kend > 0)
            pairs += (kend + bc - 1) / bc;
    }
    return pairs;
}

int64_t attn_tile_pairs(const attn_problem *p, int64_t br, int64_t bc, int64_t *total)
{
    int64_t pairs = 0, dense = 0;
    for (int64_t b = 0; b < p->B; b++) {
        int64_t sq, sk;
        attn_seqlens(p, b, &sq, &sk);
        dense += ((sq + br - 1) / br) * ((sk + bc - 1) / bc);
        for (int64_t i0 = 0; i0 < sq; i0 += br) {
            const int64_t i1 = i0 + br < sq ? i0 + br : sq;
            int64_t lo0, hi0, lo1, hi1; /* ranges move monotonically with i: the ends bound them */
            attn_key_range(p, sq, sk, i0, &lo0, &hi0);
            attn_key_range(p, sq, sk, i1 - 1, &lo1, &hi1);
            const int64_t lo = lo0 < lo1 ? lo0 : lo1, hi = hi0 > hi1 ? hi0 : hi1;
            if (hi > lo)
                pairs += (hi + bc - 1) / bc - lo / bc;
        }
    }
    if (total)
        *total = dense * p->Hq;
    return pairs * p->Hq;
}
