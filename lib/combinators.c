/* then, seq, map, zip and with_context: combinators that keep their work on the executing
 * stream. Each user callback runs between cuv__queue_call_begin and _end (lib/queue.c): none
 * starts once its submission was cancelled, and a cancel's done waits for one that runs. */
#include <string.h>

#include "internal.h"
#include "combinators.h"
#include "completion.h"
#include "cross.h"
#include "hazard.h"
#include "queue.h"

/* Before a then/map callback: when a copy to the host was enqueued since the last wait, waits
 * until the stream got there, so the callback sees the data (not during a capture, whose work
 * runs only when the graph is launched). 0 or the stream's error. */
static int await_landing(cuv__exec_t *ex) {
  if (!ex->landing)
    return 0;
  ex->landing = false;
  return cuv__hazard_capturing(ex->sub) ? 0 : cuv__wait_point(ex->sub, ex->stream);
}

/* ---- then / then_unchecked ---- */

typedef struct then_op {
  struct cuv_op_s op;
  cuv_op_t *first;
  cuv_then_fn fn;
  void *arg;
  bool checked;
} then_op_t;

static void then_drop(cuv_op_t *op) { cuv__op_drop(((then_op_t *)op)->first); }

static int then_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  then_op_t *t = (then_op_t *)op;
  cuv_output_t mid;
  int rc = cuv__run(t->first, ex, &mid);
  if (rc == 0)
    rc = await_landing(ex);
  if (rc == 0)
    rc = cuv__queue_call_begin(ex->sub);
  if (rc < 0) {
    cuv_output_release(&mid);
    return rc;
  }
  if (t->checked)
    cuv__exec_lock();
  cuv_op_t *next = t->fn(&mid, t->arg);
  if (t->checked)
    cuv__exec_unlock();
  cuv_output_release(&mid); /* whatever fn did not take */
  cuv__queue_call_end(ex->sub); /* a cancel's done may run from here on */
  return next ? cuv__run(next, ex, out) : CUV_EINVAL;
}

static const cuv__op_vt_t then_vt = {"then", then_execute, then_drop,
                                    NULL /* the callback builds the rest */};

static cuv_op_t *then_new(cuv_op_t *first, cuv_then_fn fn, void *arg, bool checked) {
  if (!first || !fn) {
    cuv_op_destroy(first);
    return cuv__op_fail(CUV_EINVAL);
  }
  int rc = cuv__op_take(first);
  if (rc < 0)
    return cuv__op_fail(rc);
  if (first->error) {
    cuv__op_untake(first);
    return first;
  }
  then_op_t *t = (then_op_t *)cuv__op_new(&then_vt, sizeof *t);
  if (!t) {
    cuv__op_drop(first);
    return cuv__op_fail(CUV_ENOMEM);
  }
  t->first = first;
  t->fn = fn;
  t->arg = arg;
  t->checked = checked;
  cuv__op_join(&t->op, first);
  t->op.host = CUV__OP_LANDS | CUV__OP_WAITS; /* the op fn returns is unknown */
  return &t->op;
}

CUV_EXTERN cuv_op_t *cuv_then(cuv_op_t *first, cuv_then_fn fn, void *arg) {
  return then_new(first, fn, arg, true);
}

CUV_EXTERN cuv_op_t *cuv_then_unchecked(cuv_op_t *first, cuv_then_fn fn, void *arg) {
  return then_new(first, fn, arg, false);
}

/* ---- map ---- */

typedef struct map_op {
  struct cuv_op_s op;
  cuv_op_t *inner;
  cuv_map_fn fn;
  void *arg;
} map_op_t;

static void map_drop(cuv_op_t *op) { cuv__op_drop(((map_op_t *)op)->inner); }

static int map_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  map_op_t *m = (map_op_t *)op;
  int rc = cuv__run(m->inner, ex, out);
  if (rc == 0)
    rc = await_landing(ex);
  if (rc == 0 && (rc = cuv__queue_call_begin(ex->sub)) == 0) {
    cuv__exec_lock(); /* as then's: fn must not execute ops */
    rc = m->fn(out, m->arg);
    cuv__queue_call_end(ex->sub);
    cuv__exec_unlock();
  }
  return rc < 0 ? rc : 0;
}

static void map_touches(const cuv_op_t *op, cuv__touches_t *t) {
  cuv__op_touches(((const map_op_t *)op)->inner, t);
}

static const cuv__op_vt_t map_vt = {"map", map_execute, map_drop, map_touches};

CUV_EXTERN cuv_op_t *cuv_map(cuv_op_t *inner, cuv_map_fn fn, void *arg) {
  if (!inner || !fn) {
    cuv_op_destroy(inner);
    return cuv__op_fail(CUV_EINVAL);
  }
  int rc = cuv__op_take(inner);
  if (rc < 0)
    return cuv__op_fail(rc);
  if (inner->error) {
    cuv__op_untake(inner);
    return inner;
  }
  map_op_t *m = (map_op_t *)cuv__op_new(&map_vt, sizeof *m);
  if (!m) {
    cuv__op_drop(inner);
    return cuv__op_fail(CUV_ENOMEM);
  }
  m->inner = inner;
  m->fn = fn;
  m->arg = arg;
  cuv__op_join(&m->op, inner);
  m->op.host = inner->host | (inner->host & CUV__OP_LANDS ? CUV__OP_WAITS : 0);
  return &m->op;
}

