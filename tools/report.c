/* report.c — markdown / CSV / JSON output of `flashc bench` (see report.h). */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, getrusage, strtok_r, gmtime_r, strsignal */
#include "report.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void report_note(report_meta *m, const char *fmt, ...)
{
    if (m->n_notes == REPORT_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->note_buf[m->n_notes], sizeof m->note_buf[0], fmt, ap);
    va_end(ap);
    m->notes[m->n_notes] = m->note_buf[m->n_notes];
    m->n_notes++;
}

static void cpu_model(char *buf, size_t size)
{
    snprintf(buf, size, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *colon = strchr(line, ':');
            if (colon) {
                colon++;
                while (*colon == ' ' || *colon == '\t')
                    colon++;
                snprintf(buf, size, "%s", colon);
                buf[strcspn(buf, "\n")] = 0;
            }
            break;
        }
    }
    fclose(f);
}

void report_meta_init(report_meta *m, int argc, char **argv)
{
    memset(m, 0, sizeof *m);
    size_t used = 0;
    used += (size_t)snprintf(m->command, sizeof m->command, "flashc");
    for (int i = 0; i < argc && used < sizeof m->command; i++)
        used += (size_t)snprintf(m->command + used, sizeof m->command - used, " %s", argv[i]);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(m->date, sizeof m->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    char model[128];
    cpu_model(model, sizeof model);
    snprintf(m->machine, sizeof m->machine, "%s, %ld logical CPUs", model,
             sysconf(_SC_NPROCESSORS_ONLN));
}

/* ---- formatting helpers ------------------------------------------------------------------- */

/* "%.*f" or "-" when the value is absent (< 0 or not finite). */
static const char *num(char *buf, size_t size, double v, int prec)
{
    if (!(v >= 0.0) || !isfinite(v))
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.*f", prec, v);
    return buf;
}

static const char *err_text(char *buf, size_t size, double e)
{
    if (e < 0.0) /* not applicable: the reference row */
        snprintf(buf, size, "-");
    else if (isnan(e))
        snprintf(buf, size, "nan");
    else if (isinf(e))
        snprintf(buf, size, "inf");
    else
        snprintf(buf, size, "%.1e", e);
    return buf;
}

/* Ratios: "35.2x", "-" when not applicable (0) or infinite (the fused path allocates nothing). */
static const char *ratio(char *buf, size_t size, double v)
{
    if (v <= 0.0)
        snprintf(buf, size, "-");
    else if (!isfinite(v))
        snprintf(buf, size, "inf");
    else
        snprintf(buf, size, v >= 100.0 ? "%.0fx" : "%.2fx", v);
    return buf;
}

static int precision(double v) { return v >= 100.0 ? 1 : v >= 1.0 ? 2 : 3; }

/* ---- markdown -------------------------------------------------------------------------------- */

static void write_md(FILE *f, const report_meta *m, const bench_result *r, int n)
{
    fprintf(f, "flashc bench — %s\n\n", m->date);
    fprintf(f, "- command: `%s`\n", m->command);
    fprintf(f, "- machine: %s; flashc %s; %d threads; seed %llu\n", m->machine, m->build,
             m->threads, (unsigned long long)m->seed);
    fprintf(f, "- dtype: %s; device: %s\n", m->dtype, m->device ? m->device : "cpu");
    for (int i = 0; i < m->n_notes; i++)
        fprintf(f, "- %s\n", m->notes[i]);
    fprintf(f, "\n| op | impl | n | d | reps | ms (median) | ms (min) | rate | peak MiB | RSS MiB "
               "| traffic MiB | max_err | speedup | peak ratio | problem |\n");
    fprintf(f, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    for (int i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        if (x->failed) {
            /* failed == 2: a case that does not fit, whose message is the row ("OOM: ...") */
            fprintf(f, "| %s | %s | %lld | %lld | %s%s |||||||||| %s |\n", x->op, x->impl,
                    (long long)x->n, (long long)x->d, x->failed == 2 ? "" : "FAILED: ", x->error,
                    x->shape);
            continue;
        }
        char a[32], b[32], c[48], d[32], e[32], g[32], h[32], k[32], l[32];
        if (x->gflops >= 0)
            snprintf(c, sizeof c, "%.2f GFLOP/s", x->gflops);
        else
            snprintf(c, sizeof c, "%.2f GB/s", x->gbps);
        fprintf(f, "| %s | %s | %lld | %lld | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
                x->op, x->impl, (long long)x->n, (long long)x->d, x->reps,
                num(a, sizeof a, x->ms, precision(x->ms)),
                num(b, sizeof b, x->ms_min, precision(x->ms_min)), c,
                num(d, sizeof d, x->peak_mib, 3), num(e, sizeof e, x->rss_mib, 1),
                num(g, sizeof g, x->traffic_mib, 1), err_text(h, sizeof h, x->max_err),
                ratio(k, sizeof k, x->speedup), ratio(l, sizeof l, x->mem_ratio), x->shape);
    }
    /* One sentence per non-reference row: the seeds' claim in words. */
    fprintf(f, "\n");
    for (int i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        if (x->failed || x->impl_index == 0 || x->speedup <= 0.0)
            continue;
        const bench_result *ref = NULL;
        for (int j = i - 1; j >= 0 && !ref; j--)
            if (r[j].impl_index == 0 && strcmp(r[j].shape, x->shape) == 0 &&
                strcmp(r[j].op, x->op) == 0)
                ref = &r[j];
        if (!ref)
            continue;
        char s1[32], s2[32];
        fprintf(f,
                "- %s n=%lld: naive/%s time %s (%.*f vs %.*f ms); library peak memory "
                "naive/%s %s (%.3f vs %.3f MiB); peak RSS %.1f vs %.1f MiB; modeled traffic "
                "%.1f vs %.1f MiB\n",
                x->op, (long long)x->n, x->impl, ratio(s1, sizeof s1, x->speedup),
                precision(ref->ms), ref->ms, precision(x->ms), x->ms, x->impl,
                ratio(s2, sizeof s2, x->mem_ratio), ref->peak_mib, x->peak_mib, ref->rss_mib,
                x->rss_mib, ref->traffic_mib, x->traffic_mib);
    }
}

/* ---- CSV ---------------------------------------------------------------------------------------- */

static void csv_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, ",%.6g", v);
    else if (isnan(v))
        fprintf(f, ",nan");
    else
        fprintf(f, ",inf");
}

