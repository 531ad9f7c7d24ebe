/* tcp-infer: a request's making (one allocation with its backend's state; conn.c's from a free
 * list of their loop), and its response, set by whichever layer answers it (route.c, kserve.c,
 * conn.c) and serialized by conn.c once its turn comes. */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "server.h"

/* Where the backend's state begins in a request of `size` (aligned for any type), and the
 * request's bytes in all; 0 when they do not fit a size_t. */
static size_t request_bytes(size_t size, size_t priv, size_t *at) {
  size_t align = alignof(max_align_t);
  *at = (size + align - 1) / align * align;
  return priv > SIZE_MAX - *at ? 0 : *at + priv;
}

request_t *request_alloc(size_t size, size_t priv) {
  size_t at, bytes = request_bytes(size, priv, &at);
  if (size < sizeof(request_t) || !bytes)
    return NULL;
  request_t *req = calloc(1, bytes);
  if (req && priv)
    req->priv = (char *)req + at;
  return req;
}

/* The loop's free list: glibc's calloc and free of a request cost the loop about 400
 * instructions per request (bench/tcp-infer-callgrind.sh); a memset of it costs a tenth. */
request_t *request_take(loop_t *lp) {
  if (!lp)
    return NULL;
  size_t priv = lp->backend->req_size, at, bytes = request_bytes(sizeof(request_t), priv, &at);
  request_t *req = lp->req_cache;
  if (!req)
    return request_alloc(sizeof(request_t), priv);
  lp->req_cache = req->next;
  lp->req_cached--;
  memset(req, 0, bytes);
  if (priv)
    req->priv = (char *)req + at;
  return req;
}

void request_give(loop_t *lp, request_t *req) {
  if (!lp || !req)
    return;
  if (lp->stopping || lp->req_cached >= REQUEST_CACHE_MAX) {
    free(req);
    return;
  }
  req->next = lp->req_cache;
  lp->req_cache = req;
  lp->req_cached++;
}

void requests_free(loop_t *lp) {
  if (!lp)
    return;
  while (lp->req_cache) {
    request_t *req = lp->req_cache;
    lp->req_cache = req->next;
    free(req);
  }
  lp->req_cached = 0;
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
