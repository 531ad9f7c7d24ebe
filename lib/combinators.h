#ifndef CUV_LIB_COMBINATORS_H
#define CUV_LIB_COMBINATORS_H

/* combinators.c: nodes that hold child ops (zip, seq; fork.c builds on them). */

/* A node holding n child ops (zip, seq, fork). */
typedef struct cuv__multi_op {
  struct cuv_op_s op;
  size_t n;
  bool keep_last_only; /* seq: the output is the last op's output, not a tuple */
  cuv_op_t *ops[];
} cuv__multi_op_t;

/* Takes the n ops (consumed on every path) into a multi node with `vt`, checking their errors;
 * the node executes on the first op's device that has one and touches all of theirs. */
cuv_op_t *cuv__gather_ops(const cuv__op_vt_t *vt, cuv_op_t *const *ops, size_t n);

#endif
