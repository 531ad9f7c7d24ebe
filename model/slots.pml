/* The completion slot protocol of lib/reactor.c and lib/completion.c, for spin. See README.md.
 *
 * Two submitting threads, each with its own stream, make N0 and N1 submissions into a pool of
 * NSLOTS slots. Steps are named after the functions of the code they model. Each stream runs its
 * commands in order; a flag write it has executed becomes visible to the host later, in any order
 * with other writes (so a stream can look idle before its write landed, and a write can land
 * after its slot was reused). A sticky fault (context-wide) may happen once, at any moment.
 *
 * Sequential consistency is assumed for the shared variables (the code's seq_cst counter and
 * release/acquire bit give the orders the model relies on). Work under a mutex is one atomic step;
 * steps on data only one thread owns at the time (a taken slot, the reactor's locals) are merged.
 *
 * Checked by model/check: the assertions and the watchdog, exhaustively (the watchdog's
 * check of every stuck state is the liveness property, see README.md); with --ltl also `live`
 * under weak fairness.
 *
 * Options: -DNO_FAULT (no sticky fault), -DMAX_FAIL=n (transient driver failures per run,
 * default 0: a call of cuStreamWriteValue32, cuLaunchHostFunc or cuStreamQuery returns an
 * error), -DN0=n -DN1=n (submissions per thread).
 * Bug switches, each of which a check must catch:
 *   -DBUG_BIT_BEFORE_COUNT         register sets the active bit before counting the slot armed
 *   -DBUG_BARE_FLAG                the device writes a bare 1, not the slot's generation
 *   -DBUG_WAKE_UNLOCKED            wake signals without taking the park lock
 *   -DBUG_PARK_NO_RECHECK          park waits without re-checking armed under the lock
 *   -DBUG_WATCH_LINK_BEFORE_COUNT  watch links host-callback work before counting it armed
 *   -DBUG_QUERY_ERROR_COMPLETES    a transient stream-query error completes the work
 * (The last two were cuv's code before the model found them.) */

#define NSTREAMS 2
#ifndef N0
#define N0 2            /* submissions of the thread on stream 0 */
#endif
#ifndef N1
#define N1 1            /* ... on stream 1 (-DN1=2: 4 submissions, ~35 M states) */
#endif
#define NSUB (N0 + N1)  /* ids 0 .. N0 - 1 on stream 0, the rest on stream 1 */
#define NSLOTS 2
#define NONE 255
#ifndef MAX_FAIL
#define MAX_FAIL 0
#endif

/* How a submission completes (cuv__complete's status). */
#define S_OK 1
#define S_FAULT 2       /* a sticky fault: completion unproven, resources leaked on purpose */
#define S_ERR 3         /* a transient driver error: resources released as with S_OK */

/* cuv__reactor_arm's results besides 0. */
#define RC_BUSY 1       /* CUV_EBUSY: the pool is empty */
#define RC_FAULT 2      /* the driver reported the sticky fault */
#define RC_ERR 3        /* a transient driver error */

/* Commands on a stream: the submission's op tree, then its completion signal. (The op tree is
 * enqueued before the arm; nothing can observe it before the signal is enqueued, so the two are
 * one command here.) */
#define C_WRITE 1       /* work, then cuStreamWriteValue32(flag, generation) */
#define C_HOSTFN 2      /* work, then cuLaunchHostFunc(hostfn_done) */
#define C_WORK 3        /* work alone (its host function could not be launched) */

/* ---- reactor.c's R ---- */
byte slot_sub[NSLOTS];      /* R.slots[i].sub: submission id + 1, 0 for NULL */
byte expect[NSLOTS];        /* R.slots[i].expect (= .generation, the last one handed out) */
bool idle_seen[NSLOTS];     /* R.slots[i].idle_seen */
byte next_free[NSLOTS];     /* R.slots[i].next_free */
byte free_head;             /* R.free_head */
byte flags[NSLOTS];         /* R.flags: pinned host memory, written by the GPU */
bool bits[NSLOTS];          /* R.active: one bit per armed slot */
byte armed;                 /* R.armed: slots armed + host-callback work watched */
bool parked;                /* R.parked (under park_lock) */
bool scan_lock;             /* R.scan_lock: one scanner at a time, the reactor or a poller */
bool park_lock;             /* R.park_lock: held or not */
bool waiting;               /* the reactor sleeps in pthread_cond_wait(park_cond) */
bool watched[NSUB];         /* on R.watch_head's list (under watch_lock) */
byte nwatched;              /* how many are (a function of watched: adds no state) */

