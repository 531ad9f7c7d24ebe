#ifndef CUV_LIB_QUEUE_H
#define CUV_LIB_QUEUE_H

struct cuv_queue_s {
  pthread_mutex_t lock;
  pthread_cond_t cond;        /* for cuv_queue_wait */
  cuv__submission_t *head;    /* finished, not yet drained (FIFO) */
  cuv__submission_t **tail;
  atomic_uint pending;        /* accepted and not yet drained */
  atomic_bool closed;
  unsigned waiters;
  cuv__submission_t *live;    /* accepted and not yet drained, for cuv_cancel */
  cuv_ticket_t last_ticket;
  cuv_notify_fn notify;
  void *notify_arg;
};

/* Counts an accepted submission and gives it a ticket. */
void cuv__queue_accept(cuv_queue_t *queue, cuv__submission_t *sub);
/* Appends a finished submission; notifies on the empty-to-non-empty transition, under the lock,
 * so a drainer that saw pending reach 0 knows no notify is still running. */
void cuv__queue_push(cuv_queue_t *queue, cuv__submission_t *sub);

#endif
