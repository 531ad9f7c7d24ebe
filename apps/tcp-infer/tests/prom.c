/* tcp-infer's tests: the Prometheus text format parser (prom.h). One pass over the lines builds
 * the samples and the families' types; the families' rules (one group each, histograms'
 * buckets) are checked over the samples after. */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"

#define MAX_FAMILIES 256

typedef struct family {
  char name[128];
  char type[16];
  bool help, typed, seen; /* seen: a sample of it came */
  bool closed;            /* its group ended: another family's sample came after */
} family_t;

typedef struct parse {
  prom_t *p;
  family_t fam[MAX_FAMILIES];
  size_t nfam;
  family_t *last; /* the family of the latest sample */
  unsigned line;
} parse_t;

__attribute__((format(printf, 2, 3))) static int bad(parse_t *ps, const char *fmt, ...) {
  char what[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(ps->p->error, sizeof ps->p->error, "line %u: %s", ps->line, what);
  return -1;
}

static bool name_char(char c, bool first, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':') ||
         (!first && c >= '0' && c <= '9');
}

/* A metric (colon) or label name at *s; its length, 0 when there is none. */
static size_t name_len(const char *s, const char *end, bool colon) {
  size_t n = 0;
  while (s + n < end && name_char(s[n], n == 0, colon))
    n++;
  return n;
}

static family_t *family(parse_t *ps, const char *name, size_t len, bool create) {
  for (size_t i = 0; i < ps->nfam; i++)
    if (strlen(ps->fam[i].name) == len && !memcmp(ps->fam[i].name, name, len))
      return &ps->fam[i];
  if (!create || ps->nfam == MAX_FAMILIES || len >= sizeof ps->fam[0].name)
    return NULL;
  family_t *f = &ps->fam[ps->nfam++];
  *f = (family_t){0};
  memcpy(f->name, name, len);
  return f;
}

/* The family a sample of this name belongs to: a histogram's or summary's for its suffixed
 * series, else the name's own. */
static family_t *family_of(parse_t *ps, const char *name, size_t len) {
  static const char *const suffixes[] = {"_bucket", "_sum", "_count"};
  for (int i = 0; i < 3; i++) {
    size_t n = strlen(suffixes[i]);
    if (len > n && !memcmp(name + len - n, suffixes[i], n)) {
      family_t *f = family(ps, name, len - n, false);
      if (f && (!strcmp(f->type, "histogram") || !strcmp(f->type, "summary")))
        return f;
    }
  }
  return family(ps, name, len, true);
}

/* ---- comment lines ------------------------------------------------------------------------ */

static int descriptor(parse_t *ps, const char *s, const char *end) {
  bool help = !strncmp(s, "# HELP ", 7), type = !strncmp(s, "# TYPE ", 7);
  if (!help && !type)
    return 0; /* a comment */
  s += 7;
  size_t n = name_len(s, end, true);
  if (n == 0 || (s + n < end && s[n] != ' '))
    return bad(ps, "# HELP or # TYPE without a metric name");
  family_t *f = family(ps, s, n, true);
  if (!f)
    return bad(ps, "too many metric names");
  const char *rest = s + n < end ? s + n + 1 : end;
  if (help) {
    if (f->help)
      return bad(ps, "a second HELP for %s", f->name);
    f->help = true;
    for (const char *c = rest; c < end; c++)
      if (*c == '\\' && (c + 1 >= end || (c[1] != '\\' && c[1] != 'n')))
        return bad(ps, "HELP of %s: a bad escape", f->name);
      else if (*c == '\\')
        c++;
    return 0;
  }
  static const char *const types[] = {"counter", "gauge", "histogram", "summary", "untyped"};
  size_t tl = (size_t)(end - rest);
  bool known = false;
  for (int i = 0; i < 5; i++)
    known |= tl == strlen(types[i]) && !memcmp(rest, types[i], tl);
  if (f->typed || f->seen || !known)
    return bad(ps, "TYPE of %s: a second one, after its samples, or unknown", f->name);
  f->typed = true;
  memcpy(f->type, rest, tl);
  return 0;
}

/* ---- sample lines ------------------------------------------------------------------------- */

