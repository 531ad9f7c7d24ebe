/* tcp-infer-frames-test: the --isolate frame reader (frames.c) against byte streams cut every
 * way: one byte at a time, several frames in one read, a frame split across reads of every size;
 * the debug requests (no payload); and malformed frames (more rows than allowed). Exit 0, or 1
 * with the first failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "frames.h"
#include "mlp.h"

#define CHECK(cond)                                                                               \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      fprintf(stderr, "frames-test.c:%d: check failed: %s\n", __LINE__, #cond);                  \
      exit(1);                                                                                    \
    }                                                                                             \
  } while (0)

/* Three replies (ready, an answer of 3 rows, an error) and their bytes. */
static size_t make_replies(char *out) {
  size_t n = 0;
  frame_reply_head(out + n, FRAME_CONTROL_ID, 0, 0);
  n += FRAME_REPLY_HEAD;
  frame_reply_head(out + n, 7, 0, 3);
  n += FRAME_REPLY_HEAD;
  for (unsigned i = 0; i < 3 * MLP_OUT; i++) {
    float v = (float)i;
    memcpy(out + n, &v, sizeof v);
    n += sizeof v;
  }
  frame_reply_head(out + n, 8, -10700, 5); /* an error: no payload whatever the rows */
  return n + FRAME_REPLY_HEAD;
}

/* Feeds `bytes` in reads of `step` bytes; checks the three frames come out whole, in order. */
static void feed(const char *bytes, size_t len, size_t step) {
  frame_reader_t r;
  CHECK(frame_reader_init(&r, true, 256) == 0);
  unsigned seen = 0;
  for (size_t off = 0; off < len; off += step) {
    char *base;
    size_t room, n = len - off < step ? len - off : step;
    CHECK(frame_reader_space(&r, n, &base, &room) == 0 && room >= n);
    memcpy(base, bytes + off, n);
    frame_reader_fill(&r, n);
    frame_t f;
    int rc;
    while ((rc = frame_next(&r, &f)) == 1) {
      if (seen == 0)
        CHECK(f.id == FRAME_CONTROL_ID && f.status == 0 && f.rows == 0 && f.payload_len == 0);
      if (seen == 1) {
        CHECK(f.id == 7 && f.status == 0 && f.rows == 3);
        CHECK(f.payload_len == 3 * MLP_OUT * sizeof(float));
        float last;
        memcpy(&last, (const char *)f.payload + f.payload_len - sizeof last, sizeof last);
        CHECK(last == (float)(3 * MLP_OUT - 1));
      }
      if (seen == 2)
        CHECK(f.id == 8 && f.status == -10700 && f.rows == 5 && f.payload_len == 0);
      seen++;
    }
    CHECK(rc == 0);
  }
  CHECK(seen == 3);
  frame_reader_free(&r);
}

