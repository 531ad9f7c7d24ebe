/* tcp-infer --isolate, the front's private state: shared by isolate.c (the supervisor) and
 * isolate-metrics.c (GET /stats, which reads it from any loop's thread: hence the atomics). */
#ifndef TCP_INFER_ISOLATE_H
#define TCP_INFER_ISOLATE_H

#include "backend.h"
#include "frames.h"
#include "report.h"
#include "server.h"

typedef struct isolate isolate_t;

/* One worker process. Freed once both its handles closed. */
typedef struct wproc {
  isolate_t *iso;
  struct wproc *next_live; /* the loop's workers not yet gone (shutdown, the watchdog) */
  uv_process_t proc;
  uv_pipe_t pipe;
  uv_shutdown_t shutdown;
  frame_reader_t rd;
  request_t *head, *tail; /* outstanding at this worker, in send order */
  unsigned handles;       /* open handles */
  bool ready, exited, eof, gone, killed;
  bool draining; /* it reported a fault: its successor may already run */
  uint64_t started_ns; /* when it was spawned (--isolate-start-timeout) */
  int64_t exit_status;
  int term_signal;
  report_words_t last; /* its latest report (zeros until the first) */
  uint64_t replies;    /* reply frames read from it (its report is current when it counts all) */
  uint64_t replied_ns; /* when its last reply to a request came (--stall-suspect-ms) */
  /* requests moved away from it (a suspected hang) whose reply is still to come: their frame ids
   * at it (their late replies are dropped) and when they were sent to it (the watchdog's too) */
  struct moved_away {
    uint64_t id, sent_ns;
  } *moved;
  unsigned nmoved, moved_cap;
} wproc_t;

struct isolate {
  loop_t *lp;
  wproc_t *cur;   /* the worker requests go to; NULL while none runs */
  wproc_t *spare; /* --isolate-spares: started, given nothing, promoted when cur fails */
  wproc_t *live;  /* every worker not yet gone: cur, spare, the draining and the dying */
  waitq_t q; /* the requests waiting for a ready worker, by priority level (waitq.h) */
  uint64_t next_id;
  unsigned installed; /* workers made cur (the first is no restart) */
  uv_timer_t timer;   /* the back-off before a respawn; at shutdown, the grace period */
  uv_timer_t watchdog; /* --isolate-timeout */
  uint64_t watchdog_period_ns, watchdog_ran_ns; /* its period; when it last ran */
  unsigned backoff_ms, spare_backoff_ms;
  bool stopping, timer_closed, watchdog_closed;
  bool unclean_stop; /* a worker ended otherwise than with status 0 at shutdown */
  uint64_t lost_at_ns; /* when the last worker was found gone (for the recovery time) */
  char **args;         /* argv of the worker */
  unsigned nargs;      /* where --worker-start K goes in it */
  unsigned spawns;     /* workers this loop started (the K of the next is one more) */
  /* GET /stats, read on any loop's thread */
  _Atomic uint64_t restarts, promotions, fault_exits, crashes, hangs, lost, refused;
  _Atomic uint64_t replays; /* requests sent again to another worker */
  _Atomic uint64_t moved;   /* requests moved off a worker suspected of a hang, or stalled */
  _Atomic uint64_t stalls;  /* times a worker answered nothing for --stall-suspect-ms */
  _Atomic uint64_t late_replies; /* replies to moved requests that came after all (dropped) */
  _Atomic uint64_t expired; /* requests answered 503 at --isolate-deadline-ms */
  _Atomic uint64_t start_timeouts; /* workers killed for not getting ready */
  _Atomic uint64_t last_exit_unix_us, last_recovery_us;
  _Atomic int pid, spare_pid;
  _Atomic bool ready, spare_ready;
  _Atomic unsigned queued_gauge;
  /* GET /metrics: the last reports of the workers that ended (gauges left out), and the sum of
   * those and the live workers' latest, published for any loop's thread */
  report_words_t retired;
  _Atomic uint64_t reports[REPORT_WORDS];
  _Atomic unsigned reports_behind; /* live workers whose latest report misses replies read */
};

/* The isolate backend (backend.h): each loop's requests go to its worker process (loop thread). */
extern const backend_t backend_isolate;

/* A front loop's state (loop_t.backend_state); NULL before its set-up, or outside --isolate. */
static inline isolate_t *loop_iso(const loop_t *lp) {
  return lp->srv && lp->srv->isolate ? (isolate_t *)lp->backend_state : NULL;
}

#endif
