/* libcuv-uv: cuv completions delivered into a libuv loop (include/cuv/uv.h), in the manner of
 * hiredis' adapters/libuv.h: the queue (lib/queue.c) counts, times and delivers the work, and one
 * call, cuv_queue_poll, says whether the loop polls on its next turn (the idle handle, active)
 * or blocks in epoll (the async handle, sent by the queue's notify hook, wakes it). The check
 * handle learns of other threads' work at the end of each turn; a uv_work_t waits out a close.
 * Why each handle, the threads, the walk and the close: docs/libuv.md. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuv/uv.h>

#define CLOSE_WAIT_MS 5 /* how often the closing wait looks whether the loop drained it all */
/* Time per turn for callbacks: about 0.1 ms (bench/RESULTS.md, cuv-node: an undivided drain held
 * Node's loop for milliseconds); the rest waits for the loop's next turn. */
#define TURN_BUDGET_NS 100000u

struct cuv_uv_s {
  uv_loop_t *loop;
  uv_thread_t loop_thread;
  cuv_queue_t *queue; /* set by cuv_uv_open, destroyed just before the bridge is freed */
  uv_async_t async;
  uv_idle_t idle;
  uv_check_t check;
  uv_work_t work;
  atomic_bool polling; /* idle is active: the loop drains by itself, notify need not wake */
  bool closing;        /* cuv_uv_close was called */
  bool refd;           /* the async handle's ref state */
  bool warned;         /* the walk without cuv_uv_close was reported */
  cuv_uv_t *next_open, *prev_open; /* the process's open bridges (see report_at_exit) */
  unsigned closing_handles; /* handles the bridge closed itself whose close callback is due */
  cuv_uv_close_cb close_cb;
  void *close_arg;
  cuv_uv_turn_t turn; /* cuv_uv_set_turn's; budget_ns is never 0 */
};

static bool on_loop_thread(const cuv_uv_t *b) {
  uv_thread_t self = uv_thread_self();
  return uv_thread_equal(&self, &b->loop_thread);
}

/* Whether someone else (a uv_walk closing every handle) closed one of the bridge's handles: the
 * bridge then counts as closed, and touches no handle that is closing. Loop thread. */
static bool walked(const cuv_uv_t *b) {
  return uv_is_closing((const uv_handle_t *)&b->async) ||
         uv_is_closing((const uv_handle_t *)&b->idle) ||
         uv_is_closing((const uv_handle_t *)&b->check);
}

/* The async handle keeps the loop alive exactly while something is in flight (libuv lets only
 * the loop thread ref or unref a handle). A walked bridge stops here: closed handles keep nothing
 * alive, and its work in flight waits for cuv_uv_close. Loop thread. */
static void settle(cuv_uv_t *b) {
  if (walked(b)) {
    cuv_queue_close(b->queue);
    return;
  }
  bool want = cuv_queue_pending(b->queue) > 0;
  if (want != b->refd) {
    b->refd = want;
    (want ? uv_ref : uv_unref)((uv_handle_t *)&b->async);
  }
}

/* settle's answer after an accepted submission, without its looks: its callback is to come (it
 * runs in a drain of this thread, never inside cuv_submit), so the async handle keeps the loop
 * alive. A walk during cuv_submit (from a callback of an inline job's tree) is found by the
 * loop's next look; a ref of a closing handle keeps nothing alive. Loop thread. */
static void keep_alive(cuv_uv_t *b) {
  if (!b->refd) {
    b->refd = true;
    uv_ref((uv_handle_t *)&b->async);
  }
}

/* A uv_walk closed the handles and cuv_uv_close was not called: the loop thread has come back to
 * the bridge (a cuv_uv_submit), so it is the first moment the bridge can tell. libuv gives no
 * earlier one: uv_close runs no callback of the handle's owner for async, idle or check handles,
 * and once they are closed uv_run returns and uv_loop_close returns 0 with the work in flight.
 * Only an active request could hold the loop across a walk, and the only one that needs no fd
 * tricks, a uv_work_t, would keep a threadpool thread (libuv's pool is 4 threads by default, the
 * one Node's fs and dns share) waiting for as long as anything is in flight. So the bridge
 * reports it once, naming the fix, rather than leak silently. Loop thread. */
