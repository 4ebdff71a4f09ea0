/*
 * report.h — `flashc bench` output: a markdown table (default), CSV, or JSON.
 */
#ifndef FLASHC_TOOLS_REPORT_H
#define FLASHC_TOOLS_REPORT_H

#include "bench.h"

#include <stdint.h>
#include <stdio.h>

enum { REPORT_MAX_NOTES = 12 };

/* What was run, printed above the table (md), as "meta" (json), or as # comments (csv). */
typedef struct report_meta {
    char command[512];  /* the command line                                       */
    char date[32];      /* UTC, ISO 8601                                          */
    char machine[160];  /* CPU model and logical CPU count                        */
    const char *build;  /* flashc_build_info()                                    */
    int threads;        /* threads the library uses                               */
    uint64_t seed;      /* base seed of the random inputs (case i uses seed + i)  */
    const char *dtype;  /* storage dtype of the problems ("bf16"; "mixed ...")     */
    const char *device; /* "cpu" (NULL) or "cuda": where the rows ran             */
    const char *notes[REPORT_MAX_NOTES]; /* one line each: shapes, conventions    */
    char note_buf[REPORT_MAX_NOTES][256];
    int n_notes;
} report_meta;

/* Adds a printf-formatted note line. */
void report_note(report_meta *m, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Fills date and machine (from /proc/cpuinfo when readable). */
void report_meta_init(report_meta *m, int argc, char **argv);

/* format: "md", "csv" or "json". */
void report_write(FILE *f, const char *format, const report_meta *m, const bench_result *r, int n);

#endif /* FLASHC_TOOLS_REPORT_H */
