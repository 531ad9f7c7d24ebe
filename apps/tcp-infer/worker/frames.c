/* tcp-infer --isolate: frame encoding and the incremental frame reader (frames.h). */
#include <stdlib.h>
#include <string.h>

#include "frames.h"
#include "mlp.h"

#define READER_MIN_CAP (128u << 10)

size_t frame_request_payload(uint32_t rows) {
  return rows == FRAME_ROWS_HANG ? 0 : (size_t)rows * MLP_IN * sizeof(float);
}

size_t frame_reply_payload(int32_t status, uint32_t rows) {
  if (rows == FRAME_ROWS_STATS)
    return FRAME_STATS_BYTES;
  return status == 0 ? (size_t)rows * MLP_OUT * sizeof(float) : 0;
}

void frame_request_head(char *out, uint64_t id, uint32_t rows, uint32_t priority,
                        uint64_t deadline) {
  if (!out)
    return;
  memcpy(out, &id, 8);
  memcpy(out + 8, &rows, 4);
  memcpy(out + 12, &priority, 4);
  memcpy(out + 16, &deadline, 8);
}

void frame_reply_head(char *out, uint64_t id, int32_t status, uint32_t rows) {
  if (!out)
    return;
  memcpy(out, &id, 8);
  memcpy(out + 8, &status, 4);
  memcpy(out + 12, &rows, 4);
}

int frame_reader_init(frame_reader_t *r, bool replies, uint32_t max_rows) {
  if (!r)
    return -1;
  *r = (frame_reader_t){.replies = replies, .max_rows = max_rows};
  r->buf = malloc(READER_MIN_CAP);
  if (!r->buf)
    return -1;
  r->cap = READER_MIN_CAP;
  return 0;
}

void frame_reader_free(frame_reader_t *r) {
  if (!r)
    return;
  free(r->buf);
  *r = (frame_reader_t){0};
}

int frame_reader_space(frame_reader_t *r, size_t min, char **base, size_t *len) {
  if (!r || !r->buf || !base || !len)
    return -1;
  if (r->pos) { /* drop what was consumed: the unread tail moves to the front */
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->len -= r->pos;
    r->pos = 0;
  }
  if (r->cap - r->len < min) {
    size_t cap = r->cap;
    while (cap - r->len < min)
      cap *= 2;
    char *p = realloc(r->buf, cap);
    if (!p)
      return -1;
    r->buf = p;
    r->cap = cap;
  }
  *base = r->buf + r->len;
  *len = r->cap - r->len;
  return 0;
}

void frame_reader_fill(frame_reader_t *r, size_t n) {
  if (r && n <= r->cap - r->len)
    r->len += n;
}

int frame_next(frame_reader_t *r, frame_t *f) {
  if (!r || !f)
    return -1;
  size_t avail = r->len - r->pos, head = r->replies ? FRAME_REPLY_HEAD : FRAME_REQUEST_HEAD;
  if (avail < head)
    return 0;
  const char *p = r->buf + r->pos;
  *f = (frame_t){0};
  memcpy(&f->id, p, 8);
  if (r->replies) {
    memcpy(&f->status, p + 8, 4);
    memcpy(&f->rows, p + 12, 4);
  } else {
    memcpy(&f->rows, p + 8, 4);
    memcpy(&f->priority, p + 12, 4);
    memcpy(&f->deadline, p + 16, 8);
  }
  bool mark = r->replies ? f->rows == FRAME_ROWS_STATS && f->id == FRAME_CONTROL_ID
                         : f->rows == FRAME_ROWS_HANG;
  if (f->rows > r->max_rows && !mark)
    return -1;
  f->payload_len = r->replies ? frame_reply_payload(f->status, f->rows)
                              : frame_request_payload(f->rows);
  if (avail < head + f->payload_len)
    return 0;
  f->payload = p + head;
  r->pos += head + f->payload_len;
  return 1;
}
