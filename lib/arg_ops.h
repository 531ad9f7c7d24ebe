#ifndef CUV_LIB_ARG_OPS_H
#define CUV_LIB_ARG_OPS_H

/* arg_ops.c: op arguments of a launch (CUV_ARG_OP_*), whose output buffers become arguments. */

/* Takes the ops of args into the launch: CUV_ECONSUMED when one is another owner's or listed
 * twice (the ops this call could take are dropped, each once), CUV_ENOMEM likewise. */
int cuv__arg_ops_take(const cuv_arg_t *args, size_t nargs);
/* Drops the ops taken by cuv__arg_ops_take (a launch refused after taking them). */
void cuv__arg_ops_drop(const cuv_arg_t *args, size_t nargs);
/* The first error an op argument carries, or 0; *count receives how many there are, *host what
 * they may do on the host (their CUV__OP_* together: the launch runs them). */
int cuv__arg_ops_error(const cuv_arg_t *args, size_t nargs, size_t *count, unsigned char *host);
/* Runs the `nops` op arguments on ex's stream in argument order: each output must be a buffer
 * (else CUV_EARGS) of ex's device, in whose range the argument lies (CUV_ERANGE); it becomes the
 * argument (its pointer written at args[i].at into storage) and an output of the launch: *out is
 * the one output, or a tuple of them. Then checks unique storage over every argument. */
int cuv__arg_ops_run(cuv__karg_t *args, size_t nargs, size_t nops, unsigned char *storage,
                     cuv__exec_t *ex, cuv_output_t *out);
/* Adds what the op arguments' ops touch, and `all` for one whose buffer may be anyone's. */
void cuv__arg_ops_touches(const cuv__karg_t *args, size_t nargs, cuv__touches_t *t);

#endif