/* ---- submissions ---- */
byte wr_slot[NSUB];         /* the slot its flag write targets (sub->slot) */
byte wr_gen[NSUB];          /* the value it carries (0 once landed: dead) */
bool claimed[NSUB];         /* sub->claimed: set by the one path that completes it */
byte ncompleted;            /* submissions delivered to their queue */

/* ---- the GPU ---- */
chan q[NSTREAMS] = [NSUB] of { byte, byte };  /* command, submission (one per submission) */
bool work_done[NSUB];       /* its op tree ran */
bool in_bus[NSUB];          /* its flag write executed, not yet visible to the host */
bool faulted;               /* the context's sticky fault */
byte nfail;                 /* transient failures injected so far */

#define STREAM_OF(s) ((s) >= N0)
#define LOCK(m) atomic { !m -> m = true }
#define UNLOCK(m) m = false
#define INJECT atomic { nfail < MAX_FAIL -> nfail++ }

/* cuv__complete: the first path to claim the submission delivers it, once. Completing with a
 * non-fault status retires (frees) what the submission holds: its work must have run. */
inline complete(s, st) {
  atomic {
    if
    :: !claimed[s] ->
       claimed[s] = true;
       ncompleted++;
       assert(st == S_FAULT || work_done[s]) /* no early, no stale completion */
    :: else -> skip
    fi
  }
}

/* ---- the slot pool (free_lock) ---- */

inline slot_take(i) {
  i = free_head;
  if
  :: i != NONE -> free_head = next_free[i]
  :: else -> skip
  fi
}

inline slot_put(i) {
  slot_sub[i] = 0; next_free[i] = free_head; free_head = i
}

/* ---- the submitting thread ---- */

/* cuv__reactor_arm: take a slot, bump its generation, reset the flag, enqueue the device write
 * behind the work. One step: until the write is enqueued the slot is the taker's alone, and a
 * late write landing anywhere in between acts as one landing before the reset or after it. */
inline reactor_arm(s, t, i, rc) {
  if
  :: atomic {
       free_head != NONE ->
       slot_take(i);
#ifdef BUG_BARE_FLAG
       expect[i] = 1;
#else
       expect[i] = expect[i] + 1; /* bounded: NSUB arms at most, so never the wrap to 0 */
#endif
       idle_seen[i] = false;
       flags[i] = 0; /* reset before the write is enqueued */
       wr_slot[s] = i; wr_gen[s] = expect[i];
       q[t] ! C_WRITE, s; /* cuStreamWriteValue32; after a fault: accepted, never runs */
       rc = 0
     }
  :: atomic { free_head == NONE -> rc = RC_BUSY }
  /* The write refused: the slot went back to the pool (slot_put), as if never taken. */
  :: atomic { free_head != NONE && faulted -> rc = RC_FAULT }
  :: atomic { free_head != NONE && nfail < MAX_FAIL -> nfail++; rc = RC_ERR }
  fi
}

/* wake: whoever moved armed from 0 signals, under the park lock. */
inline wake() {
#ifdef BUG_WAKE_UNLOCKED
  if
  :: parked -> waiting = false
  :: else -> skip
  fi
#else
  atomic {
    !park_lock -> /* lock, signal, unlock */
    if
    :: parked -> waiting = false /* pthread_cond_signal */
    :: else -> skip
    fi
  }
#endif
}

/* cuv__reactor_register: publish the submission, count it armed, then set the active bit; wake
 * on the 0 -> 1 transition. */
inline reactor_register(s, i, before) {
#ifdef BUG_BIT_BEFORE_COUNT
  atomic { slot_sub[i] = s + 1; bits[i] = true };
  atomic { before = armed; armed++ };
#else
  atomic { slot_sub[i] = s + 1; before = armed; armed++ }; /* counted first */
  bits[i] = true;
#endif
  if
  :: before == 0 -> wake()
  :: else -> skip
  fi
}

