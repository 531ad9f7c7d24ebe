/* Submissions retain what their ops touch until completion is proven. Holds are a plain array
 * (inline for the common small case) released in reverse order, so a buffer outlives the kernel
 * op's references to it. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static void stream_in_flight_release(void *arg) {
  cuv_stream_t *stream = arg;
  atomic_fetch_sub(&stream->in_flight, 1);
  cuv__stream_unref(stream);
}

int cuv__sub_create_part(cuv__submission_t **out, cuv_stream_t *stream) {
  *out = cuv__sub_new(stream, true, 0);
  return *out ? 0 : CUV_ENOMEM;
}

/* The last user frees the block; acq_rel, so every user's writes come before the free. */
static void sub_let_go(cuv__submission_t *sub) {
  if (atomic_fetch_sub_explicit(&sub->users, 1, memory_order_acq_rel) == 1)
    cuv__pool_free(sub);
}

void cuv__sub_extra_done(cuv__submission_t *sub) { sub_let_go(sub); }

void cuv__sub_gate(cuv__submission_t *sub) { atomic_fetch_add(&sub->gates, 1); }

bool cuv__sub_gate_pass(cuv__submission_t *sub) { return atomic_fetch_sub(&sub->gates, 1) == 1; }

bool cuv__sub_gated(cuv__submission_t *sub) { return atomic_load(&sub->gates) > 1; }

void cuv__sub_fail_late(cuv__submission_t *sub, int status) {
  int none = 0;
  atomic_compare_exchange_strong(&sub->late_status, &none, status);
}

int cuv__sub_verdict(cuv__submission_t *sub, int status) {
  return status < 0 ? status : atomic_load(&sub->late_status);
}

int cuv__sub_hold(cuv__submission_t *sub, cuv_release_fn release, void *arg) {
  if (sub->n_holds == sub->cap_holds) {
    size_t cap = sub->cap_holds * 2;
    cuv__hold_t *grown = sub->holds == sub->inline_holds ? malloc(cap * sizeof *grown)
                                                         : realloc(sub->holds, cap * sizeof *grown);
    if (!grown)
      return CUV_ENOMEM;
    if (sub->holds == sub->inline_holds)
      memcpy(grown, sub->inline_holds, sub->n_holds * sizeof *grown);
    sub->holds = grown;
    sub->cap_holds = cap;
  }
  sub->holds[sub->n_holds++] = (cuv__hold_t){release, arg};
  return 0;
}

/* How far back cuv__sub_hold_unique looks: a few entries catch launches of one kernel with
 * other holds (buffer accesses) in between, and keep the look constant-time. */
#define UNIQUE_WINDOW 4

int cuv__sub_hold_unique(cuv__submission_t *sub, cuv_release_fn release, void *arg) {
  size_t stop = sub->n_holds > UNIQUE_WINDOW ? sub->n_holds - UNIQUE_WINDOW : 0;
  for (size_t i = sub->n_holds; i-- > stop;)
    if (sub->holds[i].release == release && sub->holds[i].arg == arg)
      return 1;
  return cuv__sub_hold(sub, release, arg);
}

int cuv__sub_use_stream(cuv__submission_t *sub, cuv_stream_t *stream) {
  int rc = cuv__sub_hold(sub, stream_in_flight_release, stream);
  if (rc == 0) {
    cuv__stream_ref(stream);
    atomic_fetch_add(&stream->in_flight, 1);
  }
  return rc;
}

int cuv__sub_event(cuv__submission_t *sub, cuv_device_t *dev, CUevent *event) {
  cuv__sub_event_t *grown = realloc(sub->events, (sub->n_events + 1) * sizeof *grown);
  if (!grown)
    return CUV_ENOMEM;
  sub->events = grown;
  int rc = cuv__event_get(dev, event);
  if (rc == 0) {
    /* Another device's reference outlives the holds, released before the events go back. */
    if (dev != sub->dev)
      cuv__device_ref(dev);
    sub->events[sub->n_events++] = (cuv__sub_event_t){*event, dev};
  }
  return rc;
}

/* Records that one of sub's streams waits for `producer`, of another device: one stream per
 * device, since a sticky fault is the whole context's. The device is referenced too: a default
 * policy's stream does not hold it, and the stream's last unref binds it. */