static void report_walk_without_close(cuv_uv_t *b) {
  if (b->closing || b->warned)
    return;
  b->warned = true;
  fprintf(stderr,
          "cuv: a uv_walk closed a libuv bridge's handles but cuv_uv_close was never called: %u "
          "callback(s) in flight wait for it; call cuv_uv_close and run the loop before "
          "uv_loop_close (docs/libuv.md)\n",
          cuv_queue_pending(b->queue));
}

/* ---- the process's open bridges: a walked one never closed is reported at exit too ---- */

static uv_once_t open_once = UV_ONCE_INIT;
static uv_mutex_t open_lock;
static atomic_bool open_ready;
static cuv_uv_t *open_bridges;

static void open_init(void) {
  if (uv_mutex_init(&open_lock) == 0)
    atomic_store(&open_ready, true);
}

static void add_open(cuv_uv_t *b) {
  uv_once(&open_once, open_init);
  if (!atomic_load(&open_ready))
    return;
  uv_mutex_lock(&open_lock);
  b->next_open = open_bridges;
  if (open_bridges)
    open_bridges->prev_open = b;
  open_bridges = b;
  uv_mutex_unlock(&open_lock);
}

static void remove_open(cuv_uv_t *b) {
  if (!atomic_load(&open_ready))
    return;
  uv_mutex_lock(&open_lock);
  if (b->prev_open)
    b->prev_open->next_open = b->next_open;
  else if (open_bridges == b)
    open_bridges = b->next_open;
  if (b->next_open)
    b->next_open->prev_open = b->prev_open;
  uv_mutex_unlock(&open_lock);
}

/* The idiom to its end (walk, uv_run, uv_loop_close, exit) never comes back to the bridge: the
 * process's exit is the last moment it can be told. Only walked bridges are reported: a program
 * may well exit with a bridge open and its loop alive. Runs before libcuv's own destructors (this
 * library, or the program that compiles the adapter in, depends on libcuv). */
__attribute__((destructor)) static void report_at_exit(void) {
  if (!atomic_load(&open_ready))
    return;
  uv_mutex_lock(&open_lock);
  for (cuv_uv_t *b = open_bridges; b; b = b->next_open)
    if (walked(b))
      report_walk_without_close(b);
  uv_mutex_unlock(&open_lock);
}

static void on_idle(uv_idle_t *handle);

static void start_polling(cuv_uv_t *b) {
  if (atomic_load(&b->polling) || uv_is_closing((uv_handle_t *)&b->idle))
    return;
  atomic_store(&b->polling, true);
  uv_idle_start(&b->idle, on_idle);
}

static void stop_polling(cuv_uv_t *b) {
  /* Cleared before the last look (a budget of 0 delivers nothing; next is 1 exactly while there
   * is something to deliver): a completion pushed after it sees polling false and sends the async
   * handle (the queue notifies under its lock, after the push); one pushed before it is left to
   * the async callback. */
  atomic_store(&b->polling, false);
  uv_idle_stop(&b->idle);
  uint64_t next = 0;
  cuv_queue_poll(b->queue, 0, &next);
  if (!uv_is_closing((uv_handle_t *)&b->async) && next == 1)
    uv_async_send(&b->async);
}

/* The turn's end after callbacks ran: the owner's `after` (cuv_uv_set_turn); true when it ran.
 * Loop thread. */
static bool ran(cuv_uv_t *b, int callbacks) {
  if (callbacks <= 0 || !b->turn.after)
    return false;
  b->turn.after(b, b->turn.arg);
  return true;
}

/* One turn's look: deliver within the budget, then poll on the next turn or block. Loop thread. */
static void look(cuv_uv_t *b, uint64_t budget_ns) {
  uint64_t next = 0;
  /* What `after` submitted (Node's Promise reactions run there) is young work of this turn: asked
   * again, or the loop would block in epoll with it in flight (tests/uv/uv-turn.c). */
  if (ran(b, cuv_queue_poll(b->queue, budget_ns, &next)))
    cuv_queue_poll(b->queue, 0, &next);
  if (next && !b->closing && !walked(b))
    start_polling(b);
  else if (atomic_load(&b->polling))
    stop_polling(b);
  settle(b);
}

