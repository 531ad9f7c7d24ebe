/* Op nodes: creation, the error op, execution and dropping, outputs and tuples. Every path
 * consumes the node exactly once: execute or drop, then free. */
#include <string.h>

#include "internal.h"

/* Out of memory must still yield an op (a chain needs one check at the end); this one is static
 * and freeing it does nothing. */
static const cuv__op_vt_t error_vt = {"error", NULL, NULL, NULL};
static struct cuv_op_s nomem_op = {&error_vt, CUV_ENOMEM, -1, NULL, 0, 0, false, 0, false};

cuv_op_t *cuv__op_new(const cuv__op_vt_t *vt, size_t size) {
  cuv_op_t *op = cuv__pool_zalloc(size);
  if (op) {
    op->vt = vt;
    op->device = -1;
  }
  return op;
}

cuv_op_t *cuv__op_fail(int error) {
  cuv_op_t *op = cuv__op_new(&error_vt, sizeof *op);
  if (!op)
    return &nomem_op;
  op->error = error;
  return op;
}

CUV_EXTERN cuv_op_t *cuv_fail(int status) { return cuv__op_fail(status < 0 ? status : CUV_EINVAL); }

static void op_free_node(cuv_op_t *op) {
  if (op != &nomem_op)
    cuv__pool_free(op);
}

/* Ownership marks. An op handed to a combinator (or to cuv_shared) is OP_TAKEN until its owner
 * executes or drops it, so handing it to a second owner is refused with CUV_ECONSUMED instead of
 * freeing it twice. After execution the node is freed memory: a use then is a use after free no
 * mark can catch. The static out-of-memory op is never marked: it can be handed anywhere. */
enum { OP_FREE, OP_TAKEN, OP_TAKING /* seen earlier in the list cuv__op_take_all is taking */ };

void cuv__op_touches(const cuv_op_t *op, cuv__touches_t *t) {
  if (!op || op->error)
    return; /* executing it only reports the error */
  if (op->vt->touches)
    op->vt->touches(op, t);
  else
    t->all = true;
}

void cuv__touches_none(const cuv_op_t *op, cuv__touches_t *t) {
  (void)op;
  (void)t;
}

void cuv__op_drop(cuv_op_t *op) {
  if (!op)
    return;
  if (!op->error && op->vt->drop)
    op->vt->drop(op);
  op_free_node(op);
}

CUV_EXTERN void cuv_op_destroy(cuv_op_t *op) {
  if (op && op->taken == OP_FREE)
    cuv__op_drop(op);
}

int cuv__op_take(cuv_op_t *op) {
  if (op == &nomem_op)
    return 0;
  if (op->taken != OP_FREE)
    return CUV_ECONSUMED;
  op->taken = OP_TAKEN;
  return 0;
}

void cuv__op_untake(cuv_op_t *op) {
  if (op != &nomem_op)
    op->taken = OP_FREE;
}

static bool listed_before(cuv_op_t *const *ops, size_t i) {
  for (size_t k = 0; k < i; k++)
    if (ops[k] == ops[i])
      return true;
  return false;
}

/* After a failed take: drops what this call marked, once per distinct op (a later duplicate is
 * recognised by its pointer, never read: its node may be freed already). */
static void drop_taking(cuv_op_t *const *ops, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!ops[i] || ops[i] == &nomem_op || listed_before(ops, i) || ops[i]->taken != OP_TAKING)
      continue;
    ops[i]->taken = OP_FREE;
    cuv__op_drop(ops[i]);
  }
}

int cuv__op_take_all(cuv_op_t *const *ops, size_t n) {
  int rc = 0;
  for (size_t i = 0; i < n; i++) {
    if (!ops[i])
      rc = rc ? rc : CUV_EINVAL;
    else if (ops[i] == &nomem_op)
      continue;
    else if (ops[i]->taken != OP_FREE)
      rc = CUV_ECONSUMED; /* another owner's, or listed twice here */
    else
      ops[i]->taken = OP_TAKING;
  }
  if (rc < 0) {
    drop_taking(ops, n);
    return rc;
  }
  for (size_t i = 0; i < n; i++)
    if (ops[i] != &nomem_op)
      ops[i]->taken = OP_TAKEN;
  return 0;
}

CUV_EXTERN int cuv_op_error(const cuv_op_t *op) { return op ? op->error : CUV_EINVAL; }

/* A node that retires with its submission: dropped and freed there (struct cuv_op_s). */
static void op_retire(void *node) { cuv__op_drop(node); }

/* Held before it executes: holds are released in reverse order, so what its execution holds
 * (a buffer's access record) goes before the node's own references to it. */
