/* tcp-infer: a queue of complete requests waiting to run (waitq.c) */
#ifndef TCP_INFER_WAITQ_H
#define TCP_INFER_WAITQ_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

typedef struct loop loop_t;
typedef struct request request_t;
typedef struct waitq waitq_t;

/* The owner's answer to a request the queue took out because its timeout passed (it calls
 * waitq_timed_out once its own counts are right). */
typedef void (*waitq_expired_fn)(waitq_t *q, request_t *req);

/* Requests linked by next_wait, by priority level then arrival, counted in their loop's
 * cuv_infer_waiting; one timer for their earliest timeout. */
struct waitq {
  loop_t *lp;
  request_t *head, *tail;
  unsigned len;
  uv_timer_t expiry;  /* armed only while a waiting request has a timeout */
  uint64_t expiry_at; /* when it fires (uv_hrtime); 0: not armed */
  waitq_expired_fn expired;
  void *owner;
};

/* An empty queue on the loop's thread, its timer unreferenced (what waits keeps the loop up). */
void waitq_init(waitq_t *q, loop_t *lp, waitq_expired_fn expired, void *owner);
/* Closes its timer (the loop's next run ends the close); nothing may be pushed after. */
void waitq_close(waitq_t *q);
/* Queues req (REQ_WAITING) after the waiting requests of its level and the higher ones
 * (request_t.priority: 1 first, 0 the lowest, --priority-levels); its timeout, if any, armed. */
void waitq_push(waitq_t *q, request_t *req);
/* The same, but before the others of its level: a request that waited already (a replay). */
void waitq_push_ahead(waitq_t *q, request_t *req);
/* The first request (the highest level's oldest), left in the queue or taken out; NULL: none. */
request_t *waitq_first(const waitq_t *q);
request_t *waitq_pop(waitq_t *q);
/* Takes req out; false when it was not there. */
bool waitq_remove(waitq_t *q, request_t *req);
/* Whether req's timeout (request_t.deadline) passed by `now` (uv_hrtime). */
bool waitq_past_timeout(const request_t *req, uint64_t now);
/* Answers req, which never ran, 503 "Request timeout expired" (Triton's words and status):
 * counted in cuv_infer_queue_timeouts_total and as failure REJECTED; its done callback runs. */
void waitq_timed_out(loop_t *lp, request_t *req);

#endif
