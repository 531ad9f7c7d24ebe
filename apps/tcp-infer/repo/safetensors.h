/* tcp-infer: a model's weights from a safetensors file (safetensors.c) */
#ifndef TCP_INFER_SAFETENSORS_H
#define TCP_INFER_SAFETENSORS_H

#include <stddef.h>

#define SAFETENSORS_MAX_DIMS 4

/* A tensor the caller expects: its name, its shape, where its float32 values go. */
typedef struct st_want {
  const char *name;
  unsigned ndim;
  size_t shape[SAFETENSORS_MAX_DIMS];
  float *dst; /* room for the product of shape floats */
} st_want_t;

/* safetensors.c: reads the file at path (an 8-byte little-endian header length, a JSON header,
 * the data) and checks it whole before it copies anything: every tensor F32, its data_offsets
 * inside the data and spanning its shape's bytes, the tensors tiling the data without overlap or
 * hole, exactly the n wanted tensors and each of the wanted shape. 0 with each tensor's values
 * in its dst; or -1 with the reason in why. */
int safetensors_load(const char *path, const st_want_t *want, size_t n, char *why, size_t why_len);

#endif