/* inline_spin: plain loads of the flag for the budget (one load stands for any number: a load
 * changes nothing), then one cuStreamQuery. done: completed here. */
inline inline_spin(s, i, done) {
  if
  :: atomic {
       flags[i] == expect[i] ->
       slot_put(i); /* cuv__reactor_disarm */
       complete(s, S_OK);
       done = true
     }
  :: atomic { flags[i] != expect[i] && faulted -> complete(s, S_FAULT); done = true }
     /* the slot stays out of the pool */
  :: atomic { flags[i] != expect[i] && !faulted -> done = false }
     /* CUDA_SUCCESS or CUDA_ERROR_NOT_READY */
  :: atomic {
       flags[i] != expect[i] && nfail < MAX_FAIL -> nfail++;
#ifdef BUG_QUERY_ERROR_COMPLETES
       complete(s, S_ERR); done = true
#else
       done = false /* a transient error proves nothing: the reactor waits for the flag */
#endif
     }
  fi
}

/* cuv__reactor_watch: count the work armed, then link it (the probe may unlink it at once); wake
 * on 0 -> 1. */
inline reactor_watch(s, before) {
#ifdef BUG_WATCH_LINK_BEFORE_COUNT
  atomic { watched[s] = true; nwatched++ };
  atomic { before = armed; armed++ };
#else
  atomic { before = armed; armed++ };
  atomic { watched[s] = true; nwatched++ };
#endif
  if
  :: before == 0 -> wake()
  :: else -> skip
  fi
}

/* unlink_watched, with watch_lock held. */
inline unlink_watched(s) {
  watched[s] = false; nwatched--;
  assert(armed > 0); /* armed counts whatever is unlinked */
  armed--
}

/* cuv__reactor_unwatch */
inline reactor_unwatch(s) {
  atomic {
    if
    :: watched[s] -> unlink_watched(s)
    :: else -> skip
    fi
  }
}

/* arm_hostfn: watch, then cuLaunchHostFunc; when the launch fails, wait for the whole stream. */
inline arm_hostfn(s, t, before) {
  reactor_watch(s, before);
  if
  :: q[t] ! C_HOSTFN, s /* after a fault: accepted, never runs */
  :: faulted -> reactor_unwatch(s); complete(s, S_FAULT)
  :: atomic { nfail < MAX_FAIL -> nfail++; q[t] ! C_WORK, s }; /* the work alone */
     reactor_unwatch(s);
     /* cuStreamSynchronize: the stream runs dry, or reports the fault */
     if
     :: atomic { len(q[t]) == 0 && !faulted -> complete(s, S_OK) }
     :: faulted -> complete(s, S_FAULT)
     fi
  fi
}

/* cuv__arm with the host-sync mode off: the reactor, else the host callback. */
inline arm(s, t, i, rc, done, before) {
  reactor_arm(s, t, i, rc);
  if
  :: rc == 0 ->
     if
     :: inline_spin(s, i, done) /* may_spin, with a budget */
     :: done = false            /* CUV_SUBMIT_NO_SPIN, or a budget of 0 */
     fi;
     if
     :: !done -> reactor_register(s, i, before)
     :: else -> skip
     fi
  :: rc == RC_FAULT -> complete(s, S_FAULT)
  :: rc == RC_BUSY || rc == RC_ERR -> arm_hostfn(s, t, before)
  fi
}

/* A thread calling cuv_submit for submissions first .. last, with its stream t. */
proctype Submitter(byte t, first, last) {
  byte s, i, rc, before;
  bool done;
  for (s : first .. last) {
    arm(s, t, i, rc, done, before);
    d_step { i = 0; rc = 0; before = 0; done = false }
  }
}

/* ---- the reactor thread ---- */

/* The reactor's locals go back to 0 in the step that ends their use, so that states which
 * differ only in dead values are one state. */

/* slot_retire, after the caller cleared slot i's bit and read its submission s: complete s with
 * st; a slot whose write may still land (a fault) is not put back. */
inline slot_retire(st, reuse) {
  if
  :: reuse -> atomic { slot_put(i) }
  :: else -> skip
  fi;
  atomic {
    assert(armed > 0); /* armed counts every set bit */
    armed--;
    complete(s, st); /* nothing reads the submission between the two: one step */
    i = 0; s = 0; state = 0
  }
}