/* label="value" pairs at *s (after the brace) up to the closing brace; labels get their text. */
static int labels(parse_t *ps, const char **s, const char *end, char *out, size_t cap) {
  const char *start = *s;
  char seen[16][64];
  size_t nseen = 0;
  while (*s < end && **s != '}') {
    size_t n = name_len(*s, end, false);
    if (n == 0 || n >= 64 || *s + n + 1 >= end || (*s)[n] != '=' || (*s)[n + 1] != '"')
      return bad(ps, "a label must be name=\"value\"");
    for (size_t i = 0; i < nseen; i++)
      if (strlen(seen[i]) == n && !memcmp(seen[i], *s, n))
        return bad(ps, "label %.*s twice", (int)n, *s);
    if (nseen < 16)
      snprintf(seen[nseen++], 64, "%.*s", (int)n, *s);
    const char *c = *s + n + 2;
    while (c < end && *c != '"')
      if (*c++ == '\\' && (c >= end || (*c != '\\' && *c != '"' && *c != 'n')))
        return bad(ps, "a label value with a bad escape");
      else if (c[-1] == '\\')
        c++;
    if (c >= end)
      return bad(ps, "an unterminated label value");
    *s = c + 1;
    if (*s < end && **s == ',')
      (*s)++;
  }
  if (*s >= end)
    return bad(ps, "labels without their closing brace");
  if ((size_t)(*s - start) >= cap)
    return bad(ps, "labels too long for the parser");
  memcpy(out, start, (size_t)(*s - start));
  out[*s - start] = '\0';
  (*s)++;
  return 0;
}

/* Go's ParseFloat: decimal or hex floats, NaN, [+-]Inf. */
static int value(parse_t *ps, const char *s, const char *end, double *v) {
  char copy[64];
  size_t n = (size_t)(end - s);
  const char *space = memchr(s, ' ', n);
  size_t vn = space ? (size_t)(space - s) : n;
  if (vn == 0 || vn >= sizeof copy)
    return bad(ps, "no value");
  memcpy(copy, s, vn);
  copy[vn] = '\0';
  if (!strcmp(copy, "NaN") || !strcmp(copy, "+Inf") || !strcmp(copy, "-Inf")) {
    *v = copy[0] == 'N' ? NAN : copy[0] == '+' ? INFINITY : -INFINITY;
  } else {
    char *stop;
    *v = strtod(copy, &stop);
    if (*stop || isnan(*v) || isinf(*v))
      return bad(ps, "'%s' is not a value", copy);
  }
  if (space) { /* a timestamp: an integer of milliseconds */
    const char *t = space + 1;
    if (t < end && *t == '-')
      t++;
    if (t == end)
      return bad(ps, "an empty timestamp");
    for (; t < end; t++)
      if (*t < '0' || *t > '9')
        return bad(ps, "a timestamp must be an integer");
  }
  return 0;
}

static int sample(parse_t *ps, const char *s, const char *end) {
  size_t n = name_len(s, end, true);
  if (n == 0 || n >= sizeof ps->p->samples[0].name)
    return bad(ps, "a sample without a metric name");
  prom_sample_t x = {0};
  memcpy(x.name, s, n);
  s += n;
  if (s < end && *s == '{') {
    s++;
    if (labels(ps, &s, end, x.labels, sizeof x.labels) != 0)
      return -1;
  }
  if (s >= end || *s != ' ')
    return bad(ps, "%s: a space before the value", x.name);
  if (value(ps, s + 1, end, &x.value) != 0)
    return -1;
  family_t *f = family_of(ps, x.name, n);
  if (!f)
    return bad(ps, "too many metric names");
  if (f->closed)
    return bad(ps, "%s: its family's samples are not one group", x.name);
  if (ps->last && ps->last != f)
    ps->last->closed = true;
  ps->last = f;
  f->seen = true;
  if (prom_find(ps->p, x.name, x.labels))
    return bad(ps, "%s{%s} twice", x.name, x.labels);
  if (!strcmp(f->type, "counter") && !(x.value >= 0))
    return bad(ps, "counter %s is negative", x.name);
  prom_sample_t *grown = realloc(ps->p->samples, (ps->p->n + 1) * sizeof *grown);
  if (!grown)
    return bad(ps, "out of memory");
  ps->p->samples = grown;
  ps->p->samples[ps->p->n++] = x;
  return 0;
}

