/* tcp-infer: a backend, how a loop runs its requests' GPU work. One per mode, chosen once at
 * start from the options (backend_select) and reached only through its table: route.c submits,
 * conn.c makes each request with room for the backend's own per-request state and takes back
 * those that never started, the request's maker releases what it held once its completion ran,
 * server.c (worker.c in a worker process) sets each loop up and closes it. A backend's per-loop
 * state is behind loop_t.backend_state, its per-request state behind request_t.priv; nothing
 * above it knows which one runs.
 *
 *   cuv        each request one cuv submission through the loop's bridge (infer.c); with graphs
 *              (the default, options.c) it replays the workspace's captured graph, with
 *              --no-graph it enqueues the op anew, with --cublas model.c's gemm layers
 *   offload    the same submission made from libuv's thread pool (infer.c)
 *   baseline   the same op with a blocking cuv_sync in libuv's thread pool (infer.c)
 *   coalesce   the requests of a loop iteration as one submission (batch.c; with --baseline the
 *              batch's op in the thread pool, with graphs its graph)
 *   isolate    the GPU work in a worker process per loop, which runs one of the others (isolate.c)
 */
#ifndef TCP_INFER_BACKEND_H
#define TCP_INFER_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

typedef struct loop loop_t;
typedef struct request request_t;
typedef struct server server_t;

typedef struct backend {
  const char *name;
  size_t req_size; /* its state per request (request_t.priv), allocated with the request */
  /* The loop's set-up, on its thread, before it serves; 0 or a cuv status. */
  int (*init)(loop_t *lp);
  /* A complete request that runs the model (or a POST /debug/ route): it runs now, waits, or is
   * answered at once; its completion (request_t.done) comes once, on the loop's thread. */
  void (*submit)(loop_t *lp, request_t *req);
  /* A request still waiting (REQ_WAITING) whose connection closed leaves its queue. */
  void (*forget)(loop_t *lp, request_t *req);
  /* The request's completion ran: what it held goes back (the next waiting one may start). */
  void (*release)(loop_t *lp, request_t *req);
  /* Shutdown began (loop thread): nothing new starts; NULL when there is nothing to do. */
  void (*stop)(loop_t *lp);
  /* After the loop ran dry, on its thread: closes its handles, frees what only it reads; NULL:
   * nothing to do. */
  void (*close)(loop_t *lp);
  /* After every loop ended (the main thread): frees what other loops read (GET /metrics); -1
   * when its work did not end cleanly; NULL: nothing to do. */
  int (*finish)(loop_t *lp);
  /* Any thread: whether it takes work now (KServe's readiness); NULL: always, while serving. */
  bool (*ready)(const server_t *s);
} backend_t;

/* The backend the options ask for: --isolate, --coalesce, --baseline, --offload, else cuv (in
 * --isolate's worker process, which runs with the front's options but --isolate, the mode the
 * front was given). init opens the loop's bridge (lp->bridge) when it submits through one;
 * server.c closes it at shutdown. */
const backend_t *backend_select(const server_t *s);

#endif
