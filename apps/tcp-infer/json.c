/* tcp-infer: a strict JSON reader into an array of nodes, and the writer's escaping (json.h).
 * The reader is recursive descent over the text with a depth bound; every error names what was
 * expected and the byte offset where it was not found. */
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

typedef struct parser {
  json_doc_t *doc;
  const char *text;
  size_t len, pos;
} parser_t;

__attribute__((format(printf, 2, 3))) static int fail(parser_t *p, const char *fmt, ...) {
  if (p->doc->error[0])
    return -1; /* the first error stands */
  char what[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(p->doc->error, sizeof p->doc->error, "%s at byte %zu", what, p->pos);
  return -1;
}

static void skip_space(parser_t *p) {
  while (p->pos < p->len && (p->text[p->pos] == ' ' || p->text[p->pos] == '\t' ||
                             p->text[p->pos] == '\n' || p->text[p->pos] == '\r'))
    p->pos++;
}

/* A new node; its index, or -1 when out of memory. */
static long new_node(parser_t *p, json_type_t type) {
  json_doc_t *d = p->doc;
  if (d->n == d->cap) {
    unsigned cap = d->cap ? d->cap * 2 : 64;
    json_node_t *nodes = realloc(d->nodes, cap * sizeof *nodes);
    if (!nodes)
      return -1;
    d->nodes = nodes;
    d->cap = cap;
  }
  d->nodes[d->n] = (json_node_t){.type = type};
  return (long)d->n++;
}

static int literal(parser_t *p, const char *word) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->text + p->pos, word, n) != 0)
    return fail(p, "expected a value");
  p->pos += n;
  return 0;
}

/* ---- strings ------------------------------------------------------------------------------ */

static int hex4(parser_t *p, unsigned *out) {
  if (p->len - p->pos < 4)
    return fail(p, "truncated \\u escape");
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char ch = p->text[p->pos++];
    unsigned d = ch >= '0' && ch <= '9'   ? (unsigned)(ch - '0')
                 : ch >= 'a' && ch <= 'f' ? (unsigned)(ch - 'a' + 10)
                 : ch >= 'A' && ch <= 'F' ? (unsigned)(ch - 'A' + 10)
                                          : 16u;
    if (d == 16)
      return fail(p, "bad \\u escape");
    v = v * 16 + d;
  }
  *out = v;
  return 0;
}

static size_t put_utf8(char *out, unsigned cp) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xc0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xe0 | cp >> 12);
    out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[2] = (char)(0x80 | (cp & 0x3f));
    return 3;
  }
  out[0] = (char)(0xf0 | cp >> 18);
  out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
  out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
  out[3] = (char)(0x80 | (cp & 0x3f));
  return 4;
}

/* \uXXXX, a surrogate pair taken whole; the code point. */
static int unicode_escape(parser_t *p, unsigned *cp) {
  if (hex4(p, cp) != 0)
    return -1;
  if (*cp >= 0xdc00 && *cp <= 0xdfff)
    return fail(p, "lone low surrogate");
  if (*cp < 0xd800 || *cp > 0xdbff)
    return 0;
  unsigned low;
  if (p->len - p->pos < 2 || p->text[p->pos] != '\\' || p->text[p->pos + 1] != 'u')
    return fail(p, "lone high surrogate");
  p->pos += 2;
  if (hex4(p, &low) != 0)
    return -1;
  if (low < 0xdc00 || low > 0xdfff)
    return fail(p, "bad surrogate pair");
  *cp = 0x10000 + ((*cp - 0xd800) << 10) + (low - 0xdc00);
  return 0;
}

static int escape(parser_t *p, char *out, size_t *n) {
  char ch = p->text[p->pos++];
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char *at = strchr(from, ch);
  if (ch && at) {
    out[(*n)++] = to[at - from];
    return 0;
  }
  if (ch != 'u')
    return fail(p, "bad escape");
  unsigned cp;
  if (unicode_escape(p, &cp) != 0)
    return -1;
  *n += put_utf8(out + *n, cp);
  return 0;
}

/* A string at p->pos (its opening quote), decoded into the document's storage. Decoded text is
 * never longer than its source, quotes included, so the storage (the text's length plus one)
 * always has room for it and its NUL. */
