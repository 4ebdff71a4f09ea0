/* schedule.c — which chunk pairs a rank computes at each ring step (cp.h). Pure: no state, no
 * allocation, no I/O, so the tests enumerate it for every (N, rank, step) and check that each
 * visible (query, key) token pair of the whole sequence is computed exactly once. */
#include "cp.h"

/* Token t of chunk c (of `parts` equal-as-possible chunks) starts at floor(c S / parts):
 * 64-bit, S <= 2^38 and parts <= 2048, so the product fits. */
static int64_t chunk_start(int64_t S, int64_t parts, int64_t c) { return c * S / parts; }

int64_t cp_local_len(const cp_layout *l, int rank)
{
    const int64_t S = l->seqlen, N = l->nranks;
    switch (l->shard) {
    case FLASHC_CP_SHARD_CONTIGUOUS: return chunk_start(S, N, rank + 1) - chunk_start(S, N, rank);
    case FLASHC_CP_SHARD_ZIGZAG: {
        const int64_t a = rank, b = 2 * N - 1 - rank;
        return chunk_start(S, 2 * N, a + 1) - chunk_start(S, 2 * N, a) +
               chunk_start(S, 2 * N, b + 1) - chunk_start(S, 2 * N, b);
    }
    case FLASHC_CP_SHARD_STRIPED: return S > rank ? (S - rank + N - 1) / N : 0;
    default: return -1;
    }
}

int cp_pieces(const cp_layout *l, int rank, cp_piece out[2])
{
    const int64_t S = l->seqlen, N = l->nranks;
    cp_piece p[2];
    int n = 0;
    switch (l->shard) {
    case FLASHC_CP_SHARD_CONTIGUOUS:
        p[n++] = (cp_piece){0, chunk_start(S, N, rank),
                            chunk_start(S, N, rank + 1) - chunk_start(S, N, rank), 1};
        break;
    case FLASHC_CP_SHARD_ZIGZAG: {
        const int64_t a = rank, b = 2 * N - 1 - rank;
        const int64_t la = chunk_start(S, 2 * N, a + 1) - chunk_start(S, 2 * N, a);
        p[n++] = (cp_piece){0, chunk_start(S, 2 * N, a), la, 1};
        p[n++] = (cp_piece){la, chunk_start(S, 2 * N, b),
                            chunk_start(S, 2 * N, b + 1) - chunk_start(S, 2 * N, b), 1};
        break;
    }
    case FLASHC_CP_SHARD_STRIPED:
        p[n++] = (cp_piece){0, rank, cp_local_len(l, rank), N};
        break;
    default: return 0;
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        if (p[i].len > 0)
            out[m++] = p[i];
    return m;
}

int cp_source(const cp_layout *l, int rank, int step)
{
    return (int)(((int64_t)rank - step + l->nranks) % l->nranks);
}

/* Two full-mask items that share their q rows and have adjacent k rows (or the reverse) are
 * one call: the zigzag steps off the diagonal become a single call of twice the rows. */
static int try_coalesce(cp_item *a, const cp_item *b)
{
    if (a->causal || b->causal)
        return 0;
    if (a->q0 == b->q0 && a->nq == b->nq) {
        if (a->k0 + a->nk == b->k0) return a->nk += b->nk, 1;
        if (b->k0 + b->nk == a->k0) return a->k0 = b->k0, a->nk += b->nk, 1;
    }
    if (a->k0 == b->k0 && a->nk == b->nk) {
        if (a->q0 + a->nq == b->q0) return a->nq += b->nq, 1;
        if (b->q0 + b->nq == a->q0) return a->q0 = b->q0, a->nq += b->nq, 1;
    }
    return 0;
}

/* One (query piece, key piece) pair of contiguous runs: every key before every query (full),
 * every key after every query (skipped), or the same run (the causal diagonal). Any other
 * overlap would need an offset mask; the shards cut both sides at the same chunk boundaries,
 * so it does not occur (returns -1). */
static int classify_runs(const cp_piece *qp, const cp_piece *kp, int causal, cp_item *it)
{
    *it = (cp_item){qp->local0, qp->len, kp->local0, kp->len, 0};
    if (!causal || kp->global0 + kp->len - 1 <= qp->global0)
        return 1;
    if (kp->global0 > qp->global0 + qp->len - 1)
        return 0;
    if (kp->global0 == qp->global0 && kp->len == qp->len)
        return it->causal = 1, 1;
    return -1;
}

int cp_schedule(const cp_layout *l, int causal, int rank, int step, cp_item items[CP_MAX_ITEMS])
{
    const int src = cp_source(l, rank, step);
    cp_piece qp[2], kp[2];
    const int nq = cp_pieces(l, rank, qp), nk = cp_pieces(l, src, kp);
    int n = 0;
    if (nq == 0 || nk == 0)
        return 0;
    if (l->shard == FLASHC_CP_SHARD_STRIPED) {
        /* Query row i is token i N + rank, key row j token j N + src: j N + src <= i N + rank
         * iff j <= i (src <= rank) or j <= i - 1 (src > rank). With Sq = nq, flashc's
         * bottom-right mask j <= i + nk - nq gives that with nk = nq or nq - 1 keys; the keys
         * cut off are invisible to every row (src holds at least that many, as its count is
         * nq or nq +- 1 in the right direction). */
        const int64_t lq = qp[0].len, lk = kp[0].len;
        if (!causal) {
            items[n++] = (cp_item){0, lq, 0, lk, 0};
        } else {
            const int64_t keys = src <= rank ? lq : lq - 1;
            if (keys > 0)
                items[n++] = (cp_item){0, lq, 0, keys, 1};
        }
        return n;
    }
    if (causal && src == rank) {
        /* The diagonal step: local rows are in global order (zigzag's two chunks too), so the
         * global causal mask over the rank's own tokens is the plain causal mask of its local
         * rows: one call, where chunk pairs would be three (and round dV of the first chunk
         * twice). */
        items[n++] = (cp_item){0, cp_local_len(l, rank), 0, cp_local_len(l, rank), 1};
        return n;
    }
    for (int a = 0; a < nq; a++)
        for (int b = 0; b < nk; b++) {
            cp_item it;
            const int c = classify_runs(&qp[a], &kp[b], causal, &it);
            if (c < 0)
                return -1;
            if (c == 0)
                continue;
            int merged = 0;
            for (int i = 0; i < n && !merged; i++)
                merged = try_coalesce(&items[i], &it);
            if (!merged)
                items[n++] = it;
        }
    /* merging can make two earlier items adjacent (without causal the four pairs of zigzag
     * become one call): repeat until nothing merges */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < n && !changed; i++)
            for (int j = i + 1; j < n && !changed; j++)
                if (try_coalesce(&items[i], &items[j])) {
                    items[j] = items[--n];
                    changed = 1;
                }
    }
    return n;
}
