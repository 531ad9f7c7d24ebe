/* tcp-infer's KServe v2 inference from the client's side: a request body for given rows (JSON
 * tensors or the binary tensor data extension) and the outputs read back out of a response,
 * its form checked on the way. Shared by tcp-infer-client (its --api kserve load and the
 * --make-request and --check it offers scripts such as the curl test) and tests/kserve.c. */
#ifndef TCP_INFER_V2_CLIENT_H
#define TCP_INFER_V2_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#define V2_INFER_PATH "/v2/models/mlp/infer"

typedef struct v2_request_opts {
  const char *id;             /* NULL: none */
  bool nested;                /* data as [[row], [row], ...] rather than flat */
  bool binary_in;             /* the rows after the JSON header (binary_data_size) */
  bool binary_out;            /* the request's parameters.binary_data_output */
  int binary_out_per_output;  /* 1, 2: the output's parameters.binary_data true, false */
  const char *parameters; /* more of the request's parameters, JSON members as they are sent
                           * ("\"priority\":1,\"timeout\":100"); NULL: none */
} v2_request_opts_t;

/* The body of an inference of `rows` rows of MLP_IN floats (malloc'd; *len bytes); *json_len:
 * its JSON part (the request's Inference-Header-Content-Length when binary_in). NULL without
 * memory. */
char *v2_request(const float *in, unsigned rows, const v2_request_opts_t *o, size_t *len,
                 size_t *json_len);

/* Whether a request of these options asks for binary outputs. */
bool v2_binary_out(const v2_request_opts_t *o);

/* Reads the outputs out of a 200 response's body (header_len: its
 * Inference-Header-Content-Length, -1 when it sent none): the model, id (NULL: none expected),
 * OUTPUT0 FP32 [rows, MLP_OUT], its data (or its binary part) into out. 0, or -1 and why. */
int v2_response_outputs(const char *body, size_t len, long header_len, unsigned rows,
                        const char *id, float *out, char *why, size_t why_len);

#endif