static int string(parser_t *p, const char **s, size_t *slen) {
  json_doc_t *d = p->doc;
  char *out = d->strings + d->strings_len;
  size_t n = 0;
  p->pos++; /* the quote */
  for (;;) {
    if (p->pos >= p->len)
      return fail(p, "unterminated string");
    unsigned char ch = (unsigned char)p->text[p->pos];
    if (ch == '"')
      break;
    if (ch < 0x20)
      return fail(p, "control character in a string");
    if (ch == '\\') {
      p->pos++;
      if (p->pos >= p->len)
        return fail(p, "unterminated string");
      if (escape(p, out, &n) != 0)
        return -1;
      continue;
    }
    out[n++] = (char)ch;
    p->pos++;
  }
  p->pos++;
  out[n] = '\0';
  d->strings_len += n + 1;
  *s = out;
  *slen = n;
  return 0;
}

/* ---- numbers ------------------------------------------------------------------------------ */

static size_t digits(const parser_t *p, size_t at) {
  size_t n = 0;
  while (at + n < p->len && p->text[at + n] >= '0' && p->text[at + n] <= '9')
    n++;
  return n;
}

/* The grammar's number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; strtod reads a copy, since
 * the text need not end after it. */
static int number(parser_t *p, double *v) {
  size_t start = p->pos, at = p->pos;
  char first = p->text[at];
  if (first != '-' && (first < '0' || first > '9'))
    return fail(p, "expected a value");
  if (at < p->len && p->text[at] == '-')
    at++;
  size_t n = digits(p, at);
  if (n == 0 || (n > 1 && p->text[at] == '0'))
    return fail(p, "bad number");
  at += n;
  if (at < p->len && p->text[at] == '.') {
    if ((n = digits(p, at + 1)) == 0)
      return fail(p, "bad number");
    at += 1 + n;
  }
  if (at < p->len && (p->text[at] == 'e' || p->text[at] == 'E')) {
    at++;
    if (at < p->len && (p->text[at] == '+' || p->text[at] == '-'))
      at++;
    if ((n = digits(p, at)) == 0)
      return fail(p, "bad number");
    at += n;
  }
  char copy[128];
  if (at - start >= sizeof copy)
    return fail(p, "number too long");
  memcpy(copy, p->text + start, at - start);
  copy[at - start] = '\0';
  *v = strtod(copy, NULL);
  p->pos = at;
  return 0;
}

/* ---- values ------------------------------------------------------------------------------- */

static int value(parser_t *p, unsigned depth, long *index);

/* Elements (members) linked in order under their array (object) `parent`. */
static void link(parser_t *p, long parent, long *last, long child) {
  json_node_t *nodes = p->doc->nodes;
  if (*last < 0)
    nodes[parent].child = (unsigned)child;
  else
    nodes[*last].next = (unsigned)child;
  nodes[parent].count++;
  *last = child;
}

static int member(parser_t *p, unsigned depth, long *child) {
  const char *key;
  size_t key_len;
  skip_space(p);
  if (p->pos >= p->len || p->text[p->pos] != '"')
    return fail(p, "expected a key");
  if (string(p, &key, &key_len) != 0)
    return -1;
  skip_space(p);
  if (p->pos >= p->len || p->text[p->pos] != ':')
    return fail(p, "expected :");
  p->pos++;
  if (value(p, depth + 1, child) != 0)
    return -1;
  p->doc->nodes[*child].key = key;
  p->doc->nodes[*child].key_len = key_len;
  return 0;
}

/* An array's elements or an object's members, comma-separated up to `close` (] or }). */
static int elements(parser_t *p, unsigned depth, long self, char close) {
  long last = -1;
  p->pos++; /* [ or { */
  skip_space(p);
  if (p->pos < p->len && p->text[p->pos] == close) {
    p->pos++;
    return 0;
  }
  for (;;) {
    long child;
    int rc = close == '}' ? member(p, depth, &child) : value(p, depth + 1, &child);
    if (rc != 0)
      return -1;
    link(p, self, &last, child);
    skip_space(p);
    if (p->pos < p->len && p->text[p->pos] == ',') {
      p->pos++;
      continue;
    }
    if (p->pos < p->len && p->text[p->pos] == close) {
      p->pos++;
      return 0;
    }
    return fail(p, "expected , or %c", close);
  }
}

