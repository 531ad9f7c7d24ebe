/* The simulator's one lock and condition variable (see sim.h for the locking model), and clock
 * helpers. */

#include <errno.h>
#include <signal.h>
#include <time.h>

#include "util.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;

void sim_lock(void) { pthread_mutex_lock(&g_lock); }

void sim_unlock(void) { pthread_mutex_unlock(&g_lock); }

void sim_wait(void) { pthread_cond_wait(&g_cond, &g_lock); }

void sim_wake_all(void) { pthread_cond_broadcast(&g_cond); }

void sim_wait_on(pthread_cond_t *cond) { pthread_cond_wait(cond, &g_lock); }

bool sim_thread_start(void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  sigset_t all, old;
  pthread_t thread;
  if (pthread_attr_init(&attr) != 0)
    return false;
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the full mask */
  int rc = pthread_create(&thread, &attr, fn, arg);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&attr);
  return rc == 0;
}

uint64_t sim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void sim_sleep_ns(uint64_t ns) {
  struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u), .tv_nsec = (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}
