/* How the reactor (lib/reactor.c) learns that there is work to look after, and what it does with
 * host-callback work, each case built so that only the reactor thread can finish the work:
 *
 * - a registration that activates its stream counts it armed before it links it into the active
 *   list. With the link first, a scan can empty and unlink the stream before it is counted: the
 *   count drops to 0 while other work is still armed, and the thread parks (then the
 *   registrant's late count wakes it). A submission single-stepped through
 *   cuv__reactor_arm, sleeping at each of its instructions, opens that window; the rule
 *   checked is that the reactor never parks while a gated submission keeps another stream active
 *   (cuv_stats.reactor_wakeups does not move).
 * - host-callback work (the fallback of lib/completion.c, forced here with
 *   cuv_sim_fail("cuStreamWriteValue64")) is watched by the reactor: a watch that moves the armed
 *   count from 0 wakes the parked thread (counted by reactor_wakeups while the work is held);
 * - a sticky fault on the stream of watched work: the host function behind the faulting kernel
 *   never runs (as on the GPU: tests/engine/conformance.c), so only the reactor's probe of watched
 *   streams can complete it, with the fault. Without the watch, without the wake-up or with a
 *   probe that ignores the fault the callback never comes, and a 20 s watchdog fails the test.
 *
 * Suite sim only (the cases need cuv_sim_fail, or single-step a thread through the driver, not for
 * a shared GPU); the fault case is last, as it kills the context for the rest of the
 * process. Every callback is counted; the only bounds are watchdogs and retries. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* REG_RIP */
#endif
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <ucontext.h>

#include <cuda.h>

#include "gate.h"
#include "internal.h"
#include "reactor.h"

#if defined(__SANITIZE_THREAD__)
#define CUVT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CUVT_TSAN 1
#endif
#endif

#define D(field) (now.field - before.field)

/* Waits on and drains q until seen->calls reaches want; a watchdog of 20 s without it fails the
 * test (the cases below complete in milliseconds when the reactor does its job). */
static void drain_until(cuv_queue_t *q, atomic_int *calls, int want) {
  for (int spins = 0; atomic_load(calls) < want; spins++) {
    int rc = cuv_queue_wait(q, 500);
    assert_true(rc == 0 || rc == CUV_EBUSY);
    cuv_queue_drain(q);
    if (spins > 40)
      fail_msg("callbacks did not arrive: %d of %d", atomic_load(calls), want);
  }
}

/* One submission's callback: counted, with its status. */
typedef struct seen {
  atomic_int calls;
  int status;
} seen_t;

static void record(int status, cuv_output_t *output, void *arg) {
  (void)output;
  seen_t *s = arg;
  s->status = status;
  atomic_fetch_add(&s->calls, 1);
}

static void count_ok(int status, cuv_output_t *output, void *arg) {
  (void)output;
  if (status == 0)
    atomic_fetch_add((atomic_int *)arg, 1);
}

