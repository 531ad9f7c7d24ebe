/* libcuv-uv: cuv completions delivered into a libuv loop (include/cuv/uv.h), in the manner of
 * libuv's threadpool and hiredis' adapters/libuv.h.
 *
 * One bridge = one cuv queue + three handles on the loop:
 * - async: the queue's notify hook sends it; its callback drains the whole queue (sends coalesce);
 * - idle:  while work submitted on the loop thread is young (the spin budget, or longer when the
 *          loop's recent work took longer, see poll_window), the loop polls the completion flags
 *          (cuv_poll) and the queue itself on every iteration (an active idle handle makes uv_run poll for I/O
 *          with timeout 0, so other I/O is still served and no callback ever spins); a completion
 *          then reaches its callback without a cross-thread wake-up;
 * - check: unreferenced, runs at the end of every loop iteration: it is how the loop thread learns
 *          of work submitted by other threads before uv_run decides whether to return.
 *
 * Threads. libuv handles belong to the loop thread: only that thread refs, unrefs, starts, stops
 * and closes them. Other threads touch the bridge through `in_flight` (atomic) and, under `lock`,
 * the `closing` flag and uv_async_send; the loop thread closes the async handle only once, under
 * the same lock, it saw nothing in flight and closing set, so no thread can send to it after. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <cuv/uv.h>

struct cuv_uv_s {
  uv_loop_t *loop;
  uv_thread_t loop_thread;
  cuv_queue_t *queue;
  uv_async_t async;
  uv_idle_t idle;
  uv_check_t check;
  uv_mutex_t lock;            /* closing vs. other threads' submissions and sends */
  atomic_uint in_flight;      /* accepted (or being submitted) and whose callback has not run */
  atomic_bool polling;        /* idle is active: the loop drains by itself, notify need not wake */
  bool closing;               /* written under lock by the loop thread */
  bool finishing;             /* handles closing; set under lock */
  bool refd;                  /* the async handle's ref state (loop thread) */
  unsigned draining;          /* loop thread inside cuv_queue_drain (callbacks may close) */
  unsigned handles_open;
  uint64_t budget_ns;         /* cuv_spin_budget_us() */
  uint64_t recent_ns;         /* moving average of loop-thread work's submit-to-callback time */
  uint64_t young_until;       /* uv_hrtime() until which loop-thread work counts as young */
  uint64_t drain_ns;          /* uv_hrtime() of the drain's first callback, 0 before it */
  cuv_uv_close_cb close_cb;
  void *close_arg;
  struct call *spare_calls;  /* loop thread only: call_t's to reuse (see call_new) */
  unsigned n_spare_calls;
};

/* What cuv_submit gets as the callback's argument: the user's callback, and the bridge. */
typedef struct call {
  cuv_uv_t *bridge;
  cuv_done_fn done;
  void *arg;
  uint64_t submitted_ns; /* uv_hrtime() of a loop-thread submission when polling, else 0 */
  struct call *next;     /* in the bridge's spares */
} call_t;

/* Calls are made per submission and freed on the loop thread, where every callback runs; most
 * submissions come from the loop thread too (pipelines resubmitting from their callbacks). The
 * loop thread keeps the freed ones, up to a bound, and reuses them for its own submissions: no
 * other thread touches the list, so it takes no lock, and malloc + free (about 150 instructions
 * of the loop thread's per submission) are saved. Off under AddressSanitizer, which must see
 * every free to find a use after it. */
#define SPARE_CALLS_MAX 1024u
#if defined(__SANITIZE_ADDRESS__)
#define SPARE_CALLS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPARE_CALLS 0
#endif
#endif
#ifndef SPARE_CALLS
#define SPARE_CALLS 1
#endif

static call_t *call_new(cuv_uv_t *b, bool loop_thread) {
  call_t *call = loop_thread ? b->spare_calls : NULL;
  if (!call)
    return malloc(sizeof *call);
  b->spare_calls = call->next;
  b->n_spare_calls--;
  return call;
}