static void on_turn(cuv_uv_t *b) { look(b, b->turn.budget_ns); }
static void on_idle(uv_idle_t *handle) { on_turn(handle->data); }
static void on_async(uv_async_t *handle) { on_turn(handle->data); }
/* End of a turn: other threads' work keeps the loop alive, and is polled for while young. */
static void on_check(uv_check_t *handle) { look(handle->data, 0); }

/* cuv's notify hook: runs on the completing thread, under the queue's lock. */
static void on_notify(cuv_queue_t *queue, void *arg) {
  cuv_uv_t *b = arg;
  (void)queue;
  if (!atomic_load(&b->polling))
    uv_async_send(&b->async);
}

/* ---- closing ---- */

static void find_own(uv_handle_t *handle, void *arg) {
  cuv_uv_t *b = arg;
  if (handle == (uv_handle_t *)&b->async || handle == (uv_handle_t *)&b->idle ||
      handle == (uv_handle_t *)&b->check)
    b->closing_handles++;
}

static void after_release_wait(uv_work_t *work, int status);
static void release_wait(uv_work_t *work) { (void)work; }

/* Every handle the bridge closed itself has called back. A handle a walker closed is still the
 * loop's until libuv has run its close callback (the walker's, so the bridge cannot count it):
 * uv_walk still lists it until then. The bridge is freed only when the loop lists none of its
 * handles; until then it looks again after a round through the threadpool, a request no walk
 * closes. */
static void release(cuv_uv_t *b) {
  uv_walk(b->loop, find_own, b);
  if (b->closing_handles > 0) {
    b->closing_handles = 0;
    uv_queue_work(b->loop, &b->work, release_wait, after_release_wait);
    return;
  }
  if (b->close_cb)
    b->close_cb(b, b->close_arg);
  /* After close_cb: until it ran, other threads may still call cuv_uv_submit, refused by the
   * closed queue (include/cuv/uv.h). Nothing is pending, so it cannot be busy. */
  cuv_queue_destroy(b->queue);
  remove_open(b);
  free(b);
}

static void after_release_wait(uv_work_t *work, int status) {
  (void)status;
  release(work->data);
}

static void on_closed(uv_handle_t *handle) {
  cuv_uv_t *b = handle->data;
  if (--b->closing_handles == 0)
    release(b);
}

/* Nothing in flight, nothing on the queue, never inside a drain: close the handles nobody else
 * closed. The queue is kept (see release) but closed again first: its lock, taken after pending
 * was seen at 0, waits for a notify still running (lib/queue.c notifies under that lock: a
 * refused submission counting itself out), and a closed queue with nothing pending notifies no
 * more, so no uv_async_send reaches the async handle once it is closing. */
static void finish(cuv_uv_t *b) {
  cuv_queue_close(b->queue);
  atomic_store(&b->polling, false);
  uv_handle_t *handles[] = {(uv_handle_t *)&b->async, (uv_handle_t *)&b->idle,
                            (uv_handle_t *)&b->check};
  for (int i = 0; i < 3; i++)
    if (!uv_is_closing(handles[i])) {
      b->closing_handles++;
      uv_close(handles[i], on_closed);
    }
  if (b->closing_handles == 0)
    release(b);
}

/* Threadpool: waits until something finished or nothing is left in flight (the loop may drain
 * it all first, through the async handle, without waking this wait). */
static void close_wait(uv_work_t *work) {
  cuv_uv_t *b = work->data;
  while (cuv_queue_pending(b->queue) > 0 && cuv_queue_wait(b->queue, CLOSE_WAIT_MS) != 0)
    ;
}

