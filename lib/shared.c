/* shared: an execute-once op with clones. The first clone executed runs the op on its own
 * stream and records an event behind it; every other clone waits until that has been enqueued
 * (not completed) and, when it runs on another stream, makes its stream wait on the event. All
 * clones output a view of the one value, which lives until the handle and every view are gone. */
#include "internal.h"
#include "queue.h"

enum { SHARED_IDLE, SHARED_RUNNING, SHARED_DONE };

struct cuv_shared_s {
  atomic_int refs;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int state;
  pthread_t producer;   /* the thread running the op, to refuse a clone of itself inside it */
  cuv_op_t *op;
  int status;
  cuv_output_t value;
  cuv_stream_t *stream; /* where the op ran */
  cuv_device_t *dev;
  CUevent event;        /* recorded on stream behind the op's work */
  atomic_uint runs;
  int device;           /* the op's device and devices, every clone's */
  uint64_t devices;
  unsigned char host;   /* the op's CUV__OP_* */
  bool failed;          /* one of the static shared ops below: no references, no state */
};

/* What cuv_shared returns when it cannot make a shared op (no op, no memory): never NULL, but a
 * handle whose clones fail with the status, like an error op; releasing it does nothing. */
static cuv_shared_t shared_einval = {.status = CUV_EINVAL, .state = SHARED_DONE, .device = -1,
                                     .failed = true};
static cuv_shared_t shared_enomem = {.status = CUV_ENOMEM, .state = SHARED_DONE, .device = -1,
                                     .failed = true};

static cuv_shared_t *shared_ref(cuv_shared_t *sh) {
  atomic_fetch_add(&sh->refs, 1);
  return sh;
}

static void shared_unref(void *arg) {
  cuv_shared_t *sh = arg;
  if (atomic_fetch_sub(&sh->refs, 1) != 1)
    return;
  cuv__op_drop(sh->op);
  cuv_output_release(&sh->value);
  if (sh->event)
    cuv__event_put(sh->dev, sh->event);
  if (sh->stream)
    cuv__stream_unref(sh->stream);
  if (sh->dev)
    cuv__device_unref(sh->dev);
  pthread_cond_destroy(&sh->cond);
  pthread_mutex_destroy(&sh->lock);
  free(sh);
}

/* Runs the op as the producer; its resources are held by the producer's submission. Its
 * callbacks make the value every clone waits for: a cancel of the producer's submission refuses
 * none of them (lib/queue.c). */
static int produce(cuv_shared_t *sh, cuv__exec_t *ex) {
  cuv_op_t *op = sh->op;
  sh->op = NULL;
  ex->sub->producing++;
  int rc = cuv__op_execute(op, ex, &sh->value);
  ex->sub->producing--;
  atomic_fetch_add(&sh->runs, 1);
  if (rc == 0)
    rc = cuv__event_get(ex->stream->dev, &sh->event);
  if (rc == 0) {
    sh->dev = cuv__device_ref(ex->stream->dev);
    rc = cuv__cu(cuv__drv.cuEventRecord(sh->event, ex->stream->cu));
  }
  if (rc == 0)
    sh->stream = cuv__stream_ref(ex->stream);
  return rc;
}

/* Runs the op once; returns its status for every clone. */
static int shared_resolve(cuv_shared_t *sh, cuv__exec_t *ex) {
  pthread_mutex_lock(&sh->lock);
  if (sh->state == SHARED_IDLE) {
    sh->state = SHARED_RUNNING;
    sh->producer = pthread_self();
    pthread_mutex_unlock(&sh->lock);
    int rc = produce(sh, ex);
    pthread_mutex_lock(&sh->lock);
    sh->status = rc;
    sh->state = SHARED_DONE;
    pthread_cond_broadcast(&sh->cond);
  } else if (sh->state == SHARED_RUNNING && pthread_equal(sh->producer, pthread_self())) {
    pthread_mutex_unlock(&sh->lock);
    return CUV_EREENTRANT; /* a clone inside its own producer would wait for itself */
  }
  while (sh->state != SHARED_DONE)
    pthread_cond_wait(&sh->cond, &sh->lock);
  int status = sh->status;
  pthread_mutex_unlock(&sh->lock);
  return status;
}

