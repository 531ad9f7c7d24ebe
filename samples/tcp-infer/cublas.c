/* tcp-infer --cublas: not yet. */
#include "server.h"

int infer_cublas_open(server_t *s) { (void)s; return CUV_ENOTSUP; }
void infer_cublas_close(server_t *s) { (void)s; }
cuv_op_t *infer_cublas_layers(server_t *s, workspace_t *ws, unsigned rows) {
  (void)s; (void)ws; (void)rows;
  return NULL;
}