static json_type_t type_at(const parser_t *p) {
  switch (p->text[p->pos]) {
  case '{': return JSON_OBJECT;
  case '[': return JSON_ARRAY;
  case '"': return JSON_STRING;
  case 't': return JSON_TRUE;
  case 'f': return JSON_FALSE;
  case 'n': return JSON_NULL;
  default: return JSON_NUMBER; /* or nothing valid: number() says so */
  }
}

static int value(parser_t *p, unsigned depth, long *index) {
  skip_space(p);
  if (depth > JSON_MAX_DEPTH)
    return fail(p, "nested deeper than %d", JSON_MAX_DEPTH);
  if (p->pos >= p->len)
    return fail(p, "expected a value");
  json_type_t type = type_at(p);
  long self = new_node(p, type);
  if (self < 0)
    return fail(p, "out of memory");
  *index = self;
  json_node_t *node = &p->doc->nodes[self]; /* valid until the next new_node */
  switch (type) {
  case JSON_OBJECT: return elements(p, depth, self, '}');
  case JSON_ARRAY: return elements(p, depth, self, ']');
  case JSON_STRING: return string(p, &node->str, &node->str_len);
  case JSON_TRUE: return literal(p, "true");
  case JSON_FALSE: return literal(p, "false");
  case JSON_NULL: return literal(p, "null");
  default: return number(p, &node->num);
  }
}

int json_parse(json_doc_t *doc, const char *text, size_t len) {
  *doc = (json_doc_t){0};
  if (!text) {
    snprintf(doc->error, sizeof doc->error, "no document");
    return -1;
  }
  doc->strings = malloc(len + 1);
  if (!doc->strings) {
    snprintf(doc->error, sizeof doc->error, "out of memory");
    return -1;
  }
  parser_t p = {.doc = doc, .text = text, .len = len};
  long root;
  if (value(&p, 0, &root) != 0)
    return -1;
  skip_space(&p);
  if (p.pos != len)
    return fail(&p, "text after the document");
  return 0;
}

void json_doc_free(json_doc_t *doc) {
  if (!doc)
    return;
  free(doc->nodes);
  free(doc->strings);
  *doc = (json_doc_t){0};
}

/* ---- reading the nodes -------------------------------------------------------------------- */

const json_node_t *json_root(const json_doc_t *doc) {
  return doc && doc->n ? &doc->nodes[0] : NULL;
}

const json_node_t *json_first(const json_doc_t *doc, const json_node_t *node) {
  if (!doc || !node || (node->type != JSON_ARRAY && node->type != JSON_OBJECT) || !node->count)
    return NULL;
  return &doc->nodes[node->child];
}

const json_node_t *json_next(const json_doc_t *doc, const json_node_t *node) {
  return doc && node && node->next ? &doc->nodes[node->next] : NULL;
}

const json_node_t *json_get(const json_doc_t *doc, const json_node_t *obj, const char *key) {
  if (!obj || obj->type != JSON_OBJECT || !key)
    return NULL;
  size_t len = strlen(key);
  for (const json_node_t *m = json_first(doc, obj); m; m = json_next(doc, m))
    if (m->key_len == len && !memcmp(m->key, key, len))
      return m;
  return NULL;
}

bool json_is_string(const json_node_t *node, const char *s) {
  return node && node->type == JSON_STRING && s && node->str_len == strlen(s) &&
         !memcmp(node->str, s, node->str_len);
}

/* ---- writing ------------------------------------------------------------------------------ */

void json_put_string(FILE *f, const char *s, size_t len) {
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\')
      fprintf(f, "\\%c", ch);
    else if (ch < 0x20)
      fprintf(f, "\\u%04x", ch);
    else
      fputc(ch, f);
  }
  fputc('"', f);
}

void json_put_float(FILE *f, float v) { fprintf(f, "%.9g", (double)v); }
