/* tcp-infer-stall: the stream choice that routes around stalled streams (stall.c), on states
 * built by hand: the least loaded wins, ties take turns from the start, a stream whose work
 * showed no progress for the stall time is passed over however lightly loaded, a busy one that
 * progressed is not, an idle one never counts as stalled, and none is chosen when all stalled. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "cli.h"
#include "stall.h"

#define MS 1000000ull

static void test_least_loaded_and_turns(void **state) {
  lane_t l[4] = {{3, 0}, {1, 0}, {1, 0}, {2, 0}};
  uint64_t now = 10 * MS;
  bool stalled = true;
  assert_int_equal(lane_choose(l, 4, 0, now, 100 * MS, &stalled), 1);
  assert_false(stalled); /* all progress (none has gone 100 ms without) */
  assert_int_equal(lane_choose(l, 4, 2, now, 100 * MS, NULL), 2); /* the tie from 2 on */
  assert_int_equal(lane_choose(l, 4, 3, now, 100 * MS, NULL), 1); /* wraps around */
  lane_t idle[3] = {{0, 0}, {0, 0}, {0, 0}};
  for (unsigned start = 0; start < 3; start++)
    assert_int_equal(lane_choose(idle, 3, start, now, 100 * MS, NULL), (int)start);
}

static void test_stalled_passed_over(void **state) {
  /* lane 0 has one kernel in flight and no progress for 150 ms: stalled; lane 1 is busier but
   * progressed 10 ms ago */
  lane_t l[2] = {{1, 0}, {5, 140 * MS}};
  uint64_t now = 150 * MS;
  assert_true(lane_stalled(&l[0], now, 100 * MS));
  assert_false(lane_stalled(&l[1], now, 100 * MS));
  bool stalled = false;
  assert_int_equal(lane_choose(l, 2, 0, now, 100 * MS, &stalled), 1);
  assert_true(stalled); /* one was passed over */
  /* a longer stall time: lane 0 is not stalled yet, and the least loaded again */
  assert_int_equal(lane_choose(l, 2, 0, now, 200 * MS, &stalled), 0);
  assert_false(stalled);
  assert_int_equal(lane_choose(l, 2, 1, now, 100 * MS, &stalled), 1); /* from the other one */
  assert_true(stalled);
  /* idle is never stalled, however old its last progress */
  lane_t idle = {0, 0};
  assert_false(lane_stalled(&idle, 1000 * MS, 100 * MS));
}

static void test_all_stalled(void **state) {
  lane_t l[3] = {{1, 0}, {2, 0}, {1, 5 * MS}};
  bool stalled = false;
  assert_int_equal(lane_choose(l, 3, 0, 500 * MS, 100 * MS, &stalled), -1);
  assert_true(stalled);
  assert_int_equal(lane_choose(l, 3, 1, 500 * MS, UINT64_MAX, &stalled), 2); /* loads only */
  assert_false(stalled);
  assert_int_equal(lane_choose(l, 3, 4, 500 * MS, UINT64_MAX, NULL), 2); /* start past n: 4 % 3 */
  assert_int_equal(lane_choose(l, 0, 0, 500 * MS, 100 * MS, NULL), -1); /* no stream at all */
}

int main(int argc, char **argv) {
  cli_no_options(argc, argv, "the stream choice's cases (cmocka)");
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_least_loaded_and_turns),
                                     cmocka_unit_test(test_stalled_passed_over),
                                     cmocka_unit_test(test_all_stalled)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
