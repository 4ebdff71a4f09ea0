/*
 * fuzz_attn_kvcache.c — flashc_attn_kvcache_fwd and its workspace-size query. One input = one
 * decode / chunked-prefill step: B sequences with ragged cache_seqlens against a contiguous
 * cache (cache_batch_idx now and then) or a paged one (page sizes 1..16, a shuffled block
 * table), k_new / v_new appended in place now and then, cache_leftpad on a contiguous cache
 * now and then, the v2 modifiers (fz_attn_mods,
 * num_splits among them), and the index tensors decoded like any tensor and sometimes
 * corrupted (an entry past the pages or the cache rows, a length past the capacity, -1).
 *
 * The oracle, besides fuzz_common.h's: the size query writes nothing and refuses exactly what
 * the call refuses; after an accepted call the caches equal their snapshot with k_new / v_new
 * written at cache_seqlens[b].. through the block table or batch index (every byte of the
 * buffers, not only the view), and o / lse equal the dense naive reference of each sequence
 * on its keys (from cache position cache_leftpad[b]) gathered into a contiguous (1, Sk_b, Hkv,
 * D) copy.
 */
#include "fuzz_common.h"

enum { MAXB = 3, MAXP = 64 };

/* Element offset of cache position j (head h, feature d) of sequence b in a cache view (its key
 * j - cache_leftpad[b]). */
