/* Typed kernel arguments from JavaScript. A kernel's signature lists its parameters' kinds:
 * scalars "i8" "u8" "i16" "u16" "i32" "u32" "i64" "u64" "f32" "f64" (C's int8_t ... double), and
 * buffers "read" "write" "rw" (CUV_ARG_READ, _WRITE, _RW: the access decides the hazard ordering).
 * A launch's values are checked against it here (an integer in its type's range, a number, a live
 * DeviceBuffer, or {buffer, byteOffset}), and cuv_launch then checks them against the kernel's
 * parameters as the driver reports them (CUV_EARGS), as it does for C callers. */
#ifndef CUV_NODE_KERNEL_ARGS_H
#define CUV_NODE_KERNEL_ARGS_H

#include <stdint.h>

#include "addon.h"

typedef union cuv_node_scalar {
  int8_t i8;
  uint8_t u8;
  int16_t i16;
  uint16_t u16;
  int32_t i32;
  uint32_t u32;
  int64_t i64;
  uint64_t u64;
  float f32;
  double f64;
} cuv_node_scalar_t;

/* argv[i], an array of kind names, into *kinds (malloc'd, *n entries; NULL for none). */
int cuv_node_signature_parse(cuv_node_call_t *c, size_t i, unsigned char **kinds, size_t *n);
/* argv[i], an array of n values, into args, scalars stored in values (n entries each). */
int cuv_node_args_convert(cuv_node_call_t *c, size_t i, const unsigned char *kinds, size_t n,
                          cuv_arg_t *args, cuv_node_scalar_t *values);

#endif
