/* cuv-bench-cancel: the cost of one cuv_cancel against the number of submissions in flight on
 * its queue. For each N it submits N host-value ops with tickets, undrained (so every cancel
 * finds its submission), cancels them all in a random order, and prints the microseconds per
 * cancel; the last line is the ratio of the largest N's cost per cancel to the smallest's. A
 * cancel that walked every submission in flight grows with N (bench/RESULTS.md); one that looks
 * its ticket up stays flat. No driver work: any driver, the simulator included.
 *
 *   cuv-bench-cancel [N ...]      (default 500 5000 20000) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuv.h>

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void count_done(int status, cuv_output_t *out, void *arg) {
  (void)out;
  if (status != CUV_ECANCELED) {
    fprintf(stderr, "cuv-bench-cancel: a callback saw %s, not CUV_ECANCELED\n",
            cuv_err_name(status));
    exit(1);
  }
  (*(long *)arg)++;
}

static void fail(const char *what, int rc) {
  fprintf(stderr, "cuv-bench-cancel: %s: %s\n", what, cuv_err_name(rc));
  exit(1);
}

/* Microseconds per cancel with n in flight. */
static double per_cancel(cuv_queue_t *q, long n) {
  cuv_ticket_t *tickets = malloc((size_t)n * sizeof *tickets);
  long called = 0;
  if (!tickets)
    fail("tickets", CUV_ENOMEM);
  for (long i = 0; i < n; i++) {
    cuv_submit_opts_t opts = {.ticket = &tickets[i]};
    int rc = cuv_submit(q, cuv_value(NULL, NULL), count_done, &called, &opts);
    if (rc < 0)
      fail("cuv_submit", rc);
  }
  for (long i = n - 1; i > 0; i--) { /* a random order */
    long j = rand() % (i + 1);
    cuv_ticket_t t = tickets[i];
    tickets[i] = tickets[j];
    tickets[j] = t;
  }
  double t0 = now_us();
  for (long i = 0; i < n; i++) {
    int rc = cuv_cancel(q, tickets[i]);
    if (rc < 0)
      fail("cuv_cancel", rc);
  }
  double took = now_us() - t0;
  while (called < n)
    cuv_queue_drain(q);
  while (cuv_queue_pending(q))
    cuv_queue_wait(q, 100), cuv_queue_drain(q);
  free(tickets);
  return took / (double)n;
}

int main(int argc, char **argv) {
  long sizes[16] = {500, 5000, 20000};
  int count = 3;
  if (argc > 1) {
    count = argc - 1 < 16 ? argc - 1 : 16;
    for (int i = 0; i < count; i++)
      if ((sizes[i] = strtol(argv[i + 1], NULL, 10)) <= 0) {
        fprintf(stderr, "usage: cuv-bench-cancel [N ...] (each N > 0, at most 16)\n");
        return 2;
      }
  }
  srand((unsigned)time(NULL));
  cuv_queue_t *q;
  int rc = cuv_queue_create(&q, NULL, NULL);
  if (rc < 0)
    fail("cuv_queue_create", rc);
  double first = 0, last = 0;
  for (int i = 0; i < count; i++) {
    last = per_cancel(q, sizes[i]);
    if (i == 0)
      first = last;
    printf("in flight %6ld: %8.3f us per cancel\n", sizes[i], last);
  }
  printf("per cancel at %ld against %ld in flight: %.2fx\n", sizes[count - 1], sizes[0],
         first > 0 ? last / first : 0.0);
  cuv_queue_destroy(q);
  return 0;
}
