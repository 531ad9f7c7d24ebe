/* tcp-infer: which backend a loop runs (backend.h), decided once from the options. */
#include "backend.h"
#include "batch.h"
#include "infer.h"
#include "isolate.h"
#include "server.h"

const backend_t *backend_select(const server_t *s) {
  if (!s)
    return NULL;
  if (s->isolate)
    return &backend_isolate;
  if (s->coalesce)
    return &backend_coalesce;
  if (s->baseline)
    return &backend_baseline;
  return s->offload ? &backend_offload : &backend_cuv;
}