/* Loop thread only. */
static void call_free(cuv_uv_t *b, call_t *call) {
  if (!SPARE_CALLS || b->n_spare_calls >= SPARE_CALLS_MAX) {
    free(call);
    return;
  }
  call->next = b->spare_calls;
  b->spare_calls = call;
  b->n_spare_calls++;
}

static void spare_calls_free(cuv_uv_t *b) {
  while (b->spare_calls) {
    call_t *call = b->spare_calls;
    b->spare_calls = call->next;
    free(call);
  }
  b->n_spare_calls = 0;
}

/* CUV_UV_POLL_MAX_US (read once): the longest the loop polls for its work, default 1000. */
static uint64_t poll_max_ns = 1000000;
static uv_once_t poll_max_once = UV_ONCE_INIT;

static void read_poll_max(void) {
  const char *text = getenv("CUV_UV_POLL_MAX_US");
  char *end;
  unsigned long us = text && *text ? strtoul(text, &end, 10) : 0;
  if (text && *text && *end == '\0' && us <= 1000000)
    poll_max_ns = (uint64_t)us * 1000u;
}

/* How long the loop keeps polling after a loop-thread submission: the spin budget, or, when the
 * loop's recent work took longer but short enough to be caught by polling (1.5 times its moving
 * average, within CUV_UV_POLL_MAX_US), that long. Work that ends inside the window reaches its
 * callback without the cross-thread wake of a sleeping loop (about 8 us on the H200, and several
 * times that once the loop's core dozed off in a deeper idle state); longer work is left to the
 * reactor thread rather than polled for in vain. */
static uint64_t poll_window(const cuv_uv_t *b) {
  uint64_t typical = b->recent_ns + b->recent_ns / 2;
  return typical > b->budget_ns && typical <= poll_max_ns ? typical : b->budget_ns;
}

static bool on_loop_thread(const cuv_uv_t *b) {
  uv_thread_t self = uv_thread_self();
  return uv_thread_equal(&self, &b->loop_thread);
}

/* The async handle keeps the loop alive exactly while something is in flight, or until closing
 * finished. Loop thread only (uv_ref/uv_unref are not thread-safe). */
static void sync_ref(cuv_uv_t *b) {
  bool want = b->closing || atomic_load(&b->in_flight) > 0;
  if (want == b->refd)
    return;
  b->refd = want;
  if (want)
    uv_ref((uv_handle_t *)&b->async);
  else
    uv_unref((uv_handle_t *)&b->async);
}

static void drain(cuv_uv_t *b) {
  b->draining++;
  b->drain_ns = 0; /* read once, by the first callback that needs it (drain_time) */
  cuv_queue_drain(b->queue);
  b->draining--;
}

static void on_closed(uv_handle_t *handle) {
  cuv_uv_t *b = handle->data;
  if (--b->handles_open > 0)
    return;
  if (b->close_cb)
    b->close_cb(b, b->close_arg);
  spare_calls_free(b);
  uv_mutex_destroy(&b->lock);
  free(b);
}

/* Closing: once nothing is in flight (every callback ran, so the queue is drained and, by the
 * queue's contract, no notify can still be running), close the handles; the bridge is freed
 * after the last close callback. Never from inside a drain: the drain's caller comes back here. */
static void maybe_finish(cuv_uv_t *b) {
  if (!b->closing || b->finishing || b->draining)
    return;
  uv_mutex_lock(&b->lock);
  bool idle = atomic_load(&b->in_flight) == 0 && cuv_queue_pending(b->queue) == 0;
  b->finishing = idle;
  uv_mutex_unlock(&b->lock);
  if (!idle)
    return;
  atomic_store(&b->polling, false);
  cuv_queue_destroy(b->queue);
  b->queue = NULL;
  b->handles_open = 3;
  uv_close((uv_handle_t *)&b->async, on_closed);
  uv_close((uv_handle_t *)&b->idle, on_closed);
  uv_close((uv_handle_t *)&b->check, on_closed);
}

/* After callbacks ran on the loop thread: bring the reference up to date, or finish closing. */
static void settle(cuv_uv_t *b) {
  if (b->closing)
    maybe_finish(b);
  else
    sync_ref(b);
}