static int64_t key_off(const flashc_tensor *c, const fz_tensor *bt, const fz_tensor *cbi,
                       int64_t b, int64_t j, int64_t h, int64_t d)
{
    int64_t row, pos;
    if (bt->present && bt->t.data) {
        const int64_t ps = c->shape[1];
        row = fz_i32(bt, b * bt->t.shape[1] + j / ps), pos = j % ps;
    } else {
        row = cbi->present && cbi->t.data ? fz_i32(cbi, b) : b, pos = j;
    }
    return row * c->stride[0] + pos * c->stride[1] + h * c->stride[2] + d * c->stride[3];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const flashc_dtype dt = fz_dtype(&f);
    const int64_t B = fz_range(&f, 1, MAXB), Sq = fz_range(&f, 1, fz_one_in(&f, 8) ? 20 : 4);
    const int64_t Hkv = fz_range(&f, 1, 2), Hq = Hkv * fz_range(&f, 1, 3);
    static const int64_t dims[8] = {1, 2, 3, 4, 8, 16, 5, 24};
    const int64_t D = dims[fz_u8(&f) % 8], Dv = fz_one_in(&f, 4) ? dims[fz_u8(&f) % 8] : D;
    const int paged = fz_u8(&f) & 1, use_cbi = !paged && fz_one_in(&f, 3);
    static const int64_t pss[8] = {1, 2, 3, 4, 8, 16, 5, 7};
    const int64_t ps = pss[fz_u8(&f) % 8];
    const int64_t s_new = fz_one_in(&f, 3) ? fz_range(&f, 1, 4) : 0;
    int32_t lens[MAXB];
    int64_t maxl = 0;
    for (int64_t b = 0; b < B; b++) {
        lens[b] = (int32_t)fz_range(&f, 0, fz_one_in(&f, 8) ? 40 : 12);
        maxl = lens[b] + s_new > maxl ? lens[b] + s_new : maxl;
    }
    if (maxl == 0)
        maxl = 1;
    /* the cache: contiguous (B_cache, S_cache) or num_pages pages of ps keys */
    const int64_t max_pages = (maxl + ps - 1) / ps + fz_range(&f, 0, 1);
    const int64_t num_pages = paged ? B * max_pages + fz_range(&f, 0, 2) : 0;
    const int64_t s_cache = maxl + fz_range(&f, 0, 2), b_cache = B + (use_cbi ? fz_range(&f, 0, 2) : 0);
    int32_t table[MAXB * MAXP], cbi[MAXB + 2], perm[MAXB * MAXP + 2];
    const int64_t npool = paged ? num_pages : b_cache;
    fz_shuffled_iota(&f, perm, npool); /* shuffled pages / cache rows */
    for (int64_t i = 0; i < B * max_pages && paged; i++)
        table[i] = perm[i];
    for (int64_t b = 0; b < B && use_cbi; b++)
        cbi[b] = perm[b];
    if (fz_one_in(&f, 10)) { /* an index the library must refuse (or never read) */
        const int32_t bad = fz_one_in(&f, 2) ? -1 : (int32_t)(paged ? num_pages : b_cache);
        if (paged)
            table[fz_range(&f, 0, B * max_pages - 1)] = bad;
        else if (use_cbi)
            cbi[fz_range(&f, 0, B - 1)] = bad;
    }
    if (fz_one_in(&f, 10))
        lens[fz_range(&f, 0, B - 1)] = fz_one_in(&f, 2) ? -1 : (int32_t)(maxl + ps + 3);
    /* cache_leftpad (contiguous caches; on a paged one it must be refused): in [0, lens[b]],
     * now and then one past the longest or -1 */
    const int use_lp = fz_one_in(&f, paged ? 16 : 4);
    int32_t lpad[MAXB];
    for (int64_t b = 0; b < B; b++)
        lpad[b] = use_lp ? (int32_t)fz_range(&f, 0, lens[b] > 0 ? lens[b] : 0) : 0;
    if (use_lp && fz_one_in(&f, 10))
        lpad[fz_range(&f, 0, B - 1)] = fz_one_in(&f, 2) ? -1 : (int32_t)(maxl + 1);

    flashc_attn_params pr;
    fz_tensor alibi;
    const double bias = fz_attn_params(&f, &pr, B, Hq, maxl > Sq ? maxl : Sq, &alibi);

    fz_tensor q, o, lse, kc, vc, kn, vn, seql, bt, cb, lpt;
    const int64_t shq[4] = {B, Sq, Hq, D}, sho[4] = {B, Sq, Hq, Dv}, shl[3] = {B, Hq, Sq};
    const int64_t shkc[4] = {paged ? num_pages : b_cache, paged ? ps : s_cache, Hkv, D};
    const int64_t shvc[4] = {shkc[0], shkc[1], Hkv, Dv};
    const int64_t shkn[4] = {B, s_new, Hkv, D}, shvn[4] = {B, s_new, Hkv, Dv};
    const int64_t shs[1] = {B}, shb[2] = {B, max_pages};
    fz_decode(&f, &q, 4, shq, dt, 0);
    fz_decode(&f, &kc, 4, shkc, dt, 0); /* values; written (an output) when appending */
    fz_decode(&f, &vc, 4, shvc, dt, 0);
    kc.output = vc.output = s_new > 0;
    memset(&kn, 0, sizeof kn), memset(&vn, 0, sizeof vn);
    if (s_new) {
        fz_decode(&f, &kn, 4, shkn, dt, 0);
        fz_decode(&f, &vn, 4, shvn, dt, 0);
    }
    fz_decode(&f, &o, 4, sho, dt, 1);
    fz_decode(&f, &lse, 3, shl, FLASHC_F32, 1);
    const int use_lse = !fz_one_in(&f, 4);
    lse.output = use_lse;
    const int has_lse = use_lse && lse.present;
    fz_index(&f, &seql, 1, shs, lens, B);
    if (!paged && !s_new && fz_one_in(&f, 8))
        seql.present = 0; /* every sequence holds S_cache keys */
    memset(&bt, 0, sizeof bt), memset(&cb, 0, sizeof cb);
    if (paged)
        fz_index(&f, &bt, 2, shb, table, B * max_pages);
    if (use_cbi)
        fz_index(&f, &cb, 1, shs, cbi, B);
    memset(&lpt, 0, sizeof lpt);
    if (use_lp)
        fz_index(&f, &lpt, 1, shs, lpad, B);
    if (fz_one_in(&f, 24))
        fz_alias(&f, &o, fz_one_in(&f, 2) ? &q : &kc);

    flashc_kv_cache cache = {sizeof cache, fz_out(&kc), fz_out(&vc), fz_arg(&seql), fz_arg(&bt),
                             fz_arg(&cb), s_new ? fz_arg(&kn) : NULL, s_new ? fz_arg(&vn) : NULL,
                             use_lp ? fz_arg(&lpt) : NULL};
    if (fz_one_in(&f, 32))
        cache.struct_size = (size_t)fz_range(&f, 0, (int64_t)sizeof cache - 1);
    fz_set s = {{&q, &kc, &vc, &kn, &vn, &o, &lse, &seql, &bt, &cb, &alibi, &lpt}, 12};
    fz_snapshot(&s);
    fz_current = &s;
    flashc_tensor *lp = use_lse ? fz_out(&lse) : NULL;

    size_t ws = 0;
    const flashc_status sw =
        flashc_attn_kvcache_fwd_workspace_size(&pr, &cache, fz_arg(&q), fz_arg(&o), lp, &ws);
    fz_check_untouched("flashc_attn_kvcache_fwd_workspace_size", &s, sw);
    const flashc_status got = flashc_attn_kvcache_fwd(&pr, &cache, fz_arg(&q), fz_out(&o), lp, NULL);
    fz_check("flashc_attn_kvcache_fwd", &s, got);
    if (sw != got && !(sw == FLASHC_OK && got == FLASHC_ERR_OUT_OF_MEMORY)) {
        char m[200];
        snprintf(m, sizeof m, "workspace_size() said %s, the call returned %s",
                 flashc_status_string(sw), flashc_status_string(got));
        fz_die("the size query disagrees with the call", m);
    }
    const int aliased = !o.owns || !lse.owns;
    if (got != FLASHC_OK || aliased || !fz_finite(&q) || !fz_finite(&kc) || !fz_finite(&vc) ||
        (s_new && (!fz_finite(&kn) || !fz_finite(&vn))) || !fz_mods_finite(&alibi)) {
        fz_current = NULL;
        fz_free(&s);
        return 0;
    }
    /* A decoded shape can be mutated off by one (fz_decode), and two mutations can agree (v's
     * and o's last dim both Dv - 1): the call is then right to accept a problem the drawn
     * dims do not describe. Likewise the dtype: mutations that give every tensor the same other
     * dtype make a consistent problem (CI of 2026-12-04 evening: q, caches, o all float16 where
     * float32 was drawn, and the reference's gathered keys, built in the drawn dtype, refused).
     * The oracle below works in the drawn dims and dtype, so it checks only calls whose tensors
     * carry them; the mutated problem is drawn directly as often. */
    int drawn = fz_same_shape(&q, shq, 4) && fz_same_shape(&o, sho, 4) &&
                kc.t.shape[2] == Hkv && kc.t.shape[3] == D && vc.t.shape[2] == Hkv &&
                vc.t.shape[3] == Dv && q.t.dtype == dt && kc.t.dtype == dt &&
                vc.t.dtype == dt && o.t.dtype == dt;
    if (s_new)
        drawn = drawn && fz_same_shape(&kn, shkn, 4) && fz_same_shape(&vn, shvn, 4) &&
                kn.t.dtype == dt && vn.t.dtype == dt;
    if (!drawn) {
        fz_current = NULL;
        fz_free(&s);
        return 0;
    }
    /* the caches the call should have left: the snapshots with k_new / v_new appended */
    const int64_t added = s_new && kn.present && vn.present ? s_new : 0;
    const size_t es = flashc_dtype_size(dt);
    fz_tensor kc2, vc2, o2, lse2;
    fz_make_twin(&kc, &kc2), fz_make_twin(&vc, &vc2);
    fz_tensor *cs[2] = {&kc2, &vc2}, *nw[2] = {&kn, &vn};
    const int64_t dd[2] = {D, Dv};
    for (int t = 0; t < 2 && added; t++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t j = 0; j < s_new; j++)
                for (int64_t h = 0; h < Hkv; h++)
                    for (int64_t d = 0; d < dd[t]; d++) {
                        const int64_t at = key_off(&cs[t]->t, &bt, &cb, b, fz_i32(&seql, b) + j, h, d);
                        const flashc_tensor *n = &nw[t]->t;
                        memcpy((char *)cs[t]->t.data + at * (int64_t)es,
                               (const char *)n->data + (b * n->stride[0] + j * n->stride[1] +
                                                        h * n->stride[2] + d * n->stride[3]) *
                                                           (int64_t)es,
                               es);
                    }
    for (int t = 0; t < 2; t++)
        if (memcmp(cs[t]->base, t ? vc.base : kc.base, cs[t]->bytes) != 0)
            fz_die("the cache after the append is not the snapshot plus k_new / v_new",
                   t ? "v_cache" : "k_cache");

    /* o, lse: the dense naive of each sequence on its gathered keys */
    fz_make_twin(&o, &o2), fz_make_twin(&lse, &lse2);
    for (int64_t b = 0; b < B; b++) {
        /* keys: cache positions [lp0, cache_seqlens + S_new) (no cache_seqlens: all) */
        const int64_t lp0 = use_lp && cache.struct_size == sizeof cache && lpt.present && lpt.t.data
                                ? fz_i32(&lpt, b) /* a struct_size before the field: unread */
                                : 0;
        const int64_t L = seql.present ? fz_i32(&seql, b) + added - lp0 : kc.t.shape[1];
        flashc_tensor qb = q.t, ob = o2.t, lb = lse2.t;
        qb.data = (char *)q.t.data + b * q.t.stride[0] * (int64_t)es;
        ob.data = (char *)o2.t.data + b * o2.t.stride[0] * (int64_t)es;
        if (has_lse)
            lb.data = (char *)lse2.t.data + b * lse2.t.stride[0] * 4;
        qb.shape[0] = ob.shape[0] = lb.shape[0] = 1;
        if (L == 0) { /* no key: o = 0, lse = -inf */
            for (int64_t e = 0; e < Sq * Hq * Dv; e++)
                flashc__store(ob.data, dt, fz_offset_of(&ob, e), 0.0f);
            for (int64_t e = 0; has_lse && e < Hq * Sq; e++)
                flashc__store(lb.data, FLASHC_F32, fz_offset_of(&lb, e), -INFINITY);
            continue;
        }
        char *kb = malloc((size_t)(L * Hkv * D) * es), *vb = malloc((size_t)(L * Hkv * Dv) * es);
        for (int64_t j = 0; j < L; j++)
            for (int64_t h = 0; h < Hkv; h++) {
                for (int64_t d = 0; d < D; d++)
                    memcpy(kb + ((j * Hkv + h) * D + d) * (int64_t)es,
                           (char *)kc2.t.data + key_off(&kc2.t, &bt, &cb, b, lp0 + j, h, d) * (int64_t)es, es);
                for (int64_t d = 0; d < Dv; d++)
                    memcpy(vb + ((j * Hkv + h) * Dv + d) * (int64_t)es,
                           (char *)vc2.t.data + key_off(&vc2.t, &bt, &cb, b, lp0 + j, h, d) * (int64_t)es, es);
            }
        const flashc_tensor tk = flashc_tensor_4d(kb, dt, 1, L, Hkv, D);
        const flashc_tensor tv = flashc_tensor_4d(vb, dt, 1, L, Hkv, Dv);
        flashc_tensor al = alibi.present && alibi.t.data ? fz_alibi_row(&alibi.t, b) : alibi.t;
        flashc_attn_params pb = pr;
        pb.alibi_slopes = pr.alibi_slopes ? &al : NULL;
        const flashc_status gn = flashc_attn_fwd_naive(&pb, &qb, &tk, &tv, &ob, has_lse ? &lb : NULL, NULL);
        free(kb), free(vb);
        if (gn != FLASHC_OK) {
            char m[300];
            snprintf(m, sizeof m, "sequence %lld (Sk %lld): %s", (long long)b, (long long)L,
                     flashc_last_error());
            fz_die("the dense reference refused a sequence of an accepted kvcache call", m);
        }
    }
    const double scale = fz_used_scale(&pr, 1, 1, D);
    const double qm = fz_maxabs(&q), km = fmax(fz_maxabs(&kc), s_new ? fz_maxabs(&kn) : 0.0);
    const double vm = fmax(fz_maxabs(&vc), s_new ? fz_maxabs(&vn) : 0.0);
    const double smax = scale * (double)D * qm * km + bias;
    if (smax < 1e6 && vm < 1e30 && (double)D * qm * km < 1e30) {
        const double cond = 32.0 * smax * 0x1p-24;
        fz_compare("o", &o, o2.t.data, vm * (2 * fz_eps_set(&s, dt) + cond) + 1e-6);
        if (has_lse)
            fz_compare("lse", &lse, lse2.t.data, 1e-5 * (1.0 + smax) + cond);
    }
    fz_current = NULL;
    free(kc2.base), free(kc2.snap), free(vc2.base), free(vc2.snap);
    free(o2.base), free(o2.snap), free(lse2.base), free(lse2.snap);
    fz_free(&s);
    return 0;
}
