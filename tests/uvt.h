#ifndef CUVT_UVT_H
#define CUVT_UVT_H

/* Helpers of the libuv bridge scenarios (uv-*.c): a loop with a bridge, per-submission records
 * the callbacks fill in, and op builders. Callbacks run inside uv_run on the test thread but
 * inside cuv's drain: they only record; the test asserts after uv_run returned. Header-only
 * (static inline), so each scenario stays one file. */

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <cuv/uv.h>

#include "common.h"

/* ---- a loop and its bridge ---- */

typedef struct uvt_loop {
  uv_loop_t loop;
  cuv_uv_t *bridge;
  uv_thread_t thread; /* the loop's thread: the test thread */
  int close_calls;
  uint64_t close_seq; /* uvt_seq() when close_cb ran */
} uvt_loop_t;

/* A global order of events (callbacks, close_cb), to prove what ran before what. */
static inline uint64_t uvt_seq(void) {
  static atomic_uint_fast64_t seq;
  return atomic_fetch_add(&seq, 1) + 1;
}

static inline void uvt_open(uvt_loop_t *l) {
  memset(l, 0, sizeof *l);
  assert_int_equal(uv_loop_init(&l->loop), 0);
  assert_cuv_ok(cuv_uv_open(&l->bridge, &l->loop));
  assert_ptr_equal(cuv_uv_loop(l->bridge), &l->loop);
  l->thread = uv_thread_self();
}

static inline void uvt_on_close(cuv_uv_t *bridge, void *arg) {
  uvt_loop_t *l = arg;
  if (bridge == l->bridge) {
    l->close_calls++;
    l->close_seq = uvt_seq();
  }
}

/* Closes the bridge, runs the loop until it is gone, and proves no handle leaked. */
static inline void uvt_close(uvt_loop_t *l) {
  assert_cuv_ok(cuv_uv_close(l->bridge, uvt_on_close, l));
  assert_int_equal(uv_run(&l->loop, UV_RUN_DEFAULT), 0);
  assert_int_equal(l->close_calls, 1);
  assert_int_equal(uv_loop_close(&l->loop), 0);
}

/* ---- what a callback saw ---- */

typedef struct uvt_call {
  int calls;           /* must end at exactly 1 */
  int status;
  bool on_loop_thread;
  uint64_t seq;        /* uvt_seq() when it ran */
  int payload;         /* uvt_value's payload, or the first word of a download */
  cuv_output_t out;    /* taken from the callback: a download's bytes (uvt_release_outputs) */
  uvt_loop_t *loop;
} uvt_call_t;

/* The done callback of every scenario: records, takes the output's data when it has any. */
static inline void uvt_done(int status, cuv_output_t *output, void *arg) {
  uvt_call_t *c = arg;
  uv_thread_t self = uv_thread_self();
  c->calls++;
  c->status = status;
  c->on_loop_thread = c->loop && uv_thread_equal(&self, &c->loop->thread);
  c->seq = uvt_seq();
  if (status == 0 && output->data) {
    c->out = cuv_output_take(output);
    memcpy(&c->payload, c->out.data, sizeof c->payload);
  }
}

/* Every record: called exactly once, on the loop thread, with status 0. */
static inline void uvt_assert_all_ok(const uvt_call_t *calls, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (calls[i].calls != 1 || calls[i].status != 0 || !calls[i].on_loop_thread)
      print_error("call %zu: %d calls, status %d (%s), on loop thread %d\n", i, calls[i].calls,
                  calls[i].status, cuv_err_name(calls[i].status), calls[i].on_loop_thread);
    assert_int_equal(calls[i].calls, 1);
    assert_int_equal(calls[i].status, 0);
    assert_true(calls[i].on_loop_thread);
  }
}

static inline void uvt_release_outputs(uvt_call_t *calls, size_t n) {
  for (size_t i = 0; i < n; i++)
    cuv_output_release(&calls[i].out);
}

/* ---- ops ---- */

/* cuv_value of an int (malloc'd, released with free). */
static inline cuv_op_t *uvt_value(int payload) {
  int *v = malloc(sizeof *v);
  if (!v)
    abort();
  *v = payload;
  return cuv_value(v, free);
}

static inline cuv_buffer_t *uvt_buffer(size_t bytes) {
  cuv_buffer_t *buf = NULL;
  assert_cuv_ok(cuv_buffer_create(&buf, cuvt_device(), bytes));
  return buf;
}

static inline cuv_op_t *uvt_empty_kernel(void) {
  return cuv_launch(cuvt_kernel("empty_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0);
}

/* sleep_then_write: busy for `ms` milliseconds, then writes `value` to buf[0]; then downloads
 * buf[0], so the callback's payload proves the kernel had finished. */
static inline cuv_op_t *uvt_slow_write_then_read(unsigned ms, unsigned value, cuv_buffer_t *buf) {
  unsigned long long ns = (unsigned long long)ms * 1000000ull;
  cuv_arg_t args[] = {CUV_ARG_VALUE(ns), CUV_ARG_VALUE(value), CUV_ARG_WRITE(buf)};
  cuv_op_t *launch = cuv_launch(cuvt_kernel("sleep_then_write"), CUV_DIM1(1), CUV_DIM1(1), 0,
                                args, 3);
  return cuv_seq(launch, cuv_download(buf, 0, sizeof(unsigned)));
}

/* ---- statistics ---- */

/* after - before, field by field. */
static inline cuv_stats_t uvt_stats_delta(const cuv_stats_t *before) {
  cuv_stats_t now;
  cuv_stats(&now);
  cuv_stats_t d = now;
  d.submitted -= before->submitted;
  d.completed -= before->completed;
  d.completed_spin -= before->completed_spin;
  d.completed_reactor -= before->completed_reactor;
  d.completed_polled -= before->completed_polled;
  d.completed_hostfn -= before->completed_hostfn;
  d.completed_sync -= before->completed_sync;
  d.completed_event -= before->completed_event;
  d.fallbacks -= before->fallbacks;
  d.faults -= before->faults;
  return d;
}

#endif
