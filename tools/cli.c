/* cli.c — option parsing for the flashc subcommands (see cli.h). */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, getrusage, strtok_r, gmtime_r, strsignal */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *cmd, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "flashc %s: ", cmd);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (see 'flashc %s --help')\n", cmd);
    return CLI_ERROR;
}

/* A whole-string decimal integer; 0 when the text is not one. */
static int parse_i64(const char *s, int64_t *out)
{
    if (!*s)
        return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || *end)
        return 0;
    *out = (int64_t)v;
    return 1;
}

static int set_int(const char *cmd, const cli_option *o, const char *text, int64_t *out)
{
    int64_t v;
    if (!parse_i64(text, &v))
        return fail(cmd, "--%s: '%s' is not an integer", o->name, text);
    if ((double)v < o->min || (double)v > o->max) {
        char range[96];
        snprintf(range, sizeof range, "%.0f..%.0f", o->min, o->max);
        fprintf(stderr, "flashc %s: --%s: %s is out of range (%s)\n", cmd, o->name, text, range);
        return CLI_ERROR;
    }
    *out = v;
    return CLI_OK;
}

static int set_value(const char *cmd, cli_option *o, const char *text)
{
    switch (o->kind) {
    case CLI_FLAG:
        *(int *)o->target = 1;
        return CLI_OK;
    case CLI_INT:
        return set_int(cmd, o, text, (int64_t *)o->target);
    case CLI_INT_LIST: {
        cli_int_list *l = o->target;
        l->n = 0;
        for (const char *c = text;; c++) { /* comma-separated, no empty items */
            const char *comma = strchr(c, ',');
            const size_t len = comma ? (size_t)(comma - c) : strlen(c);
            char item[32];
            if (len == 0 || len >= sizeof item)
                return fail(cmd, "--%s: bad list '%s' (integers separated by commas)", o->name,
                            text);
            if (l->n == CLI_LIST_MAX)
                return fail(cmd, "--%s: more than 16 values in '%s'", o->name, text);
            memcpy(item, c, len);
            item[len] = 0;
            if (set_int(cmd, o, item, &l->v[l->n]) != CLI_OK)
                return CLI_ERROR;
            l->n++;
            if (!comma)
                return CLI_OK;
            c = comma;
        }
    }
    case CLI_DOUBLE: {
        char *end;
        errno = 0;
        double v = strtod(text, &end);
        if (!*text || *end || errno || !isfinite(v))
            return fail(cmd, "--%s: '%s' is not a number", o->name, text);
        if (v < o->min || v > o->max)
            return fail(cmd, "--%s: %s is out of range", o->name, text);
        *(double *)o->target = v;
        return CLI_OK;
    }
    case CLI_CHOICE: {
        const size_t len = strlen(text);
        for (const char *c = o->choices; *c;) {
            const char *comma = strchr(c, ',');
            const size_t clen = comma ? (size_t)(comma - c) : strlen(c);
            if (clen == len && strncmp(c, text, len) == 0) {
                *(const char **)o->target = text;
                return CLI_OK;
            }
            c += clen + (comma ? 1 : 0);
        }
        fprintf(stderr, "flashc %s: --%s: '%s' is not one of %s\n", cmd, o->name, text, o->choices);
        return CLI_ERROR;
    }
    case CLI_STRING:
        *(const char **)o->target = text;
        return CLI_OK;
    }
    return CLI_ERROR;
}

int cli_parse(const char *cmd, cli_option *opts, int n_opts, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return CLI_HELP;
        if (strncmp(arg, "--", 2) != 0)
            return fail(cmd, "unexpected argument '%s'%s", arg, "");
        const char *name = arg + 2, *eq = strchr(name, '=');
        const size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        cli_option *o = NULL;
        for (int k = 0; k < n_opts; k++)
            if (strlen(opts[k].name) == nlen && strncmp(opts[k].name, name, nlen) == 0)
                o = &opts[k];
        if (!o)
            return fail(cmd, "unknown option '%s'%s", arg, "");
        const char *value = NULL;
        if (o->kind == CLI_FLAG) {
            if (eq)
                return fail(cmd, "--%s takes no value ('%s')", o->name, arg);
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            return fail(cmd, "--%s needs a value%s", o->name, "");
        }
        if (set_value(cmd, o, value) != CLI_OK)
            return CLI_ERROR;
        o->seen = 1;
    }
    return CLI_OK;
}

void cli_usage(FILE *f, const char *cmd, const char *intro, const cli_option *opts, int n_opts)
{
    fprintf(f, "usage: flashc %s [options]\n\n%s\n\noptions:\n", cmd, intro);
    for (int k = 0; k < n_opts; k++) {
        char left[64];
        if (opts[k].kind == CLI_FLAG)
            snprintf(left, sizeof left, "--%s", opts[k].name);
        else
            snprintf(left, sizeof left, "--%s %s", opts[k].name,
                     opts[k].metavar ? opts[k].metavar : "N");
        fprintf(f, "  %-24s %s\n", left, opts[k].help);
    }
    fprintf(f, "  %-24s %s\n", "--help", "this text");
}
