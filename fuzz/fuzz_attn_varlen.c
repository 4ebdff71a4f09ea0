/*
 * fuzz_attn_varlen.c — flashc_attn_varlen_fwd / _bwd and their workspace-size queries.
 * One input = one ragged batch: B sequences of lengths 0..40 (zero-length ones included),
 * cu_seqlens_q / cu_seqlens_k as int32 index tensors (decoded like any tensor, and now and
 * then corrupted: a nonzero first entry, a decreasing pair, a last entry past the rows, a
 * negative one), max_seqlen_q/k (sometimes too small), spare rows that belong to no sequence,
 * the v2 modifiers (fz_attn_mods), and the packed q, k, v, o, lse (forward) or q, k, v, o,
 * dout, lse, dq, dk, dv (backward) descriptors. One forward in three is paged (block_table:
 * k, v (num_pages, page_size, Hkv, D), shuffled pages, now and then an entry outside them;
 * the backward must refuse a paged one).
 *
 * The oracle, besides fuzz_common.h's: the size query writes nothing and refuses exactly what
 * the call refuses; and an accepted call equals, sequence by sequence, the dense naive
 * reference on (1, Sq_b, ...) views of the packed rows (an independent decomposition: the
 * varlen index arithmetic is not shared), with the rows of no sequence zero (lse -inf).
 */
#include "fuzz_common.h"

enum { MAXB = 3, MAXP = 48 };

/* cu_seqlens from lengths, then corrupted one time in ten. */
static void fz_cu(fz *f, int64_t B, const int64_t *len, int64_t total, int32_t *cu)
{
    cu[0] = 0;
    for (int64_t b = 0; b < B; b++)
        cu[b + 1] = cu[b] + (int32_t)len[b];
    if (!fz_one_in(f, 10))
        return;
    switch (fz_u8(f) % 4) {
    case 0: cu[0] = 1; break;
    case 1: cu[fz_range(f, 1, B)] = (int32_t)total + 1; break;
    case 2: cu[fz_range(f, 0, B)] = -1; break;
    default:
        if (B > 1) { /* a decreasing pair */
            const int64_t i = fz_range(f, 1, B - 1);
            cu[i] = cu[i + 1] + 1;
        }
        break;
    }
}

/* Element offsets of row r of a packed (rows, H, D) or (H, rows) view: writes value to every
 * element of that row in buffer base (laid out as view t). */
static void fill_row(const flashc_tensor *t, void *base, int row_dim, int64_t r, float value)
{
    const size_t es = flashc_dtype_size(t->dtype);
    const int64_t n1 = t->shape[row_dim == 0 ? 1 : 0], n2 = t->ndim == 3 ? t->shape[2] : 1;
    for (int64_t a = 0; a < n1; a++)
        for (int64_t c = 0; c < n2; c++) {
            const int64_t off = row_dim == 0 ? r * t->stride[0] + a * t->stride[1] + c * t->stride[2]
                                             : a * t->stride[0] + r * t->stride[1];
            float one[1];
            flashc__store(one, t->dtype, 0, value);
            memcpy((char *)base + off * (int64_t)es, one, es);
        }
}

/* Keys [0, n) of sequence b of a paged cache c (num_pages, page_size, H, D), as the call read
 * them through the block table bt, gathered into a new contiguous (n, H, D) buffer. */
