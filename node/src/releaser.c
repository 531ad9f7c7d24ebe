/* The releaser (releaser.h). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "releaser.h"

typedef struct handed {
  struct handed *next;
  cuv_buffer_t *buf;
} handed_t;

static struct {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  handed_t *head; /* handed over and not yet taken by the thread: under the lock */
  enum { NOT_STARTED, RUNNING, FAILED } thread; /* under the lock */
  atomic_uint_fast64_t releasing; /* handed over and not yet dropped */
} R = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* Drops every reference of the list; each drop may wait for the device. */
static void drop_all(handed_t *h) {
  for (handed_t *next; h; h = next) {
    next = h->next;
    cuv_buffer_unref(h->buf);
    free(h);
    atomic_fetch_sub_explicit(&R.releasing, 1, memory_order_release);
  }
}

static void *releaser_main(void *arg) {
  (void)arg;
  pthread_mutex_lock(&R.lock);
  for (;;) {
    while (!R.head)
      pthread_cond_wait(&R.wake, &R.lock);
    handed_t *taken = R.head;
    R.head = NULL;
    pthread_mutex_unlock(&R.lock);
    drop_all(taken);
    pthread_mutex_lock(&R.lock);
  }
  return NULL;
}

/* Starts the thread, detached and with every signal blocked (they are Node's, for its threads to
 * handle); false when it cannot start. The caller holds the lock. */
static bool start_locked(void) {
  if (R.thread == NOT_STARTED) {
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;
    bool made = pthread_attr_init(&attr) == 0;
    if (made) {
      pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, &old); /* the new thread inherits the mask */
      made = pthread_create(&thread, &attr, releaser_main, NULL) == 0;
      pthread_sigmask(SIG_SETMASK, &old, NULL);
      pthread_attr_destroy(&attr);
    }
    if (made)
      pthread_setname_np(thread, "cuv-node-free");
    R.thread = made ? RUNNING : FAILED;
  }
  return R.thread == RUNNING;
}

void cuv_node_release_buffer(cuv_buffer_t *buf) {
  if (!buf)
    return;
  handed_t *h = malloc(sizeof *h);
  bool handed = false;
  if (h) {
    pthread_mutex_lock(&R.lock);
    handed = start_locked();
    if (handed) {
      h->buf = buf;
      h->next = R.head;
      R.head = h;
      atomic_fetch_add_explicit(&R.releasing, 1, memory_order_relaxed);
      pthread_cond_signal(&R.wake);
    }
    pthread_mutex_unlock(&R.lock);
  }
  if (!handed) {
    free(h);
    cuv_buffer_unref(buf); /* here, as without the thread */
  }
}

uint64_t cuv_node_releasing(void) {
  return atomic_load_explicit(&R.releasing, memory_order_acquire);
}
