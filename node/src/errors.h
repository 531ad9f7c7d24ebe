/* Errors as JavaScript sees them: an Error whose message is cuv_strerror's (with what was wrong
 * with an argument, or, while cuv's initialization has failed, cuv_init_error's reason), `code`
 * the CUV_* name, `errno` cuv's status, and for a driver failure `cuResult`, the CUresult's name
 * (CUDA_ERROR_OUT_OF_MEMORY). */
#ifndef CUV_NODE_ERRORS_H
#define CUV_NODE_ERRORS_H

#include <node_api.h>

napi_value cuv_node_error(napi_env env, int status, const char *detail);
/* Throws the error; returns NULL (what a binding returns then). */
napi_value cuv_node_throw(napi_env env, int status, const char *detail);
/* A Promise already rejected with the error (asynchronous functions never throw). */
napi_value cuv_node_rejected(napi_env env, int status, const char *detail);

#endif
