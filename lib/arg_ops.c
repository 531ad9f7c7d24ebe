/* Op arguments of a kernel launch (CUV_ARG_OP_READ/WRITE/RW): the launch owns each such op, runs
 * it on its own stream before the kernel, in argument order, and passes the buffer it outputs as
 * the argument. Those buffers are the launch's output (one, or a tuple), so
 * cuv_sync(cuv_launch(..., CUV_ARG_OP_RW(cuv_dup(x)), ...), &out) hands back the result. */
#include <string.h>

#include "internal.h"
#include "args.h"
#include "arg_ops.h"

static size_t count_ops(const cuv_arg_t *args, size_t nargs) {
  size_t n = 0;
  for (size_t i = 0; args && i < nargs; i++)
    n += args[i].op != NULL;
  return n;
}

/* Without memory for the list cuv__op_take_all wants, each op is still consumed: taken and
 * dropped one by one (an op listed earlier is recognised by its pointer, never read again). */
static void consume_each(const cuv_arg_t *args, size_t nargs) {
  for (size_t i = 0; i < nargs; i++) {
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++)
      seen = args[k].op == args[i].op;
    if (args[i].op && !seen && cuv__op_take(args[i].op) == 0)
      cuv__op_drop(args[i].op);
  }
}

int cuv__arg_ops_take(const cuv_arg_t *args, size_t nargs) {
  size_t n = count_ops(args, nargs);
  if (n == 0)
    return 0;
  cuv_op_t *inline_ops[8];
  cuv_op_t **ops = n <= 8 ? inline_ops : malloc(n * sizeof *ops);
  if (!ops) {
    consume_each(args, nargs);
    return CUV_ENOMEM;
  }
  for (size_t i = 0, j = 0; i < nargs; i++)
    if (args[i].op)
      ops[j++] = args[i].op;
  int rc = cuv__op_take_all(ops, n);
  if (ops != inline_ops)
    free(ops);
  return rc;
}

void cuv__arg_ops_drop(const cuv_arg_t *args, size_t nargs) {
  for (size_t i = 0; args && i < nargs; i++)
    cuv__op_drop(args[i].op);
}

int cuv__arg_ops_error(const cuv_arg_t *args, size_t nargs, size_t *count, unsigned char *host) {
  int rc = 0;
  *count = 0;
  *host = 0;
  for (size_t i = 0; i < nargs; i++) {
    if (!args[i].op)
      continue;
    rc = rc < 0 ? rc : args[i].op->error;
    *host |= args[i].op->host;
    (*count)++;
  }
  return rc;
}

/* Runs one op argument into *out and makes its buffer the argument. */
static int run_one(cuv__karg_t *arg, unsigned char *storage, cuv__exec_t *ex, cuv_output_t *out) {
  cuv_op_t *op = arg->op;
  arg->op = NULL; /* consumed by the execution, whatever it returns */
  int rc = cuv__op_execute(op, ex, out);
  cuv_buffer_t *buf = rc == 0 ? cuv_output_buffer(out) : NULL;
  if (rc == 0 && !buf)
    rc = CUV_EARGS;
  if (rc == 0 && buf->dev != ex->stream->dev)
    rc = CUV_EDEVICE;
  if (rc == 0 && (arg->offset > buf->size || arg->length > buf->size - arg->offset))
    rc = CUV_ERANGE;
  if (rc < 0)
    return rc;
  arg->buffer = cuv_buffer_ref(buf);
  CUdeviceptr ptr = buf->ptr + arg->offset;
  memcpy(storage + arg->at, &ptr, sizeof ptr);
  return 0;
}

int cuv__arg_ops_run(cuv__karg_t *args, size_t nargs, size_t nops, unsigned char *storage,
                     cuv__exec_t *ex, cuv_output_t *out) {
  cuv_output_t *items = out;
  if (nops > 1) {
    *out = cuv__tuple_new(nops);
    if (!out->data)
      return CUV_ENOMEM;
    items = ((cuv_tuple_t *)out->data)->items;
  }
  int rc = 0;
  for (size_t i = 0, j = 0; rc == 0 && i < nargs; i++)
    if (args[i].op)
      rc = run_one(&args[i], storage, ex, &items[j++]);
  return rc < 0 ? rc : cuv__kargs_unique(args, nargs);
}

void cuv__arg_ops_touches(const cuv__karg_t *args, size_t nargs, cuv__touches_t *t) {
  for (size_t i = 0; i < nargs; i++) {
    if (!args[i].op)
      continue;
    cuv__op_touches(args[i].op, t);
    if (!args[i].op->fresh_buffer) /* it may output a buffer other jobs use */
      t->all = true;
  }
}