typedef struct clone_op {
  struct cuv_op_s op;
  cuv_shared_t *shared;
} clone_op_t;

static void clone_drop(cuv_op_t *op) { shared_unref(((clone_op_t *)op)->shared); }

/* A view of the value. A buffer is its own reference counted view, so a clone's output is a buffer
 * to cuv_output_buffer (a launch's op argument takes it); other values live in the shared state. */
static cuv_output_t clone_output(cuv_shared_t *sh) {
  cuv_buffer_t *buf = cuv_output_buffer(&sh->value);
  if (buf)
    return cuv__output(cuv_buffer_ref(buf), cuv__buffer_release, buf);
  return cuv__output(sh->value.data, shared_unref, shared_ref(sh));
}

static int clone_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  cuv_shared_t *sh = ((clone_op_t *)op)->shared;
  /* A cancelled submission neither produces the value (another clone's will) nor waits for it;
   * one cancelled while it does gets its done once that is over. */
  int rc = cuv__queue_call_begin(ex->sub);
  if (rc == 0) {
    rc = shared_resolve(sh, ex);
    cuv__queue_call_end(ex->sub);
  }
  if (rc == 0 && sh->stream != ex->stream) {
    rc = cuv__cu(cuv__drv.cuStreamWaitEvent(ex->stream->cu, sh->event, 0));
    if (rc == 0)
      CUV__STAT_ADD(waits_inserted, 1);
  }
  /* The submission holds the shared state (and so the value and the event) to completion. */
  if (rc == 0 && (rc = cuv__sub_hold(ex->sub, shared_unref, shared_ref(sh))) < 0)
    shared_unref(sh);
  if (rc == 0)
    *out = clone_output(sh);
  if (sh->host & CUV__OP_LANDS)
    ex->landing = true; /* this stream waited for the producer's copy, or made it */
  shared_unref(sh); /* the clone's own reference */
  return rc;
}

static const cuv__op_vt_t clone_vt = {"shared_clone", clone_execute, clone_drop,
                                     NULL /* runs, or waits for, another submission */};

CUV_EXTERN cuv_shared_t *cuv_shared(cuv_op_t *op) {
  if (!op)
    return &shared_einval;
  cuv_shared_t *sh = calloc(1, sizeof *sh);
  if (!sh) {
    cuv_op_destroy(op);
    return &shared_enomem;
  }
  int taken = cuv__op_take(op); /* refused: a shared that fails with CUV_ECONSUMED */
  atomic_init(&sh->refs, 1);
  pthread_mutex_init(&sh->lock, NULL);
  pthread_cond_init(&sh->cond, NULL);
  sh->device = op->device;
  sh->devices = op->devices;
  sh->host = op->host;
  if (taken < 0) {
    sh->status = taken;
    sh->state = SHARED_DONE;
  } else if (op->error) {
    sh->status = op->error;
    sh->state = SHARED_DONE;
    cuv__op_drop(op);
  } else {
    sh->op = op;
  }
  return sh;
}

CUV_EXTERN cuv_op_t *cuv_shared_clone(cuv_shared_t *sh) {
  if (!sh)
    return cuv__op_fail(CUV_EINVAL);
  if (sh->failed)
    return cuv__op_fail(sh->status);
  clone_op_t *c = (clone_op_t *)cuv__op_new(&clone_vt, sizeof *c);
  if (!c)
    return cuv__op_fail(CUV_ENOMEM);
  c->shared = shared_ref(sh);
  c->op.device = sh->device;
  c->op.devices = sh->devices;
  c->op.host = sh->host;
  return &c->op;
}

CUV_EXTERN cuv_shared_t *cuv_shared_ref(cuv_shared_t *sh) {
  return sh && !sh->failed ? shared_ref(sh) : sh;
}

CUV_EXTERN void cuv_shared_unref(cuv_shared_t *sh) {
  if (sh && !sh->failed)
    shared_unref(sh);
}

CUV_EXTERN unsigned cuv_shared_runs(const cuv_shared_t *sh) {
  return sh ? atomic_load(&((cuv_shared_t *)sh)->runs) : 0;
}
