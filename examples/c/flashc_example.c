/*
 * flashc_example.c — a program that uses an installed libflashc: causal attention on a small
 * GQA problem, then RMSNorm of its output, each checked against a plain loop here, and one
 * call that is meant to fail, to show the error path (a status plus flashc_last_error()).
 *
 *   cmake -S examples/c -B build-example -DCMAKE_PREFIX_PATH=<prefix>   (find_package)
 *   make -C examples/c PKG_CONFIG_PATH=<prefix>/lib/pkgconfig             (pkg-config)
 *
 * Exits 0 when every result matches, 1 otherwise.
 */
#include <flashc.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shapes: q (B, Sq, Hq, D), k and v (B, Sk, Hkv, D); two query heads per KV head (GQA). */
enum { B = 2, SQ = 37, SK = 53, HQ = 4, HKV = 2, D = 32 };

/* Reports a failed call with the library's own words and says whether it failed. */
static int failed(const char *what, flashc_status st)
{
    if (st == FLASHC_OK)
        return 0;
    fprintf(stderr, "%s: %s: %s\n", what, flashc_status_string(st), flashc_last_error());
    return 1;
}

static float *random_floats(size_t n, unsigned *seed)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        p[i] = (float)((*seed >> 8) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
    }
    return p;
}

/* One output row of causal attention in double: query (b, i, h) against keys j <= i + SK - SQ. */
static void attention_row(const float *q, const float *k, const float *v, int b, int i, int h,
                          double *out)
{
    const double scale = 1.0 / sqrt((double)D);
    const int hk = h / (HQ / HKV);
    const float *qr = q + (((size_t)b * SQ + i) * HQ + h) * D;
    double s[SK], m = -INFINITY, l = 0.0;
    int last = i + SK - SQ; /* bottom-right aligned */
    for (int j = 0; j <= last && j < SK; j++) {
        const float *kr = k + (((size_t)b * SK + j) * HKV + hk) * D;
        double dot = 0.0;
        for (int d = 0; d < D; d++)
            dot += (double)qr[d] * kr[d];
        s[j] = dot * scale;
        m = s[j] > m ? s[j] : m;
    }
    memset(out, 0, D * sizeof *out);
    for (int j = 0; j <= last && j < SK; j++) {
        double p = exp(s[j] - m);
        const float *vr = v + (((size_t)b * SK + j) * HKV + hk) * D;
        l += p;
        for (int d = 0; d < D; d++)
            out[d] += p * vr[d];
    }
    for (int d = 0; d < D; d++)
        out[d] = l > 0.0 ? out[d] / l : 0.0;
}

int main(void)
{
    printf("libflashc %s (header %s): %s\n", flashc_version(), FLASHC_VERSION_STRING,
           flashc_build_info());
    if (strcmp(flashc_version(), FLASHC_VERSION_STRING) != 0) {
        fprintf(stderr, "the library is not the version of the header this was compiled with\n");
        return 1;
    }

    unsigned seed = 12345u;
    const size_t nq = (size_t)B * SQ * HQ * D, nkv = (size_t)B * SK * HKV * D;
    float *q = random_floats(nq, &seed), *k = random_floats(nkv, &seed);
    float *v = random_floats(nkv, &seed), *o = calloc(nq, sizeof(float));
    float *w = random_floats(D, &seed), *y = calloc(nq, sizeof(float));
    if (!q || !k || !v || !o || !w || !y) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    int bad = 0;

    /* ---- attention: o = softmax(q k^T / sqrt(D), causal) v ---------------------------- */
    flashc_tensor tq = flashc_tensor_4d(q, FLASHC_F32, B, SQ, HQ, D);
    flashc_tensor tk = flashc_tensor_4d(k, FLASHC_F32, B, SK, HKV, D);
    flashc_tensor tv = flashc_tensor_4d(v, FLASHC_F32, B, SK, HKV, D);
    flashc_tensor to = flashc_tensor_4d(o, FLASHC_F32, B, SQ, HQ, D);
    flashc_attn_params params = flashc_attn_params_default(); /* scale 1/sqrt(D), no mask */
    params.causal = 1;
    if (failed("flashc_attn_fwd", flashc_attn_fwd(&params, &tq, &tk, &tv, &to, NULL, NULL)))
        return 1;
    double err = 0.0, row[D];
    for (int b = 0; b < B; b++)
        for (int i = 0; i < SQ; i++)
            for (int h = 0; h < HQ; h++) {
                attention_row(q, k, v, b, i, h, row);
                for (int d = 0; d < D; d++) {
                    double e = fabs(o[(((size_t)b * SQ + i) * HQ + h) * D + d] - row[d]);
                    err = e > err || e != e ? e : err; /* NaN is an error too */
                }
            }
    printf("attention  (%d, %d, %d, %d) causal GQA: max |error| %.2e\n", B, SQ, HQ, D, err);
    bad |= !(err < 1e-5);

    /* ---- RMSNorm of the attention output, one row per (b, i, h) --------------------------- */
    const int64_t rows = (int64_t)B * SQ * HQ;
    flashc_tensor tx = flashc_tensor_2d(o, FLASHC_F32, rows, D);
    flashc_tensor tw = flashc_tensor_1d(w, FLASHC_F32, D);
    flashc_tensor ty = flashc_tensor_2d(y, FLASHC_F32, rows, D);
    const float eps = 1e-6f;
    if (failed("flashc_rmsnorm", flashc_rmsnorm(&tx, &tw, eps, &ty)))
        return 1;
    err = 0.0;
    for (int64_t t = 0; t < rows; t++) {
        double ss = 0.0;
        for (int d = 0; d < D; d++)
            ss += (double)o[t * D + d] * o[t * D + d];
        double r = 1.0 / sqrt(ss / D + eps);
        for (int d = 0; d < D; d++) {
            double e = fabs(y[t * D + d] - o[t * D + d] * r * w[d]);
            err = e > err || e != e ? e : err;
        }
    }
    printf("rmsnorm    (%lld, %d): max |error| %.2e\n", (long long)rows, D, err);
    bad |= !(err < 1e-5);

    /* ---- a call that must fail: 3 query heads cannot share 2 KV heads ------------------- */
    flashc_tensor tq3 = flashc_tensor_4d(q, FLASHC_F32, B, SQ, 3, D);
    flashc_tensor to3 = flashc_tensor_4d(o, FLASHC_F32, B, SQ, 3, D);
    flashc_status st = flashc_attn_fwd(&params, &tq3, &tk, &tv, &to3, NULL, NULL);
    printf("bad call   -> %s: %s\n", flashc_status_string(st), flashc_last_error());
    bad |= st != FLASHC_ERR_HEAD_MISMATCH;

    free(q), free(k), free(v), free(o), free(w), free(y);
    printf("%s\n", bad ? "FAILED" : "ok");
    return bad;
}
