/* The cuv-nccl thread: started when a communicator first needs it, it calls its poll function as
 * often as that asks (a pass over the communicators with work in flight, being aborted or closed:
 * lib/comm.c) and parks when nothing is watched. No one waits for it: a pass only reads
 * NCCL's states and acts on them (aborts, destroys), so a wake-up is a signal, never a
 * handshake. Stopped when the library goes away. */
#include <errno.h>
#include <time.h>

#include "internal.h"
#include "poller.h"

static struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  bool started, stop, woken;
  bool ending; /* the process exits: only the communicators being closed are polled, to the end */
  cuv__poll_fn poll;
  pthread_t thread;
} P = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

/* Waits until woken, stopped, or `us` microseconds passed (0: no limit). Lock held. */
static void sleep_locked(unsigned us) {
  if (us == 0) {
    while (!P.woken && !P.stop)
      pthread_cond_wait(&P.cond, &P.lock);
    return;
  }
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += us / 1000000u;
  until.tv_nsec += (long)(us % 1000000u) * 1000;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec++;
    until.tv_nsec -= 1000000000L;
  }
  while (!P.woken && !P.stop && pthread_cond_timedwait(&P.cond, &P.lock, &until) != ETIMEDOUT)
    ;
}

static void *poller_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&P.lock);
  while (!P.stop) {
    P.woken = false;
    cuv__poll_fn poll = P.poll;
    bool ending = P.ending;
    pthread_mutex_unlock(&P.lock);
    unsigned next_us = poll(ending);
    pthread_mutex_lock(&P.lock);
    if (ending && next_us == 0)
      break;
    sleep_locked(next_us);
  }
  pthread_mutex_unlock(&P.lock);
  return NULL;
}

/* At exit, before the libraries' destructors (atexit handlers run first): NCCL finalizes a
 * communicator on a thread of its own, which crashed on the GPU when the process ended under it
 * (NCCL and the driver torn down). So the communicators being closed are seen to their end. */
static void poller_exit(void) {
  pthread_mutex_lock(&P.lock);
  bool started = P.started;
  P.ending = true;
  P.woken = true;
  pthread_cond_signal(&P.cond);
  pthread_mutex_unlock(&P.lock);
  if (started)
    pthread_join(P.thread, NULL);
  P.started = false;
}

int cuv__poller_wake(cuv__poll_fn poll) {
  int rc = 0;
  pthread_mutex_lock(&P.lock);
  P.poll = poll;
  if (!P.started && pthread_create(&P.thread, NULL, poller_main, NULL) != 0)
    rc = CUV_ETHREAD;
  else if (!P.started) {
    pthread_setname_np(P.thread, "cuv-nccl");
    P.started = true;
    static bool exit_hooked;
    if (!exit_hooked)
      exit_hooked = atexit(poller_exit) == 0;
  }
  P.woken = true;
  pthread_cond_signal(&P.cond);
  pthread_mutex_unlock(&P.lock);
  return rc;
}

/* Stops the thread when the library goes away (dlclose, or exit after poller_exit), so it never
 * runs unmapped code. Communicators still open then are left to the process's end. */
__attribute__((destructor)) static void poller_shutdown(void) {
  pthread_mutex_lock(&P.lock);
  bool started = P.started;
  P.stop = true;
  pthread_cond_signal(&P.cond);
  pthread_mutex_unlock(&P.lock);
  if (started)
    pthread_join(P.thread, NULL);
  P.started = false;
}
