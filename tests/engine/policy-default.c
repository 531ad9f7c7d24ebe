/* Pool policies asked for 0 streams, and a device's default policy, get the configuration's
 * `streams` (include/cuv/config.h): 4, or CUV_STREAMS where meson sets it. Counted as the
 * distinct streams cuv_policy_next_stream hands out: round-robin cycles through exactly that
 * many, and least-loaded with nothing in flight (every load ties, and ties rotate from the
 * round-robin start) does the same. A given count is kept as is. */
#include <stdlib.h>

#include "counted.h"

enum { PICKS = 24 };

typedef int (*pool_fn)(cuv_policy_t **, cuv_device_t *, unsigned);

/* What this run's configuration says: CUV_STREAMS as meson set it, else the default. */
static unsigned configured_streams(void) {
  const char *text = getenv("CUV_STREAMS");
  cuv_config_t c;
  assert_cuv_ok(cuv_config_get(&c));
  assert_int_equal(c.streams, text ? (unsigned)atoi(text) : 4u);
  return c.streams;
}

/* Picks PICKS streams from p; returns how many distinct ones came, and checks the picks repeat
 * with that period (each stream has its turn, none is skipped). */
static unsigned distinct_picks_of(cuv_policy_t *p) {
  cuv_stream_t *picks[PICKS];
  unsigned distinct = 0;
  for (unsigned i = 0; i < PICKS; i++) {
    assert_cuv_ok(cuv_policy_next_stream(p, NULL, &picks[i]));
    assert_non_null(picks[i]);
    assert_ptr_equal(cuv_stream_device(picks[i]), cuvt_device());
    bool seen = false;
    for (unsigned j = 0; j < i; j++)
      seen = seen || picks[j] == picks[i];
    distinct += !seen;
  }
  for (unsigned i = distinct; i < PICKS; i++)
    assert_ptr_equal(picks[i], picks[i - distinct]);
  /* Each is a real stream: work on it runs. */
  cuv_buffer_t *buf = cuvt_buffer(sizeof(unsigned));
  for (unsigned i = 0; i < distinct; i++) {
    unsigned value = cuvt_nonzero_u32(), got = 0;
    assert_cuv_ok(cuv_sync_on(picks[i], cuvt_fill_u32(buf, 1, value), NULL));
    cuvt_read(&got, buf, 0, sizeof got);
    assert_int_equal(got, value);
  }
  cuv_buffer_unref(buf);
  return distinct;
}

static unsigned distinct_picks(pool_fn make, unsigned nstreams) {
  cuv_policy_t *p;
  assert_cuv_ok(make(&p, cuvt_device(), nstreams));
  unsigned distinct = distinct_picks_of(p);
  cuv_policy_destroy(p);
  return distinct;
}

static void test_round_robin_default_is_configured(void **state) {
  assert_int_equal(distinct_picks(cuv_policy_round_robin, 0), configured_streams());
  assert_int_equal(distinct_picks(cuv_policy_round_robin, 3), 3);
  assert_int_equal(distinct_picks(cuv_policy_round_robin, 1), 1);
}

static void test_least_loaded_default_is_configured(void **state) {
  assert_int_equal(distinct_picks(cuv_policy_least_loaded, 0), configured_streams());
  assert_int_equal(distinct_picks(cuv_policy_least_loaded, 3), 3);
  assert_int_equal(distinct_picks(cuv_policy_least_loaded, 1), 1);
}

/* The policy of ops submitted without one: round-robin over the configured number of streams. */
static void test_device_policy_is_configured(void **state) {
  cuv_policy_t *p;
  assert_cuv_ok(cuv_device_policy(cuvt_device(), &p));
  assert_int_equal(distinct_picks_of(p), configured_streams());
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_round_robin_default_is_configured),
      cmocka_unit_test(test_least_loaded_default_is_configured),
      cmocka_unit_test(test_device_policy_is_configured),
  };
  return cuvt_run(tests);
}
