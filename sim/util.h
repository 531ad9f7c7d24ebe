#ifndef CUV_SIM_UTIL_H
#define CUV_SIM_UTIL_H

/* The simulator's one lock and condition variable (sim.h says how they are used), its threads,
 * and its clock (util.c). */

#include "sim.h"

SIM_HIDDEN void sim_lock(void);
SIM_HIDDEN void sim_unlock(void);
/* Waits on the global condition (lock held); returns with the lock held. */
SIM_HIDDEN void sim_wait(void);
/* Wakes every sim_wait()er (lock held). */
SIM_HIDDEN void sim_wake_all(void);
/* Waits on another condition variable with the global lock (lock held). */
SIM_HIDDEN void sim_wait_on(pthread_cond_t *cond);
/* Starts a detached internal thread with every signal blocked (signals are the application's). */
SIM_HIDDEN bool sim_thread_start(void *(*fn)(void *), void *arg);

/* Monotonic time in nanoseconds. */
SIM_HIDDEN uint64_t sim_now_ns(void);
/* Sleeps about ns nanoseconds. */
SIM_HIDDEN void sim_sleep_ns(uint64_t ns);

#endif