static void csv_opt(FILE *f, double v) /* absent (< 0) -> empty cell */
{
    if (v < 0.0)
        fprintf(f, ",");
    else
        csv_num(f, v);
}

static void write_csv(FILE *f, const report_meta *m, const bench_result *r, int n)
{
    fprintf(f, "# %s | %s | %s | flashc %s | threads %d | seed %llu | dtype %s\n", m->command,
            m->date, m->machine, m->build, m->threads, (unsigned long long)m->seed, m->dtype);
    for (int i = 0; i < m->n_notes; i++)
        fprintf(f, "# %s\n", m->notes[i]);
    fprintf(f, "op,impl,dtype,shape,n,d,block_q,block_k,tile_pairs,reps,warmup,ms,ms_min,gflops,"
               "gbps,peak_mib,rss_mib,traffic_mib,max_err,tol,speedup,mem_ratio,rss_ratio,error\n");
    for (int i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        fprintf(f, "%s,%s,%s,\"%s\",%lld,%lld,%lld,%lld,%lld,%d,%d", x->op, x->impl, x->dtype,
                x->shape, (long long)x->n, (long long)x->d, (long long)x->block_q,
                (long long)x->block_k, (long long)x->tile_pairs, x->reps, x->warmup);
        if (x->failed) {
            fprintf(f, ",,,,,,,,,,,,,\"%s\"\n", x->error);
            continue;
        }
        csv_num(f, x->ms), csv_num(f, x->ms_min), csv_opt(f, x->gflops), csv_opt(f, x->gbps);
        csv_num(f, x->peak_mib), csv_num(f, x->rss_mib), csv_num(f, x->traffic_mib);
        csv_opt(f, x->max_err), csv_num(f, x->tol);
        csv_opt(f, x->speedup > 0 ? x->speedup : -1), csv_opt(f, x->mem_ratio > 0 ? x->mem_ratio : -1);
        csv_opt(f, x->rss_ratio > 0 ? x->rss_ratio : -1);
        fprintf(f, ",\n");
    }
}