/* ---- histograms --------------------------------------------------------------------------- */

/* The labels without le, and le's value ("" when there is no le). */
static void split_le(const char *labels, char *rest, size_t cap, char *le, size_t le_cap) {
  const char *at = strstr(labels, "le=\"");
  while (at && at != labels && at[-1] != ',')
    at = strstr(at + 1, "le=\"");
  le[0] = '\0';
  if (!at) {
    snprintf(rest, cap, "%s", labels);
    return;
  }
  const char *q = strchr(at + 4, '"');
  snprintf(le, le_cap, "%.*s", (int)(q - at - 4), at + 4);
  const char *after = q[1] == ',' ? q + 2 : q + 1;
  snprintf(rest, cap, "%.*s%s", (int)(at - labels), labels, after);
  size_t len = strlen(rest);
  if (len && rest[len - 1] == ',')
    rest[len - 1] = '\0';
}

static int histogram_series(parse_t *ps, const char *fam, const char *series) {
  char bucket[160], sum[160], count[160];
  snprintf(bucket, sizeof bucket, "%s_bucket", fam);
  snprintf(sum, sizeof sum, "%s_sum", fam);
  snprintf(count, sizeof count, "%s_count", fam);
  double last_le = -INFINITY, last = 0;
  bool inf = false;
  for (size_t i = 0; i < ps->p->n; i++) {
    const prom_sample_t *x = &ps->p->samples[i];
    char rest[256], le[64];
    if (strcmp(x->name, bucket))
      continue;
    split_le(x->labels, rest, sizeof rest, le, sizeof le);
    if (strcmp(rest, series))
      continue;
    double b = !strcmp(le, "+Inf") ? INFINITY : strtod(le, NULL);
    if (!le[0] || !(b > last_le) || x->value < last)
      return bad(ps, "%s{%s}: le not increasing, or counts decreasing", bucket, x->labels);
    last_le = b;
    last = x->value;
    inf = isinf(b);
  }
  const prom_sample_t *c = prom_find(ps->p, count, series);
  if (!inf || !c || c->value != last || !prom_find(ps->p, sum, series))
    return bad(ps, "histogram %s{%s}: no +Inf bucket, _sum, or a _count that is not it", fam,
               series);
  return 0;
}

static int histograms(parse_t *ps) {
  for (size_t f = 0; f < ps->nfam; f++) {
    if (strcmp(ps->fam[f].type, "histogram"))
      continue;
    char bucket[160];
    snprintf(bucket, sizeof bucket, "%s_bucket", ps->fam[f].name);
    for (size_t i = 0; i < ps->p->n; i++) {
      char rest[256], le[64];
      if (strcmp(ps->p->samples[i].name, bucket))
        continue;
      split_le(ps->p->samples[i].labels, rest, sizeof rest, le, sizeof le);
      if (histogram_series(ps, ps->fam[f].name, rest) != 0)
        return -1;
    }
  }
  return 0;
}

int prom_parse(prom_t *p, const char *text, size_t len) {
  *p = (prom_t){0};
  parse_t *ps = calloc(1, sizeof *ps);
  if (!ps)
    return -1;
  ps->p = p;
  int rc = 0;
  if (len && text[len - 1] != '\n')
    rc = bad(ps, "the text must end with a newline");
  for (const char *s = text, *stop = text + len; rc == 0 && s < stop;) {
    const char *end = memchr(s, '\n', (size_t)(stop - s));
    ps->line++;
    if (end > s)
      rc = *s == '#' ? descriptor(ps, s, end) : sample(ps, s, end);
    s = end + 1;
  }
  if (rc == 0)
    rc = histograms(ps);
  free(ps);
  return rc;
}

void prom_free(prom_t *p) {
  free(p->samples);
  *p = (prom_t){0};
}

const prom_sample_t *prom_find(const prom_t *p, const char *name, const char *labels) {
  for (size_t i = 0; i < p->n; i++)
    if (!strcmp(p->samples[i].name, name) && !strcmp(p->samples[i].labels, labels))
      return &p->samples[i];
  return NULL;
}
