/*
 * cli.h — table-driven option parsing for the flashc subcommands.
 *
 * A subcommand lists its options in a cli_option table; cli_parse() accepts "--name value" and
 * "--name=value", checks every value (integer syntax, range, list length, choice), and prints a
 * one-line reason to stderr on the first bad one. --help prints the table.
 */
#ifndef FLASHC_TOOLS_CLI_H
#define FLASHC_TOOLS_CLI_H

#include <stdint.h>
#include <stdio.h>

enum { CLI_LIST_MAX = 16 };

typedef struct cli_int_list {
    int64_t v[CLI_LIST_MAX];
    int n;
} cli_int_list;

typedef enum cli_kind {
    CLI_FLAG,     /* no value; target: int, set to 1                               */
    CLI_INT,      /* target: int64_t, within [min, max]                           */
    CLI_INT_LIST, /* comma-separated, each within [min, max]; target: cli_int_list */
    CLI_DOUBLE,   /* target: double, within [min, max]                            */
    CLI_CHOICE,   /* target: const char *, one of the comma-separated `choices`    */
    CLI_STRING,   /* target: const char * (free text, checked by the caller)       */
} cli_kind;

typedef struct cli_option {
    const char *name;     /* without the dashes: "n"                                  */
    cli_kind kind;
    void *target;
    double min, max;      /* numeric kinds                                             */
    const char *choices;  /* CLI_CHOICE: "md,csv,json"                                  */
    const char *metavar;  /* "LIST"                                                     */
    const char *help;
    int seen;             /* set by cli_parse when the option was given                */
} cli_option;

enum { CLI_OK = 0, CLI_ERROR = 1, CLI_HELP = 2 };

/* Parses argv[1..argc) (argv[0] is the subcommand) into the table. CLI_ERROR after printing
 * "flashc <cmd>: <reason>" to stderr; CLI_HELP when --help / -h was given. */
int cli_parse(const char *cmd, cli_option *opts, int n_opts, int argc, char **argv);

/* Prints "usage: flashc <cmd> [options]", the intro text and one line per option. */
void cli_usage(FILE *f, const char *cmd, const char *intro, const cli_option *opts, int n_opts);

#endif /* FLASHC_TOOLS_CLI_H */