static void after_close_wait(uv_work_t *work, int status) {
  cuv_uv_t *b = work->data;
  (void)status;
  ran(b, cuv_queue_drain(b->queue));
  if (cuv_queue_pending(b->queue) > 0)
    uv_queue_work(b->loop, &b->work, close_wait, after_close_wait);
  else
    finish(b);
}

CUV_EXTERN int cuv_uv_close(cuv_uv_t *b, cuv_uv_close_cb close_cb, void *arg) {
  if (!b)
    return CUV_EINVAL;
  if (b->closing)
    return CUV_ECLOSED;
  b->closing = true;
  b->close_cb = close_cb;
  b->close_arg = arg;
  cuv_queue_close(b->queue);
  /* Even with nothing in flight, the close ends in a later callback, as uv_close does; and the
   * request keeps the loop alive through a walk that closes the handles meanwhile. */
  return uv_queue_work(b->loop, &b->work, close_wait, after_close_wait);
}

/* ---- opening and submitting ---- */

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
  b->turn.budget_ns = TURN_BUDGET_NS;
  b->loop_thread = uv_thread_self();
  rc = cuv_queue_create(&b->queue, on_notify, b);
  if (rc == 0 && (rc = uv_async_init(loop, &b->async, on_async)) < 0)
    cuv_queue_destroy(b->queue);
  if (rc < 0) {
    free(b);
    return rc; /* libuv's code as it is: cuv's codes are libuv's */
  }
  uv_idle_init(loop, &b->idle);   /* cannot fail */
  uv_check_init(loop, &b->check); /* cannot fail */
  b->async.data = b->idle.data = b->check.data = b->work.data = b;
  uv_check_start(&b->check, on_check);
  /* Only the async handle's reference keeps the loop alive (settle decides it). */
  uv_unref((uv_handle_t *)&b->check);
  uv_unref((uv_handle_t *)&b->idle);
  /* Referenced until the loop first looks: work other threads submit before the first uv_run
   * then keeps that run alive. The idle handle makes that first look happen without blocking. */
  b->refd = true;
  cuv_queue_poll(b->queue, 0, NULL); /* the queue times its work from here on */
  start_polling(b);
  add_open(b);
  *out = b;
  return 0;
}

CUV_EXTERN int cuv_uv_submit(cuv_uv_t *b, cuv_op_t *op, cuv_done_fn done, void *arg,
                             const cuv_submit_opts_t *opts) {
  if (!b || !done) {
    cuv_op_destroy(op);
    return CUV_EINVAL;
  }
  cuv_submit_opts_t o = opts ? *opts : (cuv_submit_opts_t){0};
  o.flags |= CUV_SUBMIT_NO_SPIN; /* the loop thread must not stall: the idle handle polls */
  if (!on_loop_thread(b)) /* the queue refuses it once the bridge is closing */
    return cuv_submit(b->queue, op, done, arg, &o);
  if (b->closing || walked(b)) {
    report_walk_without_close(b);
    cuv_queue_close(b->queue); /* walked: other threads' submissions are refused from now on */
    cuv_op_destroy(op);
    return CUV_ECLOSED;
  }
  start_polling(b); /* before: a completion during cuv_submit need not wake the loop */
  int rc = cuv_submit(b->queue, op, done, arg, &o);
  if (rc == 0)
    keep_alive(b);
  else
    settle(b);
  return rc;
}

CUV_EXTERN int cuv_uv_set_turn(cuv_uv_t *b, const cuv_uv_turn_t *turn) {
  if (!b || !turn)
    return CUV_EINVAL;
  b->turn = *turn;
  if (b->turn.budget_ns == 0)
    b->turn.budget_ns = TURN_BUDGET_NS;
  return 0;
}

CUV_EXTERN int cuv_uv_cancel(cuv_uv_t *b, cuv_ticket_t ticket) {
  return b ? cuv_cancel(b->queue, ticket) : CUV_EINVAL;
}

CUV_EXTERN unsigned cuv_uv_pending(const cuv_uv_t *b) {
  return b ? cuv_queue_pending(b->queue) : 0;
}

CUV_EXTERN uv_loop_t *cuv_uv_loop(const cuv_uv_t *b) { return b ? b->loop : NULL; }