#define LANDED(i) (bits[i] && flags[i] == expect[i])

/* scan: a set bit whose flag holds the expected generation retires its slot. (Each slot's bit
 * and flag are read in one step; the code loads the bit word first: a bit set in between is
 * seen by the next scan.) The scanner holds scan_lock: taking it with a landed flag in view is
 * one step, since only a scanner clears a bit and only a retire lets a slot's flag change. */
inline scan_retire(k) {
  atomic {
    !scan_lock && LANDED(k) -> scan_lock = true;
    i = k; bits[i] = false; s = slot_sub[i] - 1;
    assert(s < NSUB && !claimed[s]) /* the slot's own submission, not yet completed */
  };
  slot_retire(S_OK, true);
  UNLOCK(scan_lock)
}

#define Q_BUSY 4
#define Q_IDLE 5

/* stream_state: Q_IDLE, Q_BUSY, S_FAULT, or a transient error (S_ERR only in the bug variant:
 * cuv counts it busy). */
inline stream_state(t, state) {
  if
  :: faulted -> state = S_FAULT
  :: !faulted && len(q[t]) == 0 -> state = Q_IDLE
  :: !faulted && len(q[t]) > 0 -> state = Q_BUSY
  :: nfail < MAX_FAIL -> nfail++;
#ifdef BUG_QUERY_ERROR_COMPLETES
     state = S_ERR
#else
     state = Q_BUSY
#endif
  fi
}

/* probe_slots: a faulted stream's slots are retired and kept out of the pool; an idle stream
 * whose flag has not landed on two probes in a row completes too (its write ran). */
inline probe_slots() {
  for (j : 0 .. NSLOTS - 1) {
    atomic {
      if
      :: bits[j] ->
         i = j; s = slot_sub[i] - 1;
         stream_state(STREAM_OF(s), state);
         if
         :: state == S_FAULT || state == S_ERR || (state == Q_IDLE && idle_seen[i]) ->
            bits[i] = false;
            assert(s < NSUB && !claimed[s]);
            idle_seen[i] = false; /* dead until the next arm resets it */
            if
            :: state == Q_IDLE -> state = S_OK
            :: else -> skip
            fi
         :: else -> idle_seen[i] = (state == Q_IDLE); i = 0; s = 0; state = 0
         fi
      :: else -> skip
      fi
    };
    if
    :: state == S_FAULT || state == S_ERR -> slot_retire(state, false)
    :: state == S_OK -> slot_retire(S_OK, true)
    :: state == 0 -> skip
    fi
  }
}

/* probe_watched: host-callback work on a faulted stream never gets its callback: completed here.
 * (The code collects the streams under watch_lock and queries them without it; a fault stays, so
 * one step shows the same outcomes.) */
inline probe_watched() {
  atomic {
    for (t : 0 .. NSTREAMS - 1) {
      stream_state(t, state);
      if
      :: state == S_FAULT || state == S_ERR -> /* complete_watched_on */
         for (s : 0 .. NSUB - 1) {
           if
           :: watched[s] && STREAM_OF(s) == t -> unlink_watched(s); complete(s, state)
           :: else -> skip
           fi
         }
      :: else -> skip
      fi
    };
    j = 0; s = 0; t = 0; state = 0
  }
}

/* park: parked, and armed checked under the park lock before each wait. */
inline park() {
  LOCK(park_lock);
  parked = true;
#ifdef BUG_PARK_NO_RECHECK
  atomic { UNLOCK(park_lock); waiting = true };
end_parked_once:
  !waiting;
  LOCK(park_lock);
#else
  do
  :: armed == 0 ->
     atomic { UNLOCK(park_lock); waiting = true }; /* pthread_cond_wait */
end_parked:
     !waiting;
     LOCK(park_lock)
  :: else -> break
  od;
#endif
  parked = false;
  UNLOCK(park_lock)
}

/* A probe pass changes something: a slot whose stream is faulted or idle, or was idle at the last
 * probe; host-callback work on a faulted stream; or a transient failure still to inject. */
#define IDLE(t) (!faulted && len(q[t]) == 0)
#define SLOT_PROBE_USEFUL(j) \
  (bits[j] && (faulted || idle_seen[j] || IDLE(STREAM_OF(slot_sub[j] - 1))))