static void stop_polling(cuv_uv_t *b) {
  /* Cleared before the last drain: a completion pushed after that drain sees polling false and
   * sends the async handle (the queue notifies under its lock, after the push). */
  atomic_store(&b->polling, false);
  uv_idle_stop(&b->idle);
  drain(b);
}

static void on_idle(uv_idle_t *handle) {
  cuv_uv_t *b = handle->data;
  /* The loop is polling anyway: look at the completion flags itself (the inline spin of the
   * design, one look per iteration so I/O is never stalled), rather than wait for the reactor
   * thread, which may have to wake up first, to see them and hand them over. */
  cuv_poll();
  drain(b);
  if (!b->finishing &&
      (atomic_load(&b->in_flight) == 0 || uv_hrtime() >= b->young_until))
    stop_polling(b);
  if (!b->finishing)
    settle(b);
}

static void on_async(uv_async_t *handle) {
  cuv_uv_t *b = handle->data;
  drain(b);
  settle(b);
}

/* End of a loop iteration: work other threads submitted keeps the loop alive from here on. */
static void on_check(uv_check_t *handle) { settle(handle->data); }

/* cuv's notify hook: runs on the completing thread, under the queue's lock. */
static void on_notify(cuv_queue_t *queue, void *arg) {
  cuv_uv_t *b = arg;
  (void)queue;
  if (!atomic_load(&b->polling))
    uv_async_send(&b->async);
}

/* When the running drain saw its completions: one clock read per drained batch, not per
 * callback. Their submit-to-seen times are what the poll window is sized from. */
static uint64_t drain_time(cuv_uv_t *b) {
  if (!b->drain_ns)
    b->drain_ns = uv_hrtime();
  return b->drain_ns;
}

static void on_done(int status, cuv_output_t *output, void *arg) {
  call_t call = *(call_t *)arg;
  call_free(call.bridge, arg);
  if (call.submitted_ns) { /* on the loop thread, like every callback */
    uint64_t took = drain_time(call.bridge) - call.submitted_ns;
    uint64_t *recent = &call.bridge->recent_ns;
    *recent = *recent ? (*recent * 7 + took) / 8 : took;
  }
  /* Counted out before the callback runs, so cuv_uv_pending inside it excludes itself. The
   * bridge cannot finish closing during the drain that runs it (maybe_finish waits for it). */
  atomic_fetch_sub(&call.bridge->in_flight, 1);
  call.done(status, output, call.arg);
}

/* libuv's errors are negative errno values; cuv has no generic code for a failed handle. */
static int from_uv(int uv_status) { return uv_status == UV_ENOMEM ? CUV_ENOMEM : CUV_EINVAL; }

CUV_EXTERN int cuv_uv_open(cuv_uv_t **out, uv_loop_t *loop) {
  if (!out || !loop)
    return CUV_EINVAL;
  *out = NULL;
  int rc = cuv_init();
  if (rc < 0)
    return rc;
  cuv_uv_t *b = calloc(1, sizeof *b);
  if (!b)
    return CUV_ENOMEM;
  b->loop = loop;
  b->loop_thread = uv_thread_self();
  b->budget_ns = (uint64_t)cuv_spin_budget_us() * 1000u;
  uv_once(&poll_max_once, read_poll_max);
  if (uv_mutex_init(&b->lock) != 0) {
    free(b);
    return CUV_ENOMEM;
  }
  rc = cuv_queue_create(&b->queue, on_notify, b);
  if (rc < 0) {
    uv_mutex_destroy(&b->lock);
    free(b);
    return rc;
  }
  int uv_rc = uv_async_init(loop, &b->async, on_async);
  if (uv_rc < 0) {
    cuv_queue_destroy(b->queue);
    uv_mutex_destroy(&b->lock);
    free(b);
    return from_uv(uv_rc);
  }
  uv_idle_init(loop, &b->idle);   /* cannot fail */
  uv_check_init(loop, &b->check); /* cannot fail */
  b->async.data = b->idle.data = b->check.data = b;
  uv_check_start(&b->check, on_check);
  /* Only the async handle's reference keeps the loop alive (sync_ref decides it). */
  uv_unref((uv_handle_t *)&b->check);
  uv_unref((uv_handle_t *)&b->idle);
  /* Referenced until the loop first looks: work other threads submit before the first uv_run
   * then keeps that run alive. The idle handle makes that first look happen without blocking. */
  b->refd = true;
  atomic_store(&b->polling, true);
  uv_idle_start(&b->idle, on_idle);
  *out = b;
  return 0;
}