/* ---- JSON --------------------------------------------------------------------------------------- */

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        const unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* JSON has no inf / nan: those, and absent values (< 0 where `absent_below_zero`), are null. */
static void json_num(FILE *f, const char *key, double v, int absent_below_zero)
{
    fprintf(f, ", \"%s\": ", key);
    if (!isfinite(v) || (absent_below_zero && v < 0.0))
        fprintf(f, "null");
    else
        fprintf(f, "%.9g", v);
}

static void write_json(FILE *f, const report_meta *m, const bench_result *r, int n)
{
    fprintf(f, "{\n  \"meta\": {\"command\": ");
    json_str(f, m->command);
    fprintf(f, ", \"date\": ");
    json_str(f, m->date);
    fprintf(f, ", \"machine\": ");
    json_str(f, m->machine);
    fprintf(f, ", \"build\": ");
    json_str(f, m->build);
    fprintf(f, ", \"dtype\": ");
    json_str(f, m->dtype);
    fprintf(f, ", \"device\": ");
    json_str(f, m->device ? m->device : "cpu");
    fprintf(f, ", \"threads\": %d, \"seed\": %llu, \"notes\": [", m->threads,
            (unsigned long long)m->seed);
    for (int i = 0; i < m->n_notes; i++) {
        fprintf(f, i ? ", " : "");
        json_str(f, m->notes[i]);
    }
    fprintf(f, "]},\n  \"results\": [");
    for (int i = 0; i < n; i++) {
        const bench_result *x = &r[i];
        fprintf(f, "%s\n    {\"op\": ", i ? "," : "");
        json_str(f, x->op);
        fprintf(f, ", \"impl\": ");
        json_str(f, x->impl);
        fprintf(f, ", \"dtype\": ");
        json_str(f, x->dtype);
        fprintf(f, ", \"shape\": ");
        json_str(f, x->shape);
        fprintf(f, ", \"n\": %lld, \"d\": %lld, \"block_q\": %lld, \"block_k\": %lld, "
                   "\"tile_pairs\": %lld, \"reps\": %d, \"warmup\": %d",
                (long long)x->n, (long long)x->d, (long long)x->block_q, (long long)x->block_k,
                (long long)x->tile_pairs, x->reps, x->warmup);
        if (x->failed) {
            fprintf(f, ", \"error\": ");
            json_str(f, x->error);
            fprintf(f, "}");
            continue;
        }
        json_num(f, "ms", x->ms, 0);
        json_num(f, "ms_min", x->ms_min, 0);
        json_num(f, "gflops", x->gflops, 1);
        json_num(f, "gbps", x->gbps, 1);
        json_num(f, "peak_mib", x->peak_mib, 0);
        json_num(f, "rss_mib", x->rss_mib, 0);
        json_num(f, "traffic_mib", x->traffic_mib, 0);
        json_num(f, "max_err", x->max_err, 1);
        json_num(f, "tol", x->tol, 0);
        json_num(f, "speedup", x->speedup > 0 ? x->speedup : -1, 1);
        json_num(f, "mem_ratio", x->mem_ratio > 0 ? x->mem_ratio : -1, 1);
        json_num(f, "rss_ratio", x->rss_ratio > 0 ? x->rss_ratio : -1, 1);
        if (x->of_copy > 0)
            json_num(f, "of_copy", x->of_copy, 0);
        fprintf(f, ", \"inputs_changed\": %s}", x->inputs_changed ? "true" : "false");
    }
    fprintf(f, "\n  ]\n}\n");
}

void report_write(FILE *f, const char *format, const report_meta *m, const bench_result *r, int n)
{
    if (strcmp(format, "csv") == 0)
        write_csv(f, m, r, n);
    else if (strcmp(format, "json") == 0)
        write_json(f, m, r, n);
    else
        write_md(f, m, r, n);
}