#define PROBE_USEFUL \
  (SLOT_PROBE_USEFUL(0) || SLOT_PROBE_USEFUL(1) || nfail < MAX_FAIL || \
   (faulted && nwatched > 0))

/* reactor_main: scan; with nothing armed, park; with armed work that made no progress, probe.
 * Time is abstract: any number of steps of the other threads may pass between two passes, so
 * spinning longer, lingering before a park or probing only every 2 ms add nothing. A pass that
 * would change nothing is left out (a stutter): when only such passes remain, nothing can move
 * and the watchdog judges the state (see README.md: this is how liveness is checked). */
proctype Reactor() {
  byte i, j, s, t, state;
end_loop:
  do
  :: scan_retire(0)
  :: scan_retire(1)
  :: atomic { !LANDED(0) && !LANDED(1) && armed == 0 } -> park()
  :: atomic { !scan_lock && !LANDED(0) && !LANDED(1) && armed != 0 && PROBE_USEFUL ->
              scan_lock = true } ->
     probe_slots(); UNLOCK(scan_lock); probe_watched()
  od
}

/* cuv_poll on a thread that polls anyway (the libuv bridge's loop while its work is young): the
 * reactor's scan on the calling thread, when pthread_mutex_trylock(scan_lock) succeeds (a busy
 * lock: return 0, a stutter). It may complete work while the reactor is parked or probing. */
proctype Poller() {
  byte i, s, state;
end_poll:
  do
  :: scan_retire(0)
  :: scan_retire(1)
  od
}

/* ---- the GPU ---- */

/* hostfn_done, on the driver's callback thread; the stream waits for it to return. */
inline hostfn_done(s) {
  reactor_unwatch(s);
  complete(s, S_OK)
}

/* One stream: its commands in order; nothing runs after the sticky fault. (A host function is
 * one step with its command: nothing observes it half-way that would differ, see README.md.) */
proctype Stream(byte t) {
  byte cmd, s;
end_stream:
  do
  :: atomic {
       !faulted && len(q[t]) > 0 && q[t]?[C_WRITE, _] ->
       q[t]?cmd, s; work_done[s] = true; in_bus[s] = true; cmd = 0; s = 0
     }
  :: atomic {
       !faulted && len(q[t]) > 0 && q[t]?[C_WORK, _] ->
       q[t]?cmd, s; work_done[s] = true; cmd = 0; s = 0
     }
  :: atomic {
       !faulted && len(q[t]) > 0 && q[t]?[C_HOSTFN, _] ->
       q[t]?cmd, s; work_done[s] = true; hostfn_done(s); cmd = 0; s = 0
     }
  od
}

/* Executed flag writes become visible to the host in any order, possibly after a reuse. */
#define LAND(s) \
  :: atomic { \
       in_bus[s] -> flags[wr_slot[s]] = wr_gen[s]; in_bus[s] = false; wr_slot[s] = 0; wr_gen[s] = 0 \
     }
proctype Bus() {
end_bus:
  do
  LAND(0)
  LAND(1)
  LAND(2)
#if N0 + N1 > 3
  LAND(3)
#endif
  od
}

/* When nothing can move any more: everything was completed once, nothing is counted armed, and
 * without a fault every slot is back in the pool. A reactor parked with work armed (a lost
 * wake-up) fails here. */
proctype Watchdog() {
  byte s, n;
  timeout ->
  assert(ncompleted == NSUB);
  assert(armed == 0);
  s = free_head;
  do
  :: s != NONE -> n++; s = next_free[s]
  :: else -> break
  od;
  assert(faulted || n == NSLOTS)
}

init {
  atomic {
    next_free[0] = 1;
    next_free[1] = NONE;
    free_head = 0;
    run Reactor();
#ifndef NO_POLLER
    run Poller();
#endif
    run Stream(0);
    run Stream(1);
    run Bus();
    run Watchdog();
    run Submitter(0, 0, N0 - 1);
    run Submitter(1, N0, NSUB - 1)
  }
#ifndef NO_FAULT
  if
  :: faulted = true /* a kernel's sticky fault, at any moment */
  :: skip
  fi
#endif
}

/* No lost wake-up, no stuck slot: every submission is eventually completed. */
ltl live { <> (ncompleted == NSUB) }
