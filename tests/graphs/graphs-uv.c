/* Graph replays delivered into a libuv loop through the bridge: the chain of graph-chain.h
 * captured once, replayed with new inputs (cuv_graph_update on the graph's stream) and its output
 * downloaded in the same submission; every callback runs once, on the loop thread, with the
 * output of its own inputs. Replays all in flight at once, and replays submitted one after the
 * other from the callbacks. */
#include "graph-chain.h"
#include "uvt.h"

#define REPLAYS 20

typedef struct replay {
  uvt_call_t call;
  float want[N];
} replay_t;

static cuv_op_t *replay_op(cuv_graph_t *g, const chain_t *c) {
  return cuv_seq(cuv_graph_launch(g), cuv_download(c->y, 0, N * sizeof(float)));
}

static void assert_replays(replay_t *r, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uvt_assert_all_ok(&r[i].call, 1);
    assert_non_null(r[i].call.out.data);
    cuvt_assert_floats_equal(r[i].call.out.data, r[i].want, N);
    uvt_release_outputs(&r[i].call, 1);
  }
}

static void test_replays_in_flight_together(void **state) {
  chain_t c;
  chain_create(&c);
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, chain_op(&c), NULL, NULL));
  uvt_loop_t l;
  uvt_open(&l);
  replay_t *r = calloc(REPLAYS, sizeof *r);
  assert_non_null(r);
  for (size_t i = 0; i < REPLAYS; i++) {
    new_inputs(g, &c, r[i].want); /* stream order keeps each replay's inputs its own */
    r[i].call.loop = &l;
    cuv_submit_opts_t opts = {.stream = cuv_graph_stream(g)};
    assert_cuv_ok(cuv_uv_submit(l.bridge, replay_op(g, &c), uvt_done, &r[i].call, &opts));
  }
  cuv_graph_unref(g); /* the submitted launches hold it */
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0); /* returns after the last callback */
  assert_replays(r, REPLAYS);
  uvt_close(&l);
  chain_destroy(&c);
  free(r);
}

/* ---- one after the other: each callback copies new inputs in and submits the next replay ---- */

typedef struct sequence {
  uvt_loop_t *loop;
  cuv_graph_t *graph;
  chain_t *chain;
  replay_t *r;
  size_t next;
  int error; /* the first failure inside a callback (asserted by the test thread) */
} sequence_t;

static void sequence_done(int status, cuv_output_t *output, void *arg);

/* Never asserts: it also runs inside a callback. */
static int submit_next(sequence_t *s) {
  replay_t *r = &s->r[s->next++];
  float *in = malloc(N * sizeof *in), *yin = malloc(N * sizeof *yin);
  if (!in || !yin) {
    free(in);
    free(yin);
    return CUV_ENOMEM;
  }
  cuvt_random_ints(in, N);
  cuvt_random_ints(yin, N);
  chain_reference(r->want, in, yin);
  int rc = cuv_graph_update(s->graph, cuv_memcpy_htod(s->chain->in, 0, in, N * sizeof *in, 0));
  if (rc == 0)
    rc = cuv_graph_update(s->graph, cuv_memcpy_htod(s->chain->yin, 0, yin, N * sizeof *yin, 0));
  free(in);
  free(yin);
  r->call.loop = s->loop;
  cuv_submit_opts_t opts = {.stream = cuv_graph_stream(s->graph)};
  if (rc == 0)
    rc = cuv_uv_submit(s->loop->bridge, replay_op(s->graph, s->chain), sequence_done, s, &opts);
  return rc;
}

static void sequence_done(int status, cuv_output_t *output, void *arg) {
  sequence_t *s = arg;
  uvt_done(status, output, &s->r[s->next - 1].call);
  if (s->next < REPLAYS && !s->error)
    s->error = submit_next(s);
}

static void test_replays_one_after_another(void **state) {
  chain_t c;
  chain_create(&c);
  cuv_graph_t *g = NULL;
  assert_cuv_ok(cuv_graph_capture(&g, chain_op(&c), NULL, NULL));
  uvt_loop_t l;
  uvt_open(&l);
  sequence_t s = {&l, g, &c, calloc(REPLAYS, sizeof(replay_t)), 0, 0};
  assert_non_null(s.r);
  assert_cuv_ok(submit_next(&s));
  assert_int_equal(uv_run(&l.loop, UV_RUN_DEFAULT), 0);
  assert_cuv_ok(s.error);
  assert_int_equal(s.next, REPLAYS);
  assert_replays(s.r, REPLAYS);
  cuv_graph_unref(g);
  uvt_close(&l);
  chain_destroy(&c);
  free(s.r);
}

int main(void) {
  cuvt_init();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replays_in_flight_together),
      cmocka_unit_test(test_replays_one_after_another),
  };
  return cuvt_run(tests);
}
