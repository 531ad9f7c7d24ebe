/* tcp-infer --isolate: the frames between the front (isolate.c) and its worker process
 * (worker.c), over one socketpair (the worker's fd 3). Both ends are the same executable on the
 * same machine, so integers are in host byte order; fields are copied with memcpy, never through
 * a packed struct.
 *
 *   request (front -> worker): u64 id, u32 rows, u32 priority, u64 deadline, then rows x 64
 *                              float32 (rows x 256 bytes). rows 0 is the debug fault (POST
 *                              /debug/fault), rows FRAME_ROWS_HANG the debug hang (POST
 *                              /debug/hang): no payload. priority and deadline are the request's
 *                              KServe schedule (request_t.priority, .deadline): its level (0 the
 *                              default) and when its timeout passes (uv_hrtime, CLOCK_MONOTONIC,
 *                              one clock for every process of the machine; 0: none), the same
 *                              for every worker it is sent to.
 *   reply   (worker -> front): u64 id, i32 status, u32 rows, then rows x 16 float32 when
 *                              status is 0 (rows x 64 bytes); status is 0, a cuv error code
 *                              (negative) or FRAME_STATUS_TIMEOUT (its timeout passed while it
 *                              waited for a workspace there: it never ran).
 *                              id 0 is a control frame (rows 0): status 0 "ready" (the worker
 *                              loaded its kernels and uploaded the weights); any other status
 *                              "faulted" (its device hit a sticky fault, that status: it takes
 *                              nothing more, answers what it holds and exits; the front starts
 *                              the next worker at once instead of sending it more). id 0 with
 *                              rows FRAME_ROWS_STATS: the worker's report (report.h), status 0
 *                              and FRAME_STATS_BYTES of payload.
 *
 * A frame_reader_t takes bytes as they come (partial frames, several frames per read) and hands
 * out whole frames. */
#ifndef TCP_INFER_FRAMES_H
#define TCP_INFER_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FRAME_REQUEST_HEAD 24u /* u64 id, u32 rows, u32 priority, u64 deadline */
#define FRAME_REPLY_HEAD 16u   /* u64 id, i32 status, u32 rows */
#define FRAME_CONTROL_ID 0u
/* A reply's status: the request's timeout passed before it ran (cuv's codes are negative). */
#define FRAME_STATUS_TIMEOUT 1
/* The debug requests' rows: no payload, far from any real batch (at most 65536 rows). */
#define FRAME_ROWS_FAULT 0u
#define FRAME_ROWS_HANG UINT32_MAX
/* A worker's report (control id): its cuv_stats() and model executions, for GET /metrics. */
#define FRAME_ROWS_STATS (UINT32_MAX - 1)
#define FRAME_STATS_BYTES 512u

/* The worker's exit status after a sticky device fault (its context is dead: only a new process
 * gets a working device). Any other exit, or a signal, is a crash to the front. */
#define WORKER_EXIT_FAULT 3

typedef struct frame {
  uint64_t id;
  int32_t status; /* replies only */
  uint32_t rows;
  uint32_t priority; /* requests only: KServe's priority level (0: the default) */
  uint64_t deadline; /* requests only: when its timeout passes (uv_hrtime; 0: none) */
  const void *payload; /* inside the reader's buffer: valid until the next frame_reader_space */
  size_t payload_len;
} frame_t;

typedef struct frame_reader {
  char *buf;
  size_t len, pos, cap; /* bytes held, bytes consumed, capacity */
  bool replies;         /* the frames it reads: replies (the front) or requests (the worker) */
  uint32_t max_rows;    /* a frame with more rows is a protocol error */
} frame_reader_t;

/* 0, or -1 when out of memory. */
int frame_reader_init(frame_reader_t *r, bool replies, uint32_t max_rows);
void frame_reader_free(frame_reader_t *r);
/* Room for at least `min` more bytes at *base (*len bytes in all); then frame_reader_fill with
 * the count read. Drops the consumed bytes first, so earlier frames' payloads become invalid.
 * 0, or -1 when out of memory. */
int frame_reader_space(frame_reader_t *r, size_t min, char **base, size_t *len);
void frame_reader_fill(frame_reader_t *r, size_t n);
/* The next whole frame: 1 (and *f), 0 when more bytes are needed, -1 on a malformed frame. */
int frame_next(frame_reader_t *r, frame_t *f);

/* Headers, written into `out` (FRAME_REQUEST_HEAD / FRAME_REPLY_HEAD bytes). */
void frame_request_head(char *out, uint64_t id, uint32_t rows, uint32_t priority,
                        uint64_t deadline);
void frame_reply_head(char *out, uint64_t id, int32_t status, uint32_t rows);

/* Payload bytes of a request / a reply of `rows` rows (0 for the debug requests; a report's for
 * FRAME_ROWS_STATS). */
size_t frame_request_payload(uint32_t rows);
size_t frame_reply_payload(int32_t status, uint32_t rows);

#endif
