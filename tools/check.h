/*
 * check.h — `flashc check`: every op against its reference on a table of problems.
 */
#ifndef FLASHC_TOOLS_CHECK_H
#define FLASHC_TOOLS_CHECK_H

#include "cases.h"

/* `flashc check [options]`: argv[0] is "check". Returns the process exit status. */
int check_main(int argc, char **argv);

#endif /* FLASHC_TOOLS_CHECK_H */