/* ---- with_context ---- */

typedef struct context_op {
  struct cuv_op_s op;
  cuv_context_fn fn;
  void *arg;
  cuv_release_fn arg_release;
} context_op_t;

static void context_drop(cuv_op_t *op) {
  context_op_t *c = (context_op_t *)op;
  if (c->arg_release)
    c->arg_release(c->arg);
}

static int context_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  context_op_t *c = (context_op_t *)op;
  int rc = cuv__queue_call_begin(ex->sub);
  if (rc < 0) {
    context_drop(op);
    return rc;
  }
  cuv__exec_lock();
  cuv_op_t *next = c->fn(ex->stream, c->arg);
  cuv__exec_unlock();
  context_drop(op); /* arg_release too before a cancel's done */
  cuv__queue_call_end(ex->sub);
  ex->landing = true; /* fn's own calls may have been a copy to the host */
  if (!next)
    return CUV_EINVAL;
  return cuv__op_execute(next, ex, out);
}

static const cuv__op_vt_t context_vt = {"with_context", context_execute, context_drop,
                                       NULL /* the callback builds the rest */};

CUV_EXTERN cuv_op_t *cuv_with_context(cuv_context_fn fn, void *arg, cuv_release_fn arg_release) {
  if (!fn) {
    if (arg_release)
      arg_release(arg);
    return cuv__op_fail(CUV_EINVAL);
  }
  context_op_t *c = (context_op_t *)cuv__op_new(&context_vt, sizeof *c);
  if (!c) {
    if (arg_release)
      arg_release(arg);
    return cuv__op_fail(CUV_ENOMEM);
  }
  c->fn = fn;
  c->arg = arg;
  c->arg_release = arg_release;
  c->op.host = CUV__OP_LANDS | CUV__OP_WAITS; /* fn's calls and the op it returns are unknown */
  return &c->op;
}

/* ---- zip and seq: n ops in order on one stream ---- */

typedef cuv__multi_op_t zip_op_t;

static void zip_drop(cuv_op_t *op) {
  zip_op_t *z = (zip_op_t *)op;
  cuv__op_drop_all(z->ops, z->n);
}

static int zip_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  zip_op_t *z = (zip_op_t *)op;
  cuv_output_t tuple = z->keep_last_only ? (cuv_output_t){0} : cuv__tuple_new(z->n);
  int rc = z->keep_last_only || tuple.data ? 0 : CUV_ENOMEM;
  size_t i = 0;
  for (; rc == 0 && i < z->n; i++) {
    cuv_output_t item;
    rc = cuv__run(z->ops[i], ex, &item);
    if (z->keep_last_only) {
      cuv_output_release(out);
      *out = item;
    } else {
      ((cuv_tuple_t *)tuple.data)->items[i] = item;
    }
  }
  cuv__op_drop_all(z->ops + i, z->n - i);
  if (!z->keep_last_only)
    *out = tuple;
  return rc;
}

static void zip_touches(const cuv_op_t *op, cuv__touches_t *t) {
  const zip_op_t *z = (const zip_op_t *)op;
  for (size_t i = 0; i < z->n && !t->all; i++)
    cuv__op_touches(z->ops[i], t);
}

static const cuv__op_vt_t zip_vt = {"zip", zip_execute, zip_drop, zip_touches};

cuv_op_t *cuv__gather_ops(const cuv__op_vt_t *vt, cuv_op_t *const *ops, size_t n) {
  if (!ops || n == 0)
    return cuv__op_fail(CUV_EINVAL);
  int rc = cuv__op_take_all(ops, n);
  if (rc < 0)
    return cuv__op_fail(rc);
  rc = cuv__op_first_error(ops, n);
  zip_op_t *z = rc < 0 ? NULL : (zip_op_t *)cuv__op_new(vt, sizeof *z + n * sizeof z->ops[0]);
  if (!z) {
    cuv__op_drop_all(ops, n);
    return cuv__op_fail(rc < 0 ? rc : CUV_ENOMEM);
  }
  memcpy(z->ops, ops, n * sizeof ops[0]);
  z->n = n;
  for (size_t i = 0; i < n; i++) {
    cuv__op_join(&z->op, ops[i]);
    z->op.host |= ops[i]->host;
  }
  return &z->op;
}

CUV_EXTERN cuv_op_t *cuv_zip(cuv_op_t *const *ops, size_t n) {
  return cuv__gather_ops(&zip_vt, ops, n);
}

CUV_EXTERN cuv_op_t *cuv_seq(cuv_op_t *first, cuv_op_t *second) {
  cuv_op_t *pair[2] = {first, second};
  cuv_op_t *op = cuv__gather_ops(&zip_vt, pair, 2);
  if (!op->error)
    ((zip_op_t *)op)->keep_last_only = true;
  return op;
}