/* Counts a submission in (before cuv_submit, so a completion can never count it out first). */
static int enter(cuv_uv_t *b, bool loop_thread, uint64_t now) {
  if (loop_thread) {
    if (b->closing)
      return CUV_ECLOSED;
    atomic_fetch_add(&b->in_flight, 1);
    sync_ref(b);
    if (b->budget_ns) {
      b->young_until = now + poll_window(b);
      if (!atomic_load(&b->polling)) {
        atomic_store(&b->polling, true);
        uv_idle_start(&b->idle, on_idle);
      }
    }
    return 0;
  }
  uv_mutex_lock(&b->lock);
  int rc = b->closing ? CUV_ECLOSED : 0;
  if (rc == 0)
    atomic_fetch_add(&b->in_flight, 1);
  uv_mutex_unlock(&b->lock);
  return rc;
}

/* Counts a refused submission out again. */
static void leave(cuv_uv_t *b, bool loop_thread) {
  if (loop_thread) {
    atomic_fetch_sub(&b->in_flight, 1);
    settle(b);
    return;
  }
  /* The loop may have seen the count and referenced the bridge (or wait for it to close):
   * wake it to look again. Under the lock, so the handle cannot be closing yet. */
  uv_mutex_lock(&b->lock);
  if (atomic_fetch_sub(&b->in_flight, 1) == 1)
    uv_async_send(&b->async);
  uv_mutex_unlock(&b->lock);
}

CUV_EXTERN int cuv_uv_submit(cuv_uv_t *b, cuv_op_t *op, cuv_done_fn done, void *arg,
                             const cuv_submit_opts_t *opts) {
  if (!b || !done) {
    cuv_op_free(op);
    return CUV_EINVAL;
  }
  bool loop_thread = on_loop_thread(b);
  call_t *call = call_new(b, loop_thread);
  if (!call) {
    cuv_op_free(op);
    return CUV_ENOMEM;
  }
  /* The clock is read only where the poll window needs it (the loop thread, polling on), and
   * once for both uses. */
  uint64_t now = loop_thread && b->budget_ns ? uv_hrtime() : 0;
  *call = (call_t){b, done, arg, now, NULL};
  int rc = enter(b, loop_thread, now);
  if (rc < 0) {
    free(call);
    cuv_op_free(op);
    return rc;
  }
  cuv_submit_opts_t o = opts ? *opts : (cuv_submit_opts_t){0};
  o.flags |= CUV_SUBMIT_NO_SPIN; /* the loop thread must not stall: the idle handle polls */
  rc = cuv_submit(op, b->queue, on_done, call, &o);
  if (rc < 0) {
    free(call);
    leave(b, loop_thread);
  }
  return rc;
}

CUV_EXTERN int cuv_uv_cancel(cuv_uv_t *b, cuv_ticket_t ticket) {
  return b ? cuv_cancel(b->queue, ticket) : CUV_EINVAL;
}

CUV_EXTERN unsigned cuv_uv_pending(const cuv_uv_t *b) {
  return b ? atomic_load(&((cuv_uv_t *)b)->in_flight) : 0;
}

CUV_EXTERN uv_loop_t *cuv_uv_loop(const cuv_uv_t *b) { return b ? b->loop : NULL; }

CUV_EXTERN int cuv_uv_close(cuv_uv_t *b, cuv_uv_close_cb close_cb, void *arg) {
  if (!b)
    return CUV_EINVAL;
  if (b->closing)
    return CUV_ECLOSED;
  uv_mutex_lock(&b->lock);
  b->closing = true;
  uv_mutex_unlock(&b->lock);
  cuv_queue_close(b->queue);
  b->close_cb = close_cb;
  b->close_arg = arg;
  sync_ref(b); /* referenced until the handles are closed: the loop waits for work in flight */
  maybe_finish(b);
  return 0;
}
