/* tcp-infer: JSON (RFC 8259) for the KServe v2 protocol (kserve.c) and the clients that check it.
 *
 * Reading is jansson's: json_read parses a whole document into jansson's tree (json_t), strictly
 * (kserve_json.c says which of jansson's flags and why), nesting at most JSON_MAX_DEPTH deep; the
 * caller walks it with jansson's own accessors and frees it with json_decref. Every number reads
 * as a real (json_number_value), strings as valid UTF-8 without NULs.
 *
 * Writing stays plain stdio, since responses are written by hand in one pass: json_put_string
 * escapes a string as JSON needs, json_put_float writes a float32 with the digits that read back
 * to the same value. */
#ifndef TCP_INFER_KSERVE_JSON_H
#define TCP_INFER_KSERVE_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The deepest a value may sit under the document's root (the root is at depth 0). */
#define JSON_MAX_DEPTH 32
/* Room for json_read's reason: jansson's text and the byte offset. */
#define JSON_WHY_LEN (JSON_ERROR_TEXT_LENGTH + 32)

/* text[0, len) as one JSON document; NULL when refused (malformed, nested too deep, out of
 * memory, no text), with the reason and the byte offset where the text went wrong in why unless
 * why is NULL. */
json_t *json_read(const char *text, size_t len, char why[JSON_WHY_LEN]);
/* Whether v is a string equal to s. */
bool json_string_is(const json_t *v, const char *s);

/* "s" with what JSON escapes escaped (quotes, backslash, control characters), and each byte that
 * begins no valid UTF-8 sequence written as U+FFFD: the text is valid JSON whatever s holds. */
void json_put_string(FILE *f, const char *s, size_t len);
/* A float32's shortest text that reads back exactly (%.9g; finite values only). */
void json_put_float(FILE *f, float v);

#endif