static void requests_and_limits(void) {
  frame_reader_t r;
  CHECK(frame_reader_init(&r, false, 4) == 0);
  char *base;
  size_t room;
  CHECK(frame_reader_space(&r, 3 * FRAME_REQUEST_HEAD, &base, &room) == 0);
  frame_request_head(base, 1, FRAME_ROWS_FAULT, 0, 0); /* the debug fault: no payload */
  /* the debug hang: none; a schedule (level 3, a deadline of 64 bits) comes through whole */
  frame_request_head(base + FRAME_REQUEST_HEAD, 9, FRAME_ROWS_HANG, 3, UINT64_C(0x123456789a));
  frame_request_head(base + 2 * FRAME_REQUEST_HEAD, 2, 5, 0, 0); /* over the limit of 4 rows */
  frame_reader_fill(&r, 3 * FRAME_REQUEST_HEAD);
  frame_t f;
  CHECK(frame_next(&r, &f) == 1 && f.id == 1 && f.rows == 0 && f.payload_len == 0);
  CHECK(f.priority == 0 && f.deadline == 0);
  CHECK(frame_next(&r, &f) == 1 && f.id == 9 && f.rows == FRAME_ROWS_HANG && f.payload_len == 0);
  CHECK(f.priority == 3 && f.deadline == UINT64_C(0x123456789a));
  CHECK(frame_next(&r, &f) == -1);
  frame_reader_free(&r);
  /* a reply never has the hang's rows */
  CHECK(frame_reader_init(&r, true, 4) == 0);
  CHECK(frame_reader_space(&r, FRAME_REPLY_HEAD, &base, &room) == 0);
  frame_reply_head(base, 9, 0, FRAME_ROWS_HANG);
  frame_reader_fill(&r, FRAME_REPLY_HEAD);
  CHECK(frame_next(&r, &f) == -1);
  frame_reader_free(&r);
  /* a request that timed out at the worker: no payload whatever its rows */
  CHECK(frame_reader_init(&r, true, 4) == 0);
  CHECK(frame_reader_space(&r, FRAME_REPLY_HEAD, &base, &room) == 0);
  frame_reply_head(base, 4, FRAME_STATUS_TIMEOUT, 3);
  frame_reader_fill(&r, FRAME_REPLY_HEAD);
  CHECK(frame_next(&r, &f) == 1 && f.id == 4 && f.status == FRAME_STATUS_TIMEOUT && f.rows == 3 &&
        f.payload_len == 0);
  frame_reader_free(&r);
  /* a worker's report: control id, FRAME_STATS_BYTES of payload; with another id, refused */
  CHECK(frame_reader_init(&r, true, 4) == 0);
  CHECK(frame_reader_space(&r, 2 * FRAME_REPLY_HEAD + FRAME_STATS_BYTES, &base, &room) == 0);
  frame_reply_head(base, FRAME_CONTROL_ID, 0, FRAME_ROWS_STATS);
  memset(base + FRAME_REPLY_HEAD, 7, FRAME_STATS_BYTES);
  frame_reply_head(base + FRAME_REPLY_HEAD + FRAME_STATS_BYTES, 5, 0, FRAME_ROWS_STATS);
  frame_reader_fill(&r, 2 * FRAME_REPLY_HEAD + FRAME_STATS_BYTES);
  CHECK(frame_next(&r, &f) == 1 && f.id == FRAME_CONTROL_ID && f.rows == FRAME_ROWS_STATS &&
        f.payload_len == FRAME_STATS_BYTES &&
        ((const char *)f.payload)[FRAME_STATS_BYTES - 1] == 7);
  CHECK(frame_next(&r, &f) == -1);
  frame_reader_free(&r);
  /* large requests make the buffer grow */
  CHECK(frame_reader_init(&r, false, 65536) == 0);
  size_t big = FRAME_REQUEST_HEAD + frame_request_payload(4096);
  CHECK(frame_reader_space(&r, big, &base, &room) == 0 && room >= big);
  frame_request_head(base, 3, 4096, 1, 5);
  memset(base + FRAME_REQUEST_HEAD, 0, big - FRAME_REQUEST_HEAD);
  frame_reader_fill(&r, big);
  CHECK(frame_next(&r, &f) == 1 && f.id == 3 && f.payload_len == big - FRAME_REQUEST_HEAD);
  CHECK(f.priority == 1 && f.deadline == 5);
  frame_reader_free(&r);
  /* arguments */
  CHECK(frame_reader_init(NULL, false, 1) == -1 && frame_next(NULL, &f) == -1);
  CHECK(frame_reader_space(NULL, 1, &base, &room) == -1);
}

int main(int argc, char **argv) {
  cli_no_options(argc, argv, "the frame reader fed a stream cut at every size");
  static char bytes[4096];
  size_t len = make_replies(bytes);
  for (size_t step = 1; step <= len; step++)
    feed(bytes, len, step);
  requests_and_limits();
  printf("frames: ok (%zu bytes cut every way)\n", len);
  return 0;
}
