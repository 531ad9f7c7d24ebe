/* The driver callback thread, on which host functions (cuLaunchHostFunc, _v2: hostfn.c) run. As in
 * the real driver, every host function of the process runs on one driver callback thread,
 * serialized, in the order the streams reach them, and the stream does not continue until its
 * function returned. The worker of the stream hands a job on its own stack to the callback thread
 * and waits for it. A host function queued before a sticky fault on a stream other than the
 * faulting one, behind a kernel that was running when the fault hit, still runs (the worker
 * decides: sim_cmd_ops.after_fault), as on the GPU (driver 580; tests/errors/fault.c and
 * tests/engine/conformance.c test_fault_runs_queued_host_work), although cuda.h says they "will
 * not be called in the event of an error in the CUDA context". None runs once a reset began. */

#include <sched.h>

#include "callback.h"
#include "util.h"

/* How long the thread spin-waits after a CU_HOST_TASK_SPINWAIT function. The driver spins until
 * the next host function; the simulator shares the machine with the program it runs, so it spins
 * a bounded while (long enough for a stream's next function to come) and then blocks. */
#define SIM_HOST_SPIN_NS 1000000ull

struct sim_hostjob {
  CUhostFn fn;
  void *data;
  struct sim_ctx *ctx;
  bool done;
  bool spin; /* spin-wait for the next job afterwards */
  struct sim_hostjob *next;
};

static struct sim_hostjob *jobs_head;
static struct sim_hostjob *jobs_tail;
static pthread_cond_t jobs_wake = PTHREAD_COND_INITIALIZER;
static bool callback_started;

/* Waits for a job (lock held): polling for a while first after a spin-wait job, else blocked. */
static void wait_for_job(bool spin) {
  uint64_t until = spin ? sim_now_ns() + SIM_HOST_SPIN_NS : 0;
  while (!jobs_head && sim_now_ns() < until) {
    sim_unlock();
    sched_yield();
    sim_lock();
  }
  while (!jobs_head)
    sim_wait_on(&jobs_wake);
}

/* The callback thread; started on first use, lives until the process exits. */
static void *callback_main(void *arg) {
  pthread_setname_np(pthread_self(), "cuv-sim-cb");
  bool spin = false;
  sim_lock();
  for (;;) {
    wait_for_job(spin);
    struct sim_hostjob *job = jobs_head;
    jobs_head = job->next;
    if (!jobs_head)
      jobs_tail = NULL;
    bool run = !job->ctx->resetting;
    spin = job->spin;
    sim_unlock();
    if (run)
      job->fn(job->data);
    sim_lock();
    job->done = true;
    sim_wake_all();
  }
  return NULL;
}

void sim_callback_run(struct sim_ctx *ctx, CUhostFn fn, void *data, bool spin) {
  struct sim_hostjob job = {.fn = fn, .data = data, .ctx = ctx, .spin = spin};
  sim_lock();
  if (ctx->resetting) {
    sim_unlock();
    return;
  }
  if (!callback_started)
    callback_started = sim_thread_start(callback_main, NULL);
  if (!callback_started) { /* no thread could be started: run it here rather than never */
    sim_unlock();
    fn(data);
    return;
  }
  if (jobs_tail)
    jobs_tail->next = &job;
  else
    jobs_head = &job;
  jobs_tail = &job;
  pthread_cond_signal(&jobs_wake);
  while (!job.done)
    sim_wait();
  sim_unlock();
}

void sim_callback_reset_ctx(struct sim_ctx *ctx) {
  struct sim_hostjob **link = &jobs_head;
  jobs_tail = NULL;
  while (*link) {
    struct sim_hostjob *job = *link;
    if (job->ctx == ctx) {
      *link = job->next;
      job->done = true; /* its worker stops waiting; the function never runs */
    } else {
      jobs_tail = job;
      link = &job->next;
    }
  }
  sim_wake_all();
}
