/* tcp-infer: JSON (RFC 8259) for the KServe v2 protocol (kserve.c) and the clients that check it.
 *
 * json_parse reads a whole document into an array of nodes: strictly (no comments, no trailing
 * commas, numbers as the grammar spells them, strings valid escapes), nesting at most
 * JSON_MAX_DEPTH deep. Strings are decoded (escapes, \u pairs to UTF-8) into the document's own
 * storage and NUL-terminated. A document owns everything it points to; json_doc_free frees it.
 *
 * Writing is plain stdio: json_put_string escapes a string as JSON needs, json_put_float writes
 * a float32 with the digits that read back to the same value. */
#ifndef TCP_INFER_JSON_H
#define TCP_INFER_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

typedef enum {
  JSON_NULL,
  JSON_FALSE,
  JSON_TRUE,
  JSON_NUMBER,
  JSON_STRING,
  JSON_ARRAY,
  JSON_OBJECT
} json_type_t;

/* One value. Arrays and objects link their elements (members) through child and next; an
 * object member's key is on the member's node. Index 0 is the root: as a link, it means none. */
typedef struct json_node {
  json_type_t type;
  unsigned child, next, count; /* first element or member; next sibling; how many elements */
  const char *key, *str;       /* a member's key; a string's value (decoded, NUL-terminated) */
  size_t key_len, str_len;
  double num;
} json_node_t;

typedef struct json_doc {
  json_node_t *nodes;
  unsigned n, cap;
  char *strings; /* decoded keys and strings */
  size_t strings_len;
  char error[96]; /* why json_parse failed, and where */
} json_doc_t;

/* 0, or -1 with doc->error set (malformed, too deep, out of memory). Free the doc either way. */
int json_parse(json_doc_t *doc, const char *text, size_t len);
void json_doc_free(json_doc_t *doc);

/* The document's root value (after a successful parse). */
const json_node_t *json_root(const json_doc_t *doc);
/* An object's member of that key; NULL when obj is not an object or has none. */
const json_node_t *json_get(const json_doc_t *doc, const json_node_t *obj, const char *key);
/* An array's first element or an object's first member, and the next sibling; NULL: none. */
const json_node_t *json_first(const json_doc_t *doc, const json_node_t *node);
const json_node_t *json_next(const json_doc_t *doc, const json_node_t *node);
/* Whether node is a string equal to s. */
bool json_is_string(const json_node_t *node, const char *s);

/* "s" with what JSON escapes escaped (quotes, backslash, control characters). */
void json_put_string(FILE *f, const char *s, size_t len);
/* A float32's shortest text that reads back exactly (%.9g; finite values only). */
void json_put_float(FILE *f, float v);

#endif
