/* tcp-infer: the command lines' shared parts (cli.h). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char *name = "tcp-infer";

void cli_init(const char *argv0) {
  if (!argv0 || !*argv0)
    return;
  const char *slash = strrchr(argv0, '/');
  name = slash ? slash + 1 : argv0;
}

const char *cli_name(void) { return name; }

int cli_usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", name);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nTry '%s --help'.\n", name);
  return CLI_USAGE;
}

bool cli_uint(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *out) {
  char *end = NULL;
  errno = 0;
  bool hex = arg && arg[0] == '0' && (arg[1] == 'x' || arg[1] == 'X');
  unsigned long long v = arg && *arg != '-' && *arg != '+' ? strtoull(arg, &end, hex ? 16 : 10)
                                                          : 0;
  if (!arg || !end || end == arg || *end || errno || v < min || v > max) {
    cli_usage_error("%s: '%s' is not a whole number from %" PRIu64 " to %" PRIu64, opt,
                    arg ? arg : "", min, max);
    return false;
  }
  *out = v;
  return true;
}

bool cli_unsigned(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *out) {
  uint64_t v;
  if (!cli_uint(opt, arg, min, max, &v))
    return false;
  *out = (unsigned)v;
  return true;
}

bool cli_range(const char *opt, const char *arg, unsigned min, unsigned max, unsigned *lo,
               unsigned *hi) {
  char first[32];
  const char *dash = strchr(arg, '-');
  size_t n = dash ? (size_t)(dash - arg) : strlen(arg);
  snprintf(first, sizeof first, "%.*s", (int)(n < sizeof first ? n : sizeof first - 1), arg);
  if (!cli_unsigned(opt, first, min, max, lo))
    return false;
  *hi = *lo;
  return !dash || cli_unsigned(opt, dash + 1, *lo, max, hi);
}

bool cli_seconds(const char *opt, const char *arg, double min, double max, double *out) {
  char *end = NULL;
  errno = 0;
  double v = arg ? strtod(arg, &end) : NAN;
  if (!arg || !end || end == arg || *end || errno || !(v >= min && v <= max)) {
    cli_usage_error("%s: '%s' is not a number of seconds from %g to %g", opt, arg ? arg : "",
                    min, max);
    return false;
  }
  *out = v;
  return true;
}

void cli_version(void) { printf("%s %s\n", name, TCP_INFER_VERSION); }

void cli_no_options(int argc, char **argv, const char *what) {
  cli_init(argv[0]);
  if (argc < 2)
    return;
  if (argc == 2 && !strcmp(argv[1], "--help")) {
    printf("usage: %s\n  %s\n  (no options; --help, --version)\n", name, what);
    exit(0);
  }
  if (argc == 2 && !strcmp(argv[1], "--version")) {
    cli_version();
    exit(0);
  }
  exit(cli_usage_error("'%s': no such option (this program takes none)", argv[1]));
}

int cli_parse(int argc, char **argv, const char *shortopts, const struct option *longs,
              bool (*option)(int ch, void *arg), void (*usage)(FILE *f), void *arg) {
  cli_init(argv[0]);
  opterr = 0; /* the messages below name the option */
  int ch;
  while ((ch = getopt_long(argc, argv, shortopts, longs, NULL)) != -1) {
    if (ch == 'h' || ch == 'V') {
      ch == 'h' ? usage(stdout) : cli_version();
      exit(0);
    }
    if (ch == '?')
      return cli_usage_error("'%s': no such option, or its value is missing",
                             optind > 0 ? argv[optind - 1] : "");
    if (!option(ch, arg))
      return CLI_USAGE;
  }
  return 0;
}
