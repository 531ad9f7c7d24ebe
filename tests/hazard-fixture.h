#ifndef CUVT_HAZARD_FIXTURE_H
#define CUVT_HAZARD_FIXTURE_H

/* The fixture of the cross-stream hazard scenarios (tests/hazards/hazards.c,
 * tests/hazards/hazards-multi.c): two streams, a queue, three buffers of N floats (src, buf, out)
 * and host arrays of N floats; done callbacks recorded on the draining thread, asserted on the test
 * thread. The including file defines N first. Header-only: each scenario is its own executable. */
#include <stdlib.h>

#include "counted.h"

typedef struct fixture {
  cuv_stream_t *a, *b;
  cuv_queue_t *q;
  cuv_buffer_t *src, *buf, *out;
  float *data, *plus_one, *got;
} fixture_t;

static inline int setup(void **state) {
  fixture_t *f = calloc(1, sizeof *f);
  if (!f || cuv_stream_create(&f->a, cuvt_device()) || cuv_stream_create(&f->b, cuvt_device()) ||
      cuv_queue_create(&f->q, NULL, NULL))
    return -1;
  f->src = cuvt_buffer(N * sizeof(float));
  f->buf = cuvt_buffer(N * sizeof(float));
  f->out = cuvt_buffer(N * sizeof(float));
  f->data = malloc(N * sizeof(float));
  f->plus_one = malloc(N * sizeof(float));
  f->got = malloc(N * sizeof(float));
  *state = f;
  return f->data && f->plus_one && f->got ? 0 : -1;
}

static inline int teardown(void **state) {
  fixture_t *f = *state;
  cuv_stream_synchronize(f->a); /* reaps cuv_enqueue_on work */
  cuv_stream_synchronize(f->b);
  cuv_buffer_unref(f->src);
  cuv_buffer_unref(f->buf);
  cuv_buffer_unref(f->out);
  cuv_stream_destroy(f->a);
  cuv_stream_destroy(f->b);
  int rc = cuv_queue_destroy(f->q);
  free(f->data);
  free(f->plus_one);
  free(f->got);
  free(f);
  return rc;
}

/* dst = src, after `ms` milliseconds on the executing stream. */
static inline cuv_op_t *slow_copy(cuv_buffer_t *dst, cuv_buffer_t *src, unsigned ms) {
  return cuv_seq(cuvt_sleep(ms), cuvt_copy_f32(dst, src, N));
}

typedef struct done_rec {
  atomic_int calls;
  int status;
} done_rec_t;

static inline void record_done(int status, cuv_output_t *output, void *arg) {
  (void)output;
  done_rec_t *d = arg;
  d->status = status;
  atomic_fetch_add(&d->calls, 1);
}

/* cuv_submit of op on `stream` into the fixture's queue; the callback fills *rec. */
static inline void submit_on(fixture_t *f, cuv_stream_t *stream, cuv_op_t *op, done_rec_t *rec) {
  cuv_submit_opts_t opts = {.stream = stream};
  assert_cuv_ok(cuv_submit(f->q, op, record_done, rec, &opts));
}

#endif
