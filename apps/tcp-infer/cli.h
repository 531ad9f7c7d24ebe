/* tcp-infer's programs' command lines (the server, the tools, the tests' programs): numbers read
 * whole and within their range, usage errors that name the option, and --version. Every program
 * parses with getopt_long, answers --help (exit 0) and --version, and exits CLI_USAGE (2) on a
 * usage error after one line that says what was wrong. */
#ifndef TCP_INFER_CLI_H
#define TCP_INFER_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_USAGE 2

/* The program's name in the messages (argv[0]'s last component). */
void cli_init(const char *argv0);
const char *cli_name(void);

/* A whole number (decimal, or 0x hex) from min to max into *out; false after a message naming
 * the option ("--port: 'x' is not a whole number from 0 to 65535"). */
bool cli_uint(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *out);
/* The same, into an unsigned. */
bool cli_unsigned(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *out);
/* "N" or "LO-HI", whole numbers from min to max, LO <= HI, into *lo and *hi. */
bool cli_range(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *lo,
               unsigned *hi);
/* A number of seconds (a decimal fraction) from min to max. */
bool cli_seconds(const char *opt, const char *arg, double min, double max, double *out);

/* Reads argv's options with getopt_long (`shortopts`: "" or "+" to stop at the first argument
 * that is none): each goes to option(ch, arg), which reads optarg and returns false after a
 * usage error's message; 'h' (--help) prints usage on stdout and 'V' (--version) the version,
 * both exit 0; an unknown option or a missing value is a usage error naming it. 0, or CLI_USAGE
 * after the message; the arguments that are no options start at argv[optind]. */
int cli_parse(int argc, char **argv, const char *shortopts, const struct option *longs,
              bool (*option)(int ch, void *arg), void (*usage)(FILE *f), void *arg);
/* Prints "NAME: message" and a pointer to --help on stderr; returns CLI_USAGE. */
__attribute__((format(printf, 1, 2))) int cli_usage_error(const char *fmt, ...);
/* --version: "NAME VERSION" on stdout. */
void cli_version(void);
/* For programs that take no options (the unit tests): --help prints `what`, --version the
 * version, both exit 0; anything else is a usage error (exit CLI_USAGE). Returns when there are
 * no arguments. */
void cli_no_options(int argc, char **argv, const char *what);

#endif
