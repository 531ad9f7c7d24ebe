#ifndef CUV_LIB_ARGS_H
#define CUV_LIB_ARGS_H

/* args.c: kernel arguments, checked before a launch is built, and the unique storage of its
 * writable buffer arguments. */

/* A kernel argument as a launch keeps it. */
typedef struct cuv__karg {
  enum cuv_arg_kind kind;
  unsigned flags;        /* CUV_ARG_FLAG_* */
  cuv_buffer_t *buffer;  /* a reference; NULL for a scalar, and for an op argument until it ran */
  cuv_op_t *op;          /* an op argument's op until it ran (arg_ops.c) */
  size_t offset, length; /* a buffer argument's bytes: [offset, offset + length), 0: to the end */
  size_t at;             /* where its value lies in the launch's storage */
} cuv__karg_t;

/* Each argument against what a launch of `kernel` accepts: kinds, scalars, flags, buffer ranges
 * (CUV_ERANGE), devices (CUV_EDEVICE), then the count and sizes the driver reports (CUV_EARGS). */
int cuv__args_check(const cuv_kernel_t *kernel, const cuv_arg_t *args, size_t nargs);
/* Bytes of an argument's value: the scalar's size, or a device pointer's. */
size_t cuv__arg_size(const cuv_arg_t *arg);
/* CUV_EARGS when two writable buffer arguments share a byte of one buffer and neither may alias
 * (CUV_ARG_FLAG_MAY_ALIAS); arguments without a buffer are skipped. */
int cuv__kargs_unique(const cuv__karg_t *args, size_t nargs);

#endif
