/* The per-stream timeline protocol of the reactor (lib/reactor.c, lib/completion.c), for spin.
 * See README.md.
 *
 * One stream, one 64-bit word W in pinned memory, written by the device only. Two submitting
 * threads make NS submissions each. A submission, under the stream's lock, takes the next
 * sequence number, enqueues its work and then the write of that number to W on the stream, and
 * appends (seq, id) to the stream's pending list; when the list goes from empty to non-empty the
 * stream becomes active: the active count goes up and, when it went up from 0, the reactor is
 * woken under the park lock. The device runs the stream's commands in order: the work, then the
 * write. The reactor scans active streams: it reads W once and completes, in order, every pending
 * entry whose seq is <= W; a stream whose list it emptied is deactivated (under the stream's lock,
 * so no submission slips in between). With nothing active it parks under the park lock, having
 * checked the count under that lock.
 *
 * Sequential consistency for the shared variables; a step under a mutex is one atomic step.
 *
 * Checked by model/check-timeline: the assertions (no completion before its work ran, each
 * completion once and in sequence order) and the watchdog (when nothing can move, every
 * submission was completed: no lost wake-up, nothing stuck), exhaustively.
 * Bug switches, each of which the check must catch:
 *   -DBUG_PARK_NO_RECHECK   the reactor decides to park on a count it read outside the park lock
 *   -DBUG_EARLY             the reactor completes entries up to W + 1 (an off-by-one)
 *   -DBUG_SEQ_OUTSIDE_LOCK  the sequence number is taken before the stream's lock, so another
 *                           submission's write can reach the stream first and W goes backwards
 *                           past a number it already showed (a stale value) */

#ifndef NS
#define NS 2                  /* submissions per submitting thread */
#endif
#define NSUB (2 * NS)

byte W = 0;                   /* the timeline word, as the host sees it */
byte next_seq = 0;            /* the stream's last sequence number handed out */

/* The stream's command queue (FIFO): each entry is a submission id; the command is its work
 * followed by the write of cmd_seq. */
chan stream = [NSUB] of { byte, byte };   /* (id, seq) */

/* The pending list, in sequence order (a FIFO: appended under the stream lock). */
chan pending = [NSUB] of { byte, byte };  /* (seq, id) */

bool work_done[NSUB];
byte completed[NSUB];
byte n_completed = 0;
byte last_completed_seq = 0;

byte n_active = 0;             /* active streams (0 or 1 here) */
bool parked = false;
bool signalled = false;

/* ---- submitting threads ---- */

inline wake_if_parked() {
  atomic { /* under the park lock */
    if
    :: parked -> signalled = true
    :: else -> skip
    fi
  }
}

proctype submitter(byte first_id) {
  byte i = 0, seq, was_empty;
  do
  :: i < NS ->
#ifdef BUG_SEQ_OUTSIDE_LOCK
    atomic { next_seq++; seq = next_seq };
    atomic { /* the stream lock */
      stream!(first_id + i), seq;
      was_empty = empty(pending);
      pending!seq, (first_id + i);
      if
      :: was_empty -> n_active++
      :: else -> skip
      fi
    };
#else
    atomic { /* the stream lock: number, enqueue, list, activate */
      next_seq++;
      seq = next_seq;
      stream!(first_id + i), seq;
      was_empty = empty(pending);
      pending!seq, (first_id + i);
      if
      :: was_empty -> n_active++
      :: else -> skip
      fi
    };
#endif
    if
    :: was_empty -> wake_if_parked()   /* the 0 -> 1 transition of active */
    :: else -> skip
    fi;
    i++
  :: else -> break
  od
}

/* ---- the device: the stream's commands in order ---- */

active proctype device() {
  byte id, seq;
end_idle:
  do
  :: stream?id, seq ->
    work_done[id] = true;   /* the work */
    W = seq                 /* then the write, visible at once */
  od
}

/* ---- the reactor ---- */

inline complete(id, seq) {
  assert(work_done[id]);              /* never before its work ran */
  assert(seq > last_completed_seq);   /* in sequence order */
  last_completed_seq = seq;
  completed[id]++;
  assert(completed[id] == 1);         /* once */
  n_completed++
}

active proctype reactor() {
  byte v, seq, id, n;
end_loop:
  do
  :: true ->
#ifdef BUG_PARK_NO_RECHECK
    n = n_active;
    if
    :: n == 0 ->
      atomic { parked = true };
end_park_bug:
      atomic { signalled -> signalled = false; parked = false }
    :: else -> skip
    fi;
#else
    atomic { /* the park lock: the count is checked under it */
      if
      :: n_active == 0 -> parked = true
      :: else -> skip
      fi
    };
    if
    :: parked ->
end_park:
      atomic { signalled -> signalled = false; parked = false }
    :: else -> skip
    fi;
#endif
    /* One scan of the stream: W once, then every entry it covers. */
    v = W;
#ifdef BUG_EARLY
    v = v + 1;
#endif
    do
    :: atomic { nempty(pending) -> pending?<seq, id> };   /* look at the head */
      if
      :: seq <= v -> pending?seq, id; complete(id, seq)
      :: else -> break
      fi
    :: empty(pending) -> break
    od;
    atomic { /* the stream lock: deactivate only an empty list */
      if
      :: empty(pending) && n_active > 0 -> n_active--
      :: else -> skip
      fi
    }
  od
}

/* When nothing can move, every submission was completed (else one was lost). */
active proctype watchdog() {
  timeout -> assert(n_completed == NSUB)
}

init {
  atomic {
    run submitter(0);
    run submitter(NS)
  }
}