static cuv_op_t *empty(void) {
  return cuv_launch(cuvt_kernel_ok("empty_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0, NULL, 0);
}

static void idle_ms(long ms) {
  struct timespec t = {0, ms * 1000000L};
  while (nanosleep(&t, &t) != 0 && errno == EINTR)
    ;
}

/* ---- the count before the bit --------------------------------------------------------------- */

/* The window between the link and the count is a few instructions long: no lock, no driver call,
 * no simulator option can hold a thread there. Single-stepping can: with the x86 trap flag set,
 * the test thread gets a SIGTRAP before each instruction it runs, and the handler sleeps at every
 * instruction of cuv__reactor_arm itself (not of what it calls), as a preemption at that
 * instruction would. Meanwhile the stream worker raises the word and the reactor (sleeping at most
 * 20 us between scans while work is armed) scans: with the stream linked before it is counted and
 * emptied by a scan, the count falls to 0 under the holder's active stream, and the reactor parks,
 * to be woken by the late count. A stall outlasts that by far (a bound of the scenario, not an
 * assertion). */
#define STALL_NS 3000000L
#define TRACED 8

/* x86-64 only; not under TSan, which runs signal handlers at its own safe points and would make
 * every stepped instruction thousands. */
#if defined(__x86_64__) && !defined(CUVT_TSAN)
#define STEPPING 1
static uintptr_t register_entry;
static uintptr_t register_sp; /* the stack pointer at its entry; 0 while outside */
static unsigned stalls_in_register, calls_traced;

static void stall(void) {
  int saved = errno;
  struct timespec t = {0, STALL_NS};
  while (nanosleep(&t, &t) != 0 && errno == EINTR)
    ;
  errno = saved;
}

/* The trap flag (EFLAGS bit 8), set and cleared from user code. */
static void trace_on(void) {
  __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
}
static void trace_off(void) {
  __asm__ volatile("pushfq; andq $~0x100, (%%rsp); popfq" ::: "memory", "cc");
}

/* Before each traced instruction (signals run on the test thread only, so plain statics). Inside
 * the call: from its entry until the stack pointer rises above the entry's (its ret); code more
 * than 4 KiB from its entry is a callee (pthread_mutex_lock of a wake-up): not stalled. */
static void on_step(int sig, siginfo_t *info, void *context) {
  (void)sig;
  (void)info;
  const ucontext_t *uc = context;
  uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
  uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
  if (pc == register_entry) {
    register_sp = sp;
    calls_traced++;
  } else if (register_sp && sp > register_sp) {
    register_sp = 0;
  }
  if (register_sp && pc - register_entry < 4096) {
    stalls_in_register++;
    stall();
  }
}
#endif

#if defined(STEPPING) /* no trap flag to set elsewhere */
static void test_register_counts_before_bit(void **state) {
  (void)state;
  if (!cuvt_is_sim())
    skip(); /* single-stepping a thread inside the CUDA driver: not on a shared GPU */
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  /* The holder: its stream active for the whole case (its wait_flag kernel runs until the gate
   * opens), so the armed count never falls to 0 and the reactor must never park. */
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  cuv_stream_t *held;
  assert_cuv_ok(cuv_stream_create(&held, cuvt_device()));
  seen_t holder = {0};
  cuv_submit_opts_t on_held = {.stream = held, .flags = CUV_SUBMIT_NO_SPIN};
  cuv_stats_t before = cuvt_stats(), now;
  assert_cuv_ok(cuv_submit(q, cuvt_gate_wait(&g), record, &holder, &on_held));
  now = cuvt_stats();
  /* the holder waits in the reactor, not a host function */
  assert_int_equal(D(reactor_waiting), 1);
  /* One submission finished by the reactor thread: it is past any park the holder woke it from,
   * so from here its wake-up count must stay still. (It also makes the default policy's stream,
   * whose worker thread must not be created while the trap flag is set.) */
  atomic_int done = 0;
  cuv_submit_opts_t no_spin = {.flags = CUV_SUBMIT_NO_SPIN};
  assert_cuv_ok(cuv_submit(q, empty(), count_ok, &done, &no_spin));
  drain_until(q, &done, 1);
  before = cuvt_stats();

  register_entry = (uintptr_t)cuv__reactor_arm;
  struct sigaction sa = {.sa_sigaction = on_step, .sa_flags = SA_SIGINFO | SA_RESTART}, old;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(SIGTRAP, &sa, &old), 0);
  for (int i = 0; i < TRACED; i++) {
    cuv_op_t *op = empty();
    trace_on();
    int rc = cuv_submit(q, op, count_ok, &done, &no_spin);
    trace_off();
    assert_cuv_ok(rc);
    drain_until(q, &done, 2 + i); /* one at a time: nothing else armed but the holder */
  }
  assert_int_equal(sigaction(SIGTRAP, &old, NULL), 0);
  now = cuvt_stats();
  print_message("# %u register calls stepped, %u stalls in them, %llu reactor wake-ups\n",
                calls_traced, stalls_in_register, (unsigned long long)D(reactor_wakeups));
  /* The window was opened: every traced submission went through register, a stall per
   * instruction (at least the count, the bit and the test between them). */
  assert_int_equal(calls_traced, TRACED);
  assert_true(stalls_in_register >= 3 * TRACED);
  assert_int_equal(D(completed_reactor), TRACED);
  /* The holder was armed throughout: a park (and so a wake-up) means the count fell to 0 under
   * armed work, i.e. a stream was unlinked before it was counted. */
  assert_int_equal(D(reactor_wakeups), 0);
  assert_int_equal(atomic_load(&holder.calls), 0);

  cuvt_gate_open(&g);
  drain_until(q, &holder.calls, 1);
  assert_cuv_ok(holder.status);
  assert_int_equal(cuv_queue_drain(q), 0); /* no second call */
  assert_int_equal(atomic_load(&holder.calls), 1);
  assert_int_equal(atomic_load(&done), 1 + TRACED);
  cuvt_gate_close(&g);
  cuv_stream_destroy(held);
  assert_cuv_ok(cuv_queue_destroy(q));
}
#endif

/* ---- watched host-callback work ------------------------------------------------------------ */

/* Every flag write refused (a transient error, as on a GPU without stream memory operations):
 * each submission takes the host-callback path and is watched by the reactor. */
static void force_hostfn_path(void) { cuv_sim_fail("cuStreamWriteValue64", 0, CUDA_ERROR_UNKNOWN); }

/* The reactor thread exists and has parked: one submission through it (a thread started by the
 * watch itself would find the count raised and never park), then idle far longer than its 50 us
 * linger. Whether it parked is only seen afterwards (reactor_wakeups): callers retry. */
static void start_reactor(cuv_queue_t *q) {
  atomic_int done = 0;
  cuv_submit_opts_t no_spin = {.flags = CUV_SUBMIT_NO_SPIN};
  assert_cuv_ok(cuv_submit(q, empty(), count_ok, &done, &no_spin));
  drain_until(q, &done, 1);
}

/* Host-callback work held in flight by a gate moves the armed count from 0: the parked reactor
 * must wake (it then probes that work's stream for a fault). Each try: idle, so the reactor parks;
 * submit the held work; wait (bounded) for the wake-up, then open. A try whose reactor had not
 * parked yet sees no wake-up and goes again; a reactor that never wakes fails after 20 tries. */
static void test_watch_wakes_parked_reactor(void **state) {
  (void)state;
  if (!cuvt_is_sim())
    skip(); /* forcing the fallback needs cuv_sim_fail */
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  start_reactor(q);
  force_hostfn_path();
  atomic_int calls = 0;
  bool woke = false;
  for (int tries = 0; !woke; tries++) {
    if (tries == 20)
      fail_msg("the parked reactor never woke for watched host-callback work");
    cuvt_gate_t g;
    cuvt_gate_init(&g);
    idle_ms(50);
    cuv_stats_t before = cuvt_stats(), now;
    cuv_submit_opts_t no_spin = {.flags = CUV_SUBMIT_NO_SPIN};
    assert_cuv_ok(cuv_submit(q, cuvt_gate_wait(&g), count_ok, &calls, &no_spin));
    now = cuvt_stats();
    assert_int_equal(D(fallbacks), 1); /* the host-callback path: watched, not on a word */
    assert_int_equal(D(reactor_waiting), 0);
    /* The work stays armed until the gate opens: give the woken thread up to 1 s to count. */
    for (int waited = 0; waited < 200 && D(reactor_wakeups) == 0; waited++) {
      idle_ms(5);
      now = cuvt_stats();
    }
    woke = D(reactor_wakeups) == 1;
    assert_true(D(reactor_wakeups) <= 1);
    cuvt_gate_open(&g);
    drain_until(q, &calls, tries + 1);
    now = cuvt_stats();
    assert_int_equal(D(completed_hostfn), 1); /* its host function finished it, with success */
    assert_int_equal(D(completed_reactor), 0);
    cuvt_gate_close(&g);
  }
  cuv_sim_fail_clear();
  assert_int_equal(cuv_queue_drain(q), 0);
  assert_cuv_ok(cuv_queue_destroy(q));
}

/* A kernel faults on the stream of watched host-callback work (behind a gate, so the host
 * function is queued before the fault): that host function is dropped, and the reactor's probe of
 * watched streams must deliver the fault, once. The reactor is parked when the work is watched,
 * so the watch's wake-up is on the way too (reported, not asserted: whether it had parked is up to
 * the scheduler; test_watch_wakes_parked_reactor asserts it). */
static void test_fault_fails_watched_hostfn_work(void **state) {
  (void)state;
  if (!cuvt_is_sim())
    skip(); /* forcing the fallback needs cuv_sim_fail */
  cuv_queue_t *q;
  assert_cuv_ok(cuv_queue_create(&q, NULL, NULL));
  start_reactor(q);
  cuvt_gate_t g;
  cuvt_gate_init(&g);
  cuv_stream_t *stream;
  assert_cuv_ok(cuv_stream_create(&stream, cuvt_device()));
  force_hostfn_path();
  idle_ms(50);
  cuv_stats_t before = cuvt_stats(), now;
  unsigned long long bad = 0x10; /* the GPU's first page is never mapped */
  cuv_arg_t args[] = {CUV_ARG_VALUE(bad)};
  cuv_op_t *faulting = cuv_launch(cuvt_kernel_ok("fault_kernel"), CUV_DIM1(1), CUV_DIM1(1), 0,
                                  args, 1);
  seen_t seen = {0};
  cuv_submit_opts_t on_stream = {.stream = stream, .flags = CUV_SUBMIT_NO_SPIN};
  assert_cuv_ok(cuv_submit(q, cuv_seq(cuvt_gate_wait(&g), faulting), record, &seen, &on_stream));
  now = cuvt_stats();
  assert_int_equal(D(fallbacks), 1); /* watched host-callback work, its function queued */
  assert_int_equal(cuv_queue_drain(q), 0); /* held by the gate */

  /* Opening races the fault (the setter's completion may be seen after it): either answer. */
  cuv_arg_t open_args[] = {CUV_ARG_VALUE(g.value), CUV_ARG_WRITE(g.flag)};
  int rc = cuv_sync_on(g.opener,
                       cuv_launch(cuvt_kernel_ok("set_flag"), CUV_DIM1(1), CUV_DIM1(1), 0,
                                  open_args, 2), NULL);
  assert_true(rc == 0 || cuv_status_is_fault(rc));

  drain_until(q, &seen.calls, 1);
  assert_int_equal(cuv_queue_drain(q), 0); /* no second call */
  assert_int_equal(atomic_load(&seen.calls), 1);
  print_message("# watched work: %s\n", cuv_err_name(seen.status));
  assert_int_equal(cuv_cuda_result(seen.status), CUDA_ERROR_ILLEGAL_ADDRESS);
  now = cuvt_stats();
  assert_int_equal(D(completed_reactor), 1); /* the probe of watched streams, nothing else */
  assert_int_equal(D(completed_hostfn), 0);  /* the dead stream never ran its host function */
  assert_true(D(faults) >= 1);
  print_message("# reactor wake-ups meanwhile: %llu\n", (unsigned long long)D(reactor_wakeups));

  cuv_sim_fail_clear();
  assert_cuv_ok(cuv_queue_destroy(q));
  /* After the fault nothing can be read back; the gate's buffers and stream are just dropped. */
  cuv_buffer_unref(g.flag);
  cuv_buffer_unref(g.result);
  cuv_stream_destroy(g.opener);
  cuv_stream_destroy(stream);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
#if defined(STEPPING) /* elsewhere not even listed: a skipped case counts as failed in TAP */
      cmocka_unit_test(test_register_counts_before_bit),
#endif
      cmocka_unit_test(test_watch_wakes_parked_reactor),
      cmocka_unit_test(test_fault_fails_watched_hostfn_work), /* last: the fault is for good */
  };
  return cuvt_run(tests);
}