static int execute_held(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  int rc = cuv__sub_hold(ex->sub, op_retire, op);
  if (rc < 0) {
    cuv__op_drop(op);
    return rc;
  }
  return op->vt->execute(op, ex, out);
}

int cuv__op_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  *out = (cuv_output_t){0};
  if (!op)
    return CUV_EINVAL;
  int rc = op->error;
  if (rc == 0 && op->retires_with_submission) {
    rc = execute_held(op, ex, out);
  } else {
    if (rc == 0)
      rc = op->vt->execute(op, ex, out);
    op_free_node(op);
  }
  if (rc < 0)
    cuv_output_release(out);
  return rc;
}

void cuv__op_drop_all(cuv_op_t *const *ops, size_t n) {
  for (size_t i = 0; ops && i < n; i++)
    cuv__op_drop(ops[i]);
}

void cuv__op_set_device(cuv_op_t *op, int ordinal) {
  op->device = ordinal;
  op->devices = CUV__DEVICE_BIT(ordinal);
}

void cuv__op_set_held_device(cuv_op_t *op, cuv_device_t *dev) {
  cuv__op_set_device(op, dev->ordinal);
  op->dev = dev;
}

int cuv__op_join_device(int *device, int child_device) {
  if (child_device < 0 || *device == child_device)
    return 0;
  if (*device >= 0)
    return CUV_EDEVICE;
  *device = child_device;
  return 0;
}

void cuv__op_join(cuv_op_t *parent, const cuv_op_t *child) {
  if (parent->device < 0) {
    parent->device = child->device;
    parent->dev = child->dev; /* the parent holds the child, and so what keeps it open */
  }
  parent->devices |= child->devices;
}

int cuv__op_first_error(cuv_op_t *const *ops, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!ops[i])
      return CUV_EINVAL;
    if (ops[i]->error)
      return ops[i]->error;
  }
  return 0;
}

CUV_EXTERN int cuv_op_device(const cuv_op_t *op, int *ordinal) {
  if (!op || !ordinal)
    return CUV_EINVAL;
  *ordinal = op->device < 0 ? 0 : op->device;
  return 0;
}

/* ---- the execution lock ---- */

/* Read inline by cuv__exec_locked (op.h), once per submission. */
_Thread_local unsigned cuv__exec_lock_depth;

void cuv__exec_lock(void) { cuv__exec_lock_depth++; }
void cuv__exec_unlock(void) { cuv__exec_lock_depth--; }

/* ---- outputs ---- */

CUV_EXTERN void cuv_output_release(cuv_output_t *out) {
  if (!out)
    return;
  cuv_output_t value = *out;
  *out = (cuv_output_t){0};
  if (value.release)
    value.release(value.release_arg);
}

CUV_EXTERN cuv_output_t cuv_output_take(cuv_output_t *out) {
  cuv_output_t value = {0};
  if (out) {
    value = *out;
    *out = (cuv_output_t){0};
  }
  return value;
}

static void tuple_release(void *arg) {
  cuv_tuple_t *tuple = arg;
  for (size_t i = tuple->n; i-- > 0;)
    cuv_output_release(&tuple->items[i]);
  cuv__pool_free(tuple);
}

cuv_output_t cuv__tuple_new(size_t n) {
  cuv_tuple_t *tuple = cuv__pool_zalloc(sizeof *tuple + n * sizeof tuple->items[0]);
  if (!tuple)
    return (cuv_output_t){0};
  tuple->n = n;
  return cuv__output(tuple, tuple_release, tuple);
}

CUV_EXTERN cuv_output_t *cuv_tuple_get(const cuv_output_t *out, size_t i) {
  if (!out || !out->data || out->release != tuple_release)
    return NULL;
  cuv_tuple_t *tuple = out->data;
  return i < tuple->n ? &tuple->items[i] : NULL;
}

/* ---- value ---- */

typedef struct value_op {
  struct cuv_op_s op;
  cuv_output_t value;
} value_op_t;

static int value_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  *out = ((value_op_t *)op)->value;
  return 0;
}

static void value_drop(cuv_op_t *op) { cuv_output_release(&((value_op_t *)op)->value); }

static const cuv__op_vt_t value_vt = {"value", value_execute, value_drop,
                                      cuv__touches_none};

CUV_EXTERN cuv_op_t *cuv_value(void *data, cuv_release_fn release) {
  value_op_t *v = (value_op_t *)cuv__op_new(&value_vt, sizeof *v);
  if (!v) {
    if (release)
      release(data);
    return cuv__op_fail(CUV_ENOMEM);
  }
  v->value = cuv__output(data, release, data);
  return &v->op;
}