static int note_across(cuv__submission_t *sub, cuv_stream_t *producer) {
  uint64_t bit = CUV__DEVICE_BIT(producer->dev->ordinal);
  if (producer->dev == sub->dev || (sub->across_devices & bit))
    return 0;
  cuv_stream_t **grown = realloc(sub->across, (sub->n_across + 1) * sizeof *grown);
  if (!grown)
    return CUV_ENOMEM;
  sub->across = grown;
  cuv__device_ref(producer->dev);
  sub->across[sub->n_across++] = cuv__stream_ref(producer);
  sub->across_devices |= bit;
  return 0;
}

int cuv__sub_order(cuv__submission_t *sub, cuv_stream_t *producer, cuv_stream_t *waiter) {
  CUevent event;
  bool across = producer->dev != waiter->dev;
  int rc = across ? note_across(sub, producer) : 0;
  if (rc < 0)
    return rc;
  rc = cuv__sub_event(sub, producer->dev, &event);
  if (rc == 0 && across)
    rc = cuv__bind(producer->dev);
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuEventRecord(event, producer->cu));
  if (across) {
    int bound = cuv__bind(waiter->dev);
    rc = rc < 0 ? rc : bound;
  }
  if (rc == 0)
    rc = cuv__cu(cuv__drv.cuStreamWaitEvent(waiter->cu, event, 0));
  return rc;
}

int cuv__sub_record(cuv__submission_t *sub) {
  if (!sub->done_event) {
    int rc = cuv__event_get(sub->dev, &sub->done_event);
    if (rc < 0)
      return rc;
  }
  return cuv__cu(cuv__drv.cuEventRecord(sub->done_event, sub->stream->cu));
}

static void sub_free(cuv__submission_t *sub) {
  if (sub->holds != sub->inline_holds)
    free(sub->holds);
  if (sub->events) /* most submissions have none: no call */
    free(sub->events);
  for (unsigned i = 0; i < sub->n_across; i++) {
    cuv_device_t *dev = sub->across[i]->dev;
    cuv__stream_unref(sub->across[i]);
    cuv__device_unref(dev);
  }
  if (sub->across)
    free(sub->across);
  atomic_fetch_sub(&sub->stream->in_flight, 1);
  cuv__stream_unref(sub->stream);
  if (!sub->part)
    CUV__STAT_SUB(in_flight, 1);
  cuv_device_t *dev = sub->dev;
  sub_let_go(sub);
  cuv__device_unref(dev);
}

void cuv__sub_retire(cuv__submission_t *sub) {
  for (size_t i = sub->n_holds; i-- > 0;)
    if (sub->holds[i].release)
      sub->holds[i].release(sub->holds[i].arg);
  if (sub->done_event)
    cuv__event_put(sub->dev, sub->done_event);
  for (size_t i = 0; i < sub->n_events; i++) {
    cuv__event_put(sub->events[i].dev, sub->events[i].event);
    if (sub->events[i].dev != sub->dev)
      cuv__device_unref(sub->events[i].dev);
  }
  if (!sub->part)
    CUV__STAT_ADD(completed, 1);
  sub_free(sub);
}

/* LeakSanitizer's, present only in sanitized builds: a leak made on purpose is not a finding. */
extern void __lsan_ignore_object(const void *p) __attribute__((weak));

void cuv__sub_leak(cuv__submission_t *sub) {
  if (__lsan_ignore_object)
    __lsan_ignore_object(sub); /* and what it holds, reachable from it */
  static atomic_flag reported = ATOMIC_FLAG_INIT;
  if (!atomic_flag_test_and_set(&reported))
    fprintf(stderr, "cuv: a device fault left GPU work unproven; its resources are leaked on "
                    "purpose (see cuv_stats().leaked)\n");
  CUV__STAT_ADD(leaked, 1);
  /* Everything stays, the submission itself too: a host function or flag write that the dead
   * context still names may point at it. The stream's count is corrected so policies go on. */
  atomic_fetch_sub(&sub->stream->in_flight, 1);
  CUV__STAT_SUB(in_flight, 1);
}

void cuv__sub_fault(cuv__submission_t *sub) {
  CUV__STAT_ADD(faults, 1);
  cuv__sub_leak(sub);
}
