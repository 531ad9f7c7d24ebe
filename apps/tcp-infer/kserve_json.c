/* tcp-infer: JSON read by jansson with the protocol's depth bound, and the writer's escaping
 * (kserve_json.h).
 *
 * jansson's flags, each a choice about what a request may say:
 *   JSON_REJECT_DUPLICATES   an object that names a key twice is refused: which "inputs" of two
 *                            counts would be the reader's whim (jansson alone keeps the last),
 *                            and a request that says two things is better refused than guessed
 *   JSON_DECODE_ANY          any value at the top, so that a valid document that is no object
 *                            gets kserve.c's own reason, and a lone number or string reads back
 *   JSON_DECODE_INT_AS_REAL  JSON has one kind of number: every one a double, so that 1e20
 *                            written in digits is a number (not jansson's "too big integer")
 *                            and a shape's 2.0 is the integer it equals, as kserve.c checks
 * and those left off: JSON_ALLOW_NUL (a \u0000 is refused: ids and names are C strings to the
 * server, which a NUL would cut short), JSON_DISABLE_EOF_CHECK (text after the document is
 * refused: binary rows sent without Inference-Header-Content-Length stay a 400). jansson is
 * strict otherwise: the grammar's numbers, no NaN or Infinity, no comments or trailing commas,
 * valid escapes, strings of valid UTF-8.
 *
 * jansson bounds its own recursion (2048) but has no depth option: json_read walks the tree it
 * built and refuses one deeper than JSON_MAX_DEPTH. */
#include <stdarg.h>
#include <string.h>

#include "kserve_json.h"

#define READ_FLAGS (JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL)

static bool within_depth(json_t *v, unsigned left);

/* Whether e, a child of a value with `left` levels below it allowed, fits. */
static bool child_within(json_t *e, unsigned left) {
  return left && ((!json_is_array(e) && !json_is_object(e)) || within_depth(e, left - 1));
}

/* Whether nothing under v lies more than `left` levels below it. */
static bool within_depth(json_t *v, unsigned left) {
  size_t i;
  const char *key;
  json_t *e;
  if (json_is_array(v)) {
    json_array_foreach(v, i, e) {
      if (!child_within(e, left))
        return false;
    }
  } else if (json_is_object(v)) {
    json_object_foreach(v, key, e) {
      if (!child_within(e, left))
        return false;
    }
  }
  return true;
}

/* why, when the caller passed one: the reason a document was refused. */
__attribute__((format(printf, 2, 3))) static json_t *refuse(char *why, const char *fmt, ...) {
  if (why) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, JSON_WHY_LEN, fmt, ap);
    va_end(ap);
  }
  return NULL;
}

json_t *json_read(const char *text, size_t len, char why[JSON_WHY_LEN]) {
  if (!text)
    return refuse(why, "no document");
  json_error_t error;
  json_t *root = json_loadb(text, len, READ_FLAGS, &error);
  if (!root)
    return refuse(why, "%s at byte %d", error.text, error.position);
  if (!within_depth(root, JSON_MAX_DEPTH)) {
    json_decref(root);
    return refuse(why, "nested deeper than %d", JSON_MAX_DEPTH);
  }
  return root;
}

bool json_string_is(const json_t *v, const char *s) {
  return json_is_string(v) && s && json_string_length(v) == strlen(s) &&
         !memcmp(json_string_value(v), s, json_string_length(v));
}

/* ---- writing ------------------------------------------------------------------------------ */

/* The bytes of the UTF-8 sequence at s (RFC 3629: no overlong form, no surrogate, nothing past
 * U+10FFFF), or 0 when it is none; s[0] >= 0x80, `left` bytes there. */
static size_t utf8_sequence(const unsigned char *s, size_t left) {
  size_t n = s[0] >= 0xc2 && s[0] <= 0xdf ? 2 : s[0] >= 0xe0 && s[0] <= 0xef ? 3
             : s[0] >= 0xf0 && s[0] <= 0xf4                                ? 4
                                                                            : 0;
  if (!n || n > left)
    return 0;
  for (size_t i = 1; i < n; i++)
    if ((s[i] & 0xc0) != 0x80)
      return 0;
  /* the second byte's range where the first allows an overlong form, a surrogate or too much */
  if ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] > 0x9f) ||
      (s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] > 0x8f))
    return 0;
  return n;
}

void json_put_string(FILE *f, const char *s, size_t len) {
  fputc('"', f);
  for (size_t i = 0; i < len; i++) {
    unsigned char ch = (unsigned char)s[i];
    size_t n;
    if (ch == '"' || ch == '\\') {
      fprintf(f, "\\%c", ch);
    } else if (ch < 0x20) {
      fprintf(f, "\\u%04x", ch);
    } else if (ch < 0x80) {
      fputc(ch, f);
    } else if ((n = utf8_sequence((const unsigned char *)s + i, len - i)) != 0) {
      fwrite(s + i, 1, n, f);
      i += n - 1;
    } else {
      fputs("\\ufffd", f); /* not UTF-8: the replacement character, so the text stays JSON */
    }
  }
  fputc('"', f);
}

void json_put_float(FILE *f, float v) { fprintf(f, "%.9g", (double)v); }