static char *gather(const flashc_tensor *c, const fz_tensor *bt, int64_t b, int64_t n)
{
    const size_t es = flashc_dtype_size(c->dtype);
    const int64_t H = c->shape[2], D = c->shape[3], ps = c->shape[1];
    char *g = malloc((size_t)(n * H * D) * es + 1);
    for (int64_t j = 0; j < n; j++) {
        const int64_t pg = fz_i32(bt, b * bt->t.shape[1] + j / ps);
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < D; d++)
                memcpy(g + ((j * H + h) * D + d) * (int64_t)es,
                       (const char *)c->data + (pg * c->stride[0] + (j % ps) * c->stride[1] +
                                                h * c->stride[2] + d * c->stride[3]) *
                                                   (int64_t)es,
                       es);
    }
    return g;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz f = {data, size};
    const int bwd = fz_u8(&f) & 1;
    const flashc_dtype dt = !bwd || fz_one_in(&f, 8) ? fz_dtype(&f) : FLASHC_F32;
    const int64_t B = fz_range(&f, 1, MAXB);
    const int64_t Hkv = fz_range(&f, 1, 2), Hq = Hkv * fz_range(&f, 1, 3);
    static const int64_t dims[8] = {1, 2, 3, 4, 8, 16, 5, 24};
    const int64_t D = dims[fz_u8(&f) % 8], Dv = fz_one_in(&f, 4) ? dims[fz_u8(&f) % 8] : D;
    int64_t lq[MAXB], lk[MAXB], mq = 0, mk = 0, sq = 0, sk = 0;
    for (int64_t b = 0; b < B; b++) {
        lq[b] = fz_range(&f, 0, fz_one_in(&f, 8) ? 40 : 10);
        lk[b] = fz_range(&f, 0, fz_one_in(&f, 8) ? 40 : 10);
        mq = lq[b] > mq ? lq[b] : mq, mk = lk[b] > mk ? lk[b] : mk;
        sq += lq[b], sk += lk[b];
    }
    const int64_t tq = sq + fz_range(&f, sq ? 0 : 1, 2), tk = sk + fz_range(&f, sk ? 0 : 1, 2);
    int32_t cq[MAXB + 1], ck[MAXB + 1];
    fz_cu(&f, B, lq, tq, cq);
    fz_cu(&f, B, lk, tk, ck);
    /* paged: pages of ps keys, max_pages a sequence (one spare now and then), shuffled */
    const int paged = fz_one_in(&f, bwd ? 16 : 3);
    static const int64_t pss[8] = {1, 2, 3, 4, 8, 16, 5, 7};
    const int64_t ps = pss[fz_u8(&f) % 8];
    const int64_t max_pages = (mk + ps - 1) / ps + fz_range(&f, mk ? 0 : 1, 1);
    const int64_t num_pages = B * max_pages + fz_range(&f, 0, 2);
    int32_t table[MAXB * MAXP], perm[MAXB * MAXP + 2];
    if (paged)
        fz_shuffled_iota(&f, perm, num_pages);
    for (int64_t i = 0; i < B * max_pages && paged; i++)
        table[i] = perm[i];
    if (paged && fz_one_in(&f, 10)) /* an entry the library must refuse (or never read) */
        table[fz_range(&f, 0, B * max_pages - 1)] = fz_one_in(&f, 2) ? -1 : (int32_t)num_pages;

    flashc_attn_params pr;
    fz_tensor alibi;
    const double bias = fz_attn_params(&f, &pr, B, Hq, mq > mk ? mq : mk, &alibi);

    fz_tensor cuq, cuk;
    const int64_t shc[1] = {B + 1};
    fz_index(&f, &cuq, 1, shc, cq, B + 1);
    fz_index(&f, &cuk, 1, shc, ck, B + 1);
    fz_tensor bt;
    memset(&bt, 0, sizeof bt);
    const int64_t shb[2] = {B, max_pages};
    if (paged)
        fz_index(&f, &bt, 2, shb, table, B * max_pages);
    flashc_varlen vl = {sizeof vl, fz_arg(&cuq), fz_arg(&cuk), mq, mk, fz_arg(&bt)};
    if (fz_one_in(&f, 10))
        vl.max_seqlen_q = fz_one_in(&f, 2) ? mq - 1 : FZ_HUGE[fz_range(&f, 0, 2)];
    if (fz_one_in(&f, 10))
        vl.max_seqlen_k = fz_one_in(&f, 2) ? mk - 1 : -1;
    if (fz_one_in(&f, 32))
        vl.struct_size = (size_t)fz_range(&f, 0, (int64_t)sizeof vl - 1);
    const flashc_varlen *vp = fz_one_in(&f, 32) ? NULL : &vl;

    const int64_t shq[3] = {tq, Hq, D}, sho[3] = {tq, Hq, Dv}, shl[2] = {Hq, tq};
    const int64_t shk[4] = {num_pages, ps, Hkv, D}, shv[4] = {num_pages, ps, Hkv, Dv};
    const int64_t pk[3] = {tk, Hkv, D}, pv[3] = {tk, Hkv, Dv}; /* packed */
    fz_tensor q, k, v, o, lse, dout, dq, dk, dv;
    flashc_status fw = FLASHC_OK;
    fz_decode(&f, &q, 3, shq, dt, 0);
    fz_decode(&f, &k, 3 + paged, paged ? shk : pk, dt, 0);
    fz_decode(&f, &v, 3 + paged, paged ? shv : pv, dt, 0);
    fz_decode(&f, &o, 3, sho, dt, !bwd);
    fz_decode(&f, &lse, 2, shl, FLASHC_F32, !bwd);
    const int use_lse = bwd || !fz_one_in(&f, 4);
    lse.output = lse.output && use_lse;
    const int has_lse = use_lse && lse.present; /* the forward writes an lse */
    if (bwd) {
        fz_decode(&f, &dout, 3, sho, dt, 0);
        fz_decode(&f, &dq, 3, shq, dt, 1);
        fz_decode(&f, &dk, 3, pk, dt, 1);
        fz_decode(&f, &dv, 3, pv, dt, 1);
        if (fz_one_in(&f, 24))
            fz_alias(&f, &dk, fz_one_in(&f, 2) ? &k : &dq);
        /* a consistent forward state where the layouts allow (o, lse are the backward's
         * inputs; the forward's own oracle is the other half of this target) */
        fw = flashc_attn_varlen_fwd(&pr, vp, fz_arg(&q), fz_arg(&k), fz_arg(&v), fz_out(&o),
                                     fz_out(&lse), NULL);
    } else {
        memset(&dout, 0, sizeof dout), memset(&dq, 0, sizeof dq);
        memset(&dk, 0, sizeof dk), memset(&dv, 0, sizeof dv);
        if (fz_one_in(&f, 24))
            fz_alias(&f, &o, fz_one_in(&f, 2) ? &q : &v);
    }
    fz_set s = {{&q, &k, &v, &o, &lse, &alibi, &cuq, &cuk, &dout, &dq, &dk, &dv, &bt}, 13};
    fz_snapshot(&s);
    fz_current = &s;
    flashc_tensor *lp = use_lse ? fz_out(&lse) : NULL;

    size_t ws = 0;
    const flashc_status sw =
        bwd ? flashc_attn_varlen_bwd_workspace_size(&pr, vp, fz_arg(&q), fz_arg(&k), fz_arg(&v),
                                                    fz_arg(&o), fz_arg(&dout), fz_arg(&lse),
                                                    fz_arg(&dq), fz_arg(&dk), fz_arg(&dv), &ws)
            : flashc_attn_varlen_fwd_workspace_size(&pr, vp, fz_arg(&q), fz_arg(&k), fz_arg(&v),
                                                    fz_arg(&o), lp, &ws);
    fz_check_untouched("flashc_attn_varlen_*_workspace_size", &s, sw);
    const flashc_status got =
        bwd ? flashc_attn_varlen_bwd(&pr, vp, fz_arg(&q), fz_arg(&k), fz_arg(&v), fz_arg(&o),
                                     fz_arg(&dout), fz_arg(&lse), fz_out(&dq), fz_out(&dk),
                                     fz_out(&dv), NULL)
            : flashc_attn_varlen_fwd(&pr, vp, fz_arg(&q), fz_arg(&k), fz_arg(&v), fz_out(&o), lp,
                                     NULL);
    fz_check(bwd ? "flashc_attn_varlen_bwd" : "flashc_attn_varlen_fwd", &s, got);
    if (sw != got && !(sw == FLASHC_OK && got == FLASHC_ERR_OUT_OF_MEMORY)) {
        char m[200];
        snprintf(m, sizeof m, "workspace_size() said %s, the call returned %s",
                 flashc_status_string(sw), flashc_status_string(got));
        fz_die("the size query disagrees with the call", m);
    }

    const int aliased = !o.owns || !lse.owns || (bwd && (!dq.owns || !dk.owns || !dv.owns));
    if (got == FLASHC_OK && fw == FLASHC_OK && !aliased && fz_finite(&q) && fz_finite(&k) && fz_finite(&v) &&
        fz_mods_finite(&alibi) && (!bwd || (fz_finite(&dout) && fz_finite(&o)))) {
        /* the reference, sequence by sequence, into twins of the outputs */
        fz_tensor *outs[3], tw[3];
        int nout = 0;
        if (bwd)
            outs[0] = &dq, outs[1] = &dk, outs[2] = &dv, nout = 3;
        else
            outs[0] = &o, outs[1] = &lse, nout = has_lse ? 2 : 1;
        for (int i = 0; i < nout; i++)
            fz_make_twin(outs[i], &tw[i]);
        int32_t c_q[MAXB + 1], c_k[MAXB + 1]; /* as the call read them */
        for (int64_t b = 0; b <= B; b++)
            c_q[b] = fz_i32(&cuq, b), c_k[b] = fz_i32(&cuk, b);
        if (getenv("FLASHC_FUZZ_DEBUG")) {
            fprintf(stderr, "B %lld bwd %d causal %d window %lld %lld softcap %g scale %g/%d\n  cu_q",
                    (long long)B, bwd, pr.causal, (long long)pr.window_left,
                    (long long)pr.window_right, pr.softcap, pr.softmax_scale, pr.has_softmax_scale);
            for (int64_t b = 0; b <= B; b++)
                fprintf(stderr, " %d", c_q[b]);
            fprintf(stderr, "  cu_k");
            for (int64_t b = 0; b <= B; b++)
                fprintf(stderr, " %d", c_k[b]);
            fprintf(stderr, "\n");
        }
        /* rows of no sequence: zeros (lse -inf), up to the rows the accepted call saw (a
         * decoded shape may be one row more than tq / tk asked, consistently on every tensor
         * of a side: the call then owns that row too) */
        const int64_t rq = tw[0].t.shape[0], rk = bwd ? tw[1].t.shape[0] : 0;
        for (int64_t r = c_q[B]; r < rq; r++) {
            fill_row(&tw[0].t, tw[0].t.data, 0, r, 0.0f);
            if (!bwd && has_lse)
                fill_row(&tw[1].t, tw[1].t.data, 1, r, -INFINITY);
        }
        for (int64_t r = bwd ? c_k[B] : rk; r < rk; r++)
            fill_row(&tw[1].t, tw[1].t.data, 0, r, 0.0f), fill_row(&tw[2].t, tw[2].t.data, 0, r, 0.0f);
        for (int64_t b = 0; b < B; b++) {
            const int64_t q0 = c_q[b], nq = c_q[b + 1] - c_q[b], k0 = c_k[b], nk = c_k[b + 1] - c_k[b];
            flashc_tensor al = alibi.present && alibi.t.data ? fz_alibi_row(&alibi.t, b) : alibi.t;
            flashc_attn_params pb = pr;
            pb.alibi_slopes = pr.alibi_slopes ? &al : NULL;
            if (nk == 0) { /* rows that see no key: o = 0, lse = -inf; dq = 0 */
                for (int64_t r = q0; r < q0 + nq; r++) {
                    fill_row(&tw[0].t, tw[0].t.data, 0, r, 0.0f);
                    if (!bwd && has_lse)
                        fill_row(&tw[1].t, tw[1].t.data, 1, r, -INFINITY);
                }
                continue;
            }
            if (nq == 0) { /* keys no row sees: dk = dv = 0 */
                for (int64_t r = k0; bwd && r < k0 + nk; r++)
                    fill_row(&tw[1].t, tw[1].t.data, 0, r, 0.0f),
                        fill_row(&tw[2].t, tw[2].t.data, 0, r, 0.0f);
                continue;
            }
            const flashc_tensor qb = fz_rows_view(&q.t, 0, q0, nq);
            flashc_tensor kb, vb;
            char *kg = NULL, *vg = NULL; /* paged: sequence b's keys gathered from its pages */
            if (vl.block_table && vl.struct_size == sizeof vl) {
                kg = gather(&k.t, &bt, b, nk), vg = gather(&v.t, &bt, b, nk);
                kb = flashc_tensor_4d(kg, k.t.dtype, 1, nk, k.t.shape[2], k.t.shape[3]);
                vb = flashc_tensor_4d(vg, v.t.dtype, 1, nk, v.t.shape[2], v.t.shape[3]);
            } else {
                kb = fz_rows_view(&k.t, 0, k0, nk), vb = fz_rows_view(&v.t, 0, k0, nk);
            }
            flashc_status gn;
            if (bwd) {
                const flashc_tensor ob = fz_rows_view(&o.t, 0, q0, nq);
                const flashc_tensor gb = fz_rows_view(&dout.t, 0, q0, nq);
                flashc_tensor dqb = fz_rows_view(&tw[0].t, 0, q0, nq);
                flashc_tensor dkb = fz_rows_view(&tw[1].t, 0, k0, nk);
                flashc_tensor dvb = fz_rows_view(&tw[2].t, 0, k0, nk);
                gn = flashc_attn_bwd_naive(&pb, &qb, &kb, &vb, &ob, &gb, NULL, &dqb, &dkb, &dvb, NULL);
            } else {
                flashc_tensor ob = fz_rows_view(&tw[0].t, 0, q0, nq);
                flashc_tensor lb = has_lse ? fz_rows_view(&tw[1].t, 1, q0, nq) : ob;
                gn = flashc_attn_fwd_naive(&pb, &qb, &kb, &vb, &ob, has_lse ? &lb : NULL, NULL);
            }
            free(kg), free(vg);
            if (gn != FLASHC_OK) {
                char m[300];
                snprintf(m, sizeof m, "sequence %lld (Sq %lld, Sk %lld): %s", (long long)b,
                         (long long)nq, (long long)nk, flashc_last_error());
                fz_die("the dense reference refused a sequence of an accepted varlen call", m);
            }
        }
        const double scale = fz_used_scale(&pr, 1, 1, D);
        const double qm = fz_maxabs(&q), km = fz_maxabs(&k), vm = fz_maxabs(&v);
        const double smax = scale * (double)D * qm * km + bias;
        const int64_t n = mq > mk ? mq : mk;
        if (!bwd && smax < 1e6 && vm < 1e30 && (double)D * qm * km < 1e30) {
            const double cond = 32.0 * smax * 0x1p-24;
            fz_compare("o", &o, tw[0].t.data, vm * (2 * fz_eps_set(&s, dt) + cond) + 1e-6);
            if (has_lse)
                fz_compare("lse", &lse, tw[1].t.data, 1e-5 * (1.0 + smax) + cond);
        }
        const double dm = bwd ? fz_maxabs(&dout) : 0.0;
        if (bwd && smax < 1e3 && qm < 1e4 && km < 1e4 && vm < 1e4 && dm < 1e4) {
            const double ds = 2.0 * dm * vm * (double)Dv, cond = 1e-5 + 64.0 * (1.0 + smax) * 0x1p-24;
            const int64_t group = Hq / Hkv;
            /* + one rounding of each result to dt (a tie may round either way) */
            const double r = 2.0 * fz_eps_set(&s, dt);
            fz_compare("dq", &dq, tw[0].t.data,
                       cond * (1.0 + ds * (double)n * km * scale) + r * fz_maxabs(&tw[0]));
            fz_compare("dk", &dk, tw[1].t.data,
                       cond * (1.0 + ds * (double)n * group * qm * scale) + r * fz_maxabs(&tw[1]));
            fz_compare("dv", &dv, tw[2].t.data,
                       cond * (1.0 + dm * (double)n * group) + r * fz_maxabs(&tw[2]));
        }
        for (int i = 0; i < nout; i++)
            free(tw[i].base), free(tw[i].snap);
    }
    fz_current = NULL;
    fz_free(&s);
    return 0;
}
