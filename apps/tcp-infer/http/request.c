/* tcp-infer: a request's response, set by whichever layer answers it (route.c, kserve.c, conn.c)
 * and serialized by conn.c once its turn comes. */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

request_t *request_alloc(size_t size, size_t priv) {
  if (size < sizeof(request_t))
    return NULL;
  size_t align = alignof(max_align_t), at = (size + align - 1) / align * align;
  if (priv > SIZE_MAX - at)
    return NULL;
  request_t *req = calloc(1, at + priv);
  if (req && priv)
    req->priv = (char *)req + at;
  return req;
}

void respond_text(request_t *req, unsigned status, const char *content_type, char *text) {
  if (!req) {
    free(text);
    return;
  }
  req->status = status;
  req->content_type = content_type;
  req->text = text;
  req->text_len = text ? strlen(text) : 0;
  req->state = REQ_READY;
}

void respond_error(request_t *req, unsigned status, const char *message) {
  if (!message)
    message = status >= 500 ? "internal error" : "bad request";
  size_t len = strlen(message) + 2;
  char *text = malloc(len);
  if (text)
    snprintf(text, len, "%s\n", message);
  respond_text(req, status, "text/plain; charset=utf-8", text);
}
