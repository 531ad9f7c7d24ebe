/* The simulator's NCCL entry points (internal/nccl_funcs.h), handed out by cuv_sim_nccl_proc:
 * communicators, groups, and the collectives and send/recv as stream commands that run on the
 * host (sim/nccl_clique.h says how the ranks meet). Each entry point is counted and may be failed
 * by cuv_sim_fail, as the driver's are. Like NCCL, which sets the CUDA device itself, every call on
 * a communicator leaves its device's primary context current on the calling thread (cuv must give
 * its own back: lib/nccl.c).
 *
 * A stream command runs a whole NCCL group (every call between ncclGroupStart and ncclGroupEnd, of
 * every communicator and stream): it advances each call by whichever step can go on, so no order
 * of ranks in one command or across commands deadlocks. Like NCCL, a group over several streams
 * starts once every stream reached it and holds every stream until it ended. A failed rank (an
 * injected error, a killed or exited peer) stops its collectives: they wait, as NCCL's kernels
 * do, until the communicator is aborted, and then end without writing their output. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cmd.h"
#include "context.h"
#include "enter.h"
#include "memory.h"
#include "nccl_clique.h"
#include "nccl_math.h"
#include "stream.h"
#include "submit.h"
#include "util.h"

#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

#define COMM_MAGIC 0x6e63636cu
#define DEFAULT_VERSION CUV__NCCL_VERSION(2, 28, 9)
#define BACKOFF_MIN_NS 1000u
#define BACKOFF_MAX_NS 50000u
#define INIT_SYNC_NS 2000000ull /* an init synchronizes its device this long after the call */

struct sim_nccl_comm {
  uint32_t magic;
  int refs; /* the handle, and each command that names it (sim lock) */
  int rank, nranks, device;
  bool blocking;
  bool handle_live; /* not yet destroyed or aborted (sim lock) */
  struct sim_clique *clique;
  cuv__nccl_id_t id;        /* its group's: a shrink's group is derived from it */
  unsigned shrinks;         /* shrinks made of it, by the one thread calling it (NCCL's rule) */
  uint64_t steps;           /* collective steps begun, by the one command running it */
  _Atomic int async_error;  /* what ncclCommGetAsyncError reports */
  _Atomic bool aborted;     /* its collectives end at once, without output */
  _Atomic bool revoked;     /* ncclCommRevoke: the same, but the handle stays for a shrink */
  _Atomic bool stopping;    /* a shrink with NCCL_SHRINK_ABORT ends its collectives running now */
  _Atomic bool dead;        /* cuv_sim_nccl_kill, _vanish: as if its process had died (it stops) */
  _Atomic int launches;     /* delayed group launches still to enqueue */
  _Atomic bool running;     /* a command of it runs now */
  bool init_done;           /* its init ended (sim lock): no longer held by a hold */
  /* NCCL's init, on a thread of its own once every rank joined, allocates and copies with
   * implicit device-wide synchronization: the device's work submitted until then (INIT_SYNC_NS
   * after the init call, at the earliest) must finish before the communicator is ready. A stream
   * held back until the init ends therefore never lets it end, as on the GPU (sim lock). */
  uint64_t init_sync_at;
  bool init_synced; /* init_waits noted */
  struct sim_init_wait {
    struct sim_stream *s;
    uint64_t target;
  } *init_waits;
  size_t n_init_waits;
  struct sim_nccl_comm *next;
};

static struct sim_nccl_comm *live_comms; /* sim lock */
static _Atomic int version_setting = DEFAULT_VERSION;
static _Atomic unsigned launch_delay_us;
static _Atomic bool inits_held;       /* cuv_sim_nccl_hold_inits */
static _Atomic unsigned inits_waiting; /* callers inside a blocking init now */
static _Atomic unsigned long groups_blocking, groups_nonblocking; /* group ends with calls */

/* ---- communicators ---- */

/* The communicator behind a live handle, or NULL (sim lock). */
static struct sim_nccl_comm *comm_get(cuv__nccl_comm_t h) {
  for (struct sim_nccl_comm *c = live_comms; c; c = c->next)
    if ((void *)c == (void *)h && c->magic == COMM_MAGIC)
      return c;
  return NULL;
}

/* Forgets the init's waits (sim lock). */
static void init_waits_free(struct sim_nccl_comm *c) {
  for (size_t i = 0; i < c->n_init_waits; i++)
    sim_stream_unref(c->init_waits[i].s);
  free(c->init_waits);
  c->init_waits = NULL;
  c->n_init_waits = 0;
}

/* Notes every stream of ctx and the work submitted to it so far (sim lock). False when out of
 * memory. */
static bool init_waits_note(struct sim_nccl_comm *c, const struct sim_ctx *ctx) {
  size_t n = 0;
  for (struct sim_stream *s = ctx ? ctx->streams : NULL; s; s = s->next)
    n++;
  c->init_waits = n ? calloc(n, sizeof *c->init_waits) : NULL;
  if (n && !c->init_waits)
    return false;
  for (struct sim_stream *s = ctx ? ctx->streams : NULL; s; s = s->next) {
    sim_stream_ref(s);
    c->init_waits[c->n_init_waits++] = (struct sim_init_wait){s, s->submitted};
  }
  return true;
}

/* Has the work the init waits for finished? Noted once the init's synchronization is due (sim
 * lock). */
static bool init_drained(struct sim_nccl_comm *c) {
  if (!c->init_synced) {
    if (sim_now_ns() < c->init_sync_at || !init_waits_note(c, sim_ctx_of_device(c->device)))
      return false;
    c->init_synced = true;
  }
  for (size_t i = 0; i < c->n_init_waits; i++)
    if (!sim_stream_settled(c->init_waits[i].s, c->init_waits[i].target))
      return false;
  init_waits_free(c);
  return true;
}

static void comm_unref(struct sim_nccl_comm *c) {
  if (--c->refs > 0)
    return;
  init_waits_free(c);
  sim_clique_release(c->clique);
  c->magic = 0;
  free(c);
}

/* Ends the handle: unlinked, its rank gone for the peers, freed with its last command (sim
 * lock). */
static void comm_close(struct sim_nccl_comm *c) {
  for (struct sim_nccl_comm **p = &live_comms; *p; p = &(*p)->next)
    if (*p == c) {
      *p = c->next;
      break;
    }
  c->handle_live = false;
  atomic_store(&c->aborted, true);
  sim_clique_leave(c->clique);
  sim_wake_all();
  comm_unref(c);
}

/* NCCL sets the device of the communicator current (cudaSetDevice). */
static void comm_set_device(const struct sim_nccl_comm *c) { sim_ctx_make_current(c->device); }

/* The state ncclCommGetAsyncError reports. */
static int comm_state(struct sim_nccl_comm *c) {
  if (atomic_load(&c->dead))
    return CUV__NCCL_SYSTEM_ERROR;
  int error = atomic_load(&c->async_error);
  if (error)
    return error;
  if (atomic_load(&c->revoked)) /* NCCL's: in progress until quiescent */
    return atomic_load(&c->running) ? CUV__NCCL_IN_PROGRESS : CUV__NCCL_SUCCESS;
  if (!sim_clique_complete(c->clique))
    return CUV__NCCL_IN_PROGRESS;
  if (sim_clique_shares_device(c->clique))
    return CUV__NCCL_INVALID_USAGE;
  if (!c->init_done && (atomic_load(&inits_held) || !init_drained(c)))
    return CUV__NCCL_IN_PROGRESS;
  c->init_done = true;
  return atomic_load(&c->launches) > 0 ? CUV__NCCL_IN_PROGRESS : CUV__NCCL_SUCCESS;
}

/* What ncclCommGetAsyncError would say (takes the sim lock). */
static int comm_state_now(struct sim_nccl_comm *c) {
  sim_lock();
  int state = comm_state(c);
  sim_unlock();
  return state;
}

/* Sets an asynchronous error unless one is set. */
static void comm_fail(struct sim_nccl_comm *c, int error) {
  int none = 0;
  atomic_compare_exchange_strong(&c->async_error, &none, error);
}

/* Whether its collectives end at once, without output: aborted, revoked, or being stopped by a
 * shrink. */
static bool comm_ended(struct sim_nccl_comm *c) {
  return atomic_load(&c->aborted) || atomic_load(&c->revoked) || atomic_load(&c->stopping);
}

/* ---- calls and their progress ---- */

enum { K_ALLREDUCE, K_BROADCAST, K_REDUCE, K_ALLGATHER, K_REDUCESCATTER, K_SEND, K_RECV };

struct nccl_call {
  int kind, type, op, root, peer;
  uint64_t count;
  const char *send;
  char *recv;
  struct sim_nccl_comm *comm;
  CUstream stream;
  /* progress, while its command runs */
  uint64_t done;   /* elements (collectives) or bytes (send/recv) done */
  uint64_t step;   /* the collective step posted and not yet gathered, else 0 */
  bool finished;
};

static bool is_p2p(const struct nccl_call *k) { return k->kind == K_SEND || k->kind == K_RECV; }

/* Whether an earlier call of the group must finish first: a collective of the same communicator,
 * or a transfer of the same communicator, direction and peer (NCCL matches those in order). */
static bool blocked_by_earlier(const struct nccl_call *calls, size_t i) {
  for (size_t j = 0; j < i; j++) {
    const struct nccl_call *a = &calls[j], *b = &calls[i];
    if (a->finished || a->comm != b->comm)
      continue;
    if (!is_p2p(a) && !is_p2p(b))
      return true;
    if (a->kind == b->kind && a->peer == b->peer)
      return true;
  }
  return false;
}

/* This step's chunk of the call, and what the rank puts in its slot for it. */
static void step_chunk(struct nccl_call *k, struct sim_step *d, const char **src, size_t *seg,
                       size_t *nseg) {
  struct sim_clique *c = k->comm->clique;
  size_t size = sim_nccl_type_size(k->type);
  bool scatter = k->kind == K_REDUCESCATTER;
  uint64_t cap = sim_clique_step_elems(c, k->type, scatter);
  uint64_t left = k->count - k->done;
  *d = (struct sim_step){k->kind, k->type, k->op, k->root, k->count, k->done,
                         left < cap ? left : cap};
  *src = k->send + k->done * size;
  *seg = d->len * size;
  *nseg = 1;
  if (k->kind == K_BROADCAST && k->comm->rank != k->root)
    *nseg = 0; /* only the root's data travels */
  if (scatter)
    *nseg = (size_t)k->comm->nranks; /* one chunk per destination rank */
}

/* Puts the step's input in the rank's slot, once the slots are free. */
static bool post_step(struct nccl_call *k, uint64_t step) {
  struct sim_step d;
  const char *src;
  size_t seg, nseg;
  step_chunk(k, &d, &src, &seg, &nseg);
  if (nseg <= 1)
    return sim_clique_try_post(k->comm->clique, step, &d, src, seg * nseg);
  /* reduce-scatter: the chunks destined to each rank, side by side */
  char *staging = malloc(seg * nseg + 1);
  if (!staging)
    return false;
  size_t stride = k->count * sim_nccl_type_size(k->type);
  for (size_t j = 0; j < nseg; j++)
    memcpy(staging + j * seg, src + j * stride, seg);
  bool posted = sim_clique_try_post(k->comm->clique, step, &d, staging, seg * nseg);
  free(staging);
  return posted;
}

/* Reduces the ranks' chunks (at byte offset `at` of each slot) into out. */
static void reduce_into(char *out, const void *const *slots, size_t at, size_t len,
                        const struct nccl_call *k) {
  size_t size = sim_nccl_type_size(k->type);
  memmove(out, (const char *)slots[0] + at, len * size);
  for (int j = 1; j < k->comm->nranks; j++)
    sim_nccl_accumulate(out, (const char *)slots[j] + at, len, k->type, k->op);
  if (k->op == 4 /* ncclAvg */)
    sim_nccl_divide(out, len, k->type, k->comm->nranks);
}

/* This rank's output of the step. */
static void compute_step(struct nccl_call *k, const void *const *slots) {
  size_t size = sim_nccl_type_size(k->type);
  uint64_t cap = sim_clique_step_elems(k->comm->clique, k->type, k->kind == K_REDUCESCATTER);
  uint64_t left = k->count - k->done, len = left < cap ? left : cap;
  int rank = k->comm->rank;
  switch (k->kind) {
  case K_ALLREDUCE: reduce_into(k->recv + k->done * size, slots, 0, len, k); break;
  case K_REDUCE:
    if (rank == k->root)
      reduce_into(k->recv + k->done * size, slots, 0, len, k);
    break;
  case K_BROADCAST: memmove(k->recv + k->done * size, slots[k->root], len * size); break;
  case K_ALLGATHER:
    for (int j = 0; j < k->comm->nranks; j++)
      memcpy(k->recv + ((uint64_t)j * k->count + k->done) * size, slots[j], len * size);
    break;
  case K_REDUCESCATTER:
    reduce_into(k->recv + k->done * size, slots, (size_t)rank * len * size, len, k);
    break;
  default: break;
  }
  k->done += len;
}

static bool advance_collective(struct nccl_call *k) {
  struct sim_nccl_comm *c = k->comm;
  if (!k->step) {
    if (!post_step(k, c->steps + 1))
      return false;
    k->step = ++c->steps;
    return true;
  }
  bool mismatch;
  const void *const *slots = sim_clique_try_gather(c->clique, k->step, &mismatch);
  if (!slots)
    return false;
  if (mismatch) { /* the ranks called different collectives: NCCL would hang or corrupt */
    comm_fail(c, CUV__NCCL_INVALID_USAGE);
    return true;
  }
  compute_step(k, slots);
  sim_clique_consumed(c->clique, k->step);
  k->step = 0;
  k->finished = k->done >= k->count;
  return true;
}

static bool advance_p2p(struct nccl_call *k) {
  struct sim_clique *c = k->comm->clique;
  uint64_t total = k->count * sim_nccl_type_size(k->type), left = total - k->done;
  size_t chunk = left < sim_clique_box_bytes(c) ? (size_t)left : sim_clique_box_bytes(c);
  bool moved;
  if (k->kind == K_SEND) {
    moved = sim_clique_try_send(c, k->peer, k->send + k->done, chunk);
    k->done += moved ? chunk : 0;
  } else {
    size_t got = 0;
    moved = sim_clique_try_recv(c, k->peer, k->recv + k->done, (size_t)left, &got);
    if (moved && got > left)
      comm_fail(k->comm, CUV__NCCL_INVALID_USAGE); /* the peer sent more than asked for */
    k->done += moved ? (got < left ? got : left) : 0;
  }
  k->finished = k->done >= total;
  return moved;
}

/* One call's next step, if it can take one. A communicator that failed stops until it is
 * aborted, as NCCL's kernels wait for data that never comes. A peer that left is an error only
 * when the call cannot go on without it (a peer that finished and destroyed its communicator may
 * have given all it had to give). */
static bool advance(struct nccl_call *calls, size_t i) {
  struct nccl_call *k = &calls[i];
  struct sim_nccl_comm *c = k->comm;
  if (comm_ended(c)) {
    k->finished = true; /* ended, its output unwritten */
    return true;
  }
  if (atomic_load(&c->dead) || atomic_load(&c->async_error) || blocked_by_earlier(calls, i))
    return false;
  if (k->count == 0) {
    k->finished = true;
    return true;
  }
  if (is_p2p(k) ? advance_p2p(k) : advance_collective(k))
    return true;
  if (sim_clique_peer_gone(c->clique) >= 0)
    comm_fail(c, CUV__NCCL_REMOTE_ERROR); /* what NCCL's proxy sees when a peer's socket closes */
  return false;
}

static void run_calls(struct nccl_call *calls, size_t n) {
  uint64_t backoff = BACKOFF_MIN_NS;
  for (size_t left = n; left > 0;) {
    bool progress = false;
    left = 0;
    for (size_t i = 0; i < n; i++) {
      if (!calls[i].finished)
        progress = advance(calls, i) || progress;
      left += !calls[i].finished;
    }
    if (left && !progress) {
      sim_sleep_ns(backoff);
      backoff = backoff * 2 < BACKOFF_MAX_NS ? backoff * 2 : BACKOFF_MAX_NS;
    } else {
      backoff = BACKOFF_MIN_NS;
    }
  }
}

/* ---- the group command ---- */

/* Joins the other streams of a group to its command (not while capturing: a capture is one
 * sequence already). */
struct group_gate {
  int refs;
  int expected, arrived;
  bool done;
};

static void gate_unref(struct group_gate *g) {
  if (g && --g->refs == 0)
    free(g);
}

struct group_cmd {
  struct sim_cmd base;
  struct nccl_call *calls;
  size_t n;
  struct group_gate *gate;
};

/* Every comm named once more or less (sim lock). */
static void calls_ref(struct nccl_call *calls, size_t n, int delta) {
  for (size_t i = 0; i < n; i++) {
    if (delta > 0)
      calls[i].comm->refs++;
    else
      comm_unref(calls[i].comm);
  }
}

/* Two commands of one communicator at once can only be a misuse (NCCL's order across ranks
 * would be lost): flagged as invalid usage. */
static void mark_running(struct nccl_call *calls, size_t n, bool on) {
  for (size_t i = 0; i < n; i++) {
    bool named_before = false;
    for (size_t j = 0; j < i; j++)
      named_before = named_before || calls[j].comm == calls[i].comm;
    if (named_before)
      continue;
    bool was = atomic_exchange(&calls[i].comm->running, on);
    if (on && was)
      comm_fail(calls[i].comm, CUV__NCCL_INVALID_USAGE);
  }
}

static bool all_ended(const struct nccl_call *calls, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!comm_ended(calls[i].comm))
      return false;
  return true;
}

static void group_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct group_cmd *g = (struct group_cmd *)cmd;
  sim_lock();
  while (g->gate && g->gate->arrived < g->gate->expected && !all_ended(g->calls, g->n) &&
         !atomic_load(&s->stop))
    sim_wait();
  sim_unlock();
  for (size_t i = 0; i < g->n; i++) {
    g->calls[i].done = g->calls[i].step = 0;
    g->calls[i].finished = false;
  }
  mark_running(g->calls, g->n, true);
  run_calls(g->calls, g->n);
  mark_running(g->calls, g->n, false);
}

static bool group_dup(struct sim_cmd *copy) {
  struct group_cmd *g = (struct group_cmd *)copy;
  struct nccl_call *calls = malloc(g->n * sizeof *calls);
  if (!calls)
    return false;
  memcpy(calls, g->calls, g->n * sizeof *calls);
  g->calls = calls;
  g->gate = NULL; /* captured: the graph is one sequence */
  calls_ref(calls, g->n, +1);
  return true;
}

/* Also when dropped unrun: the other streams stop waiting. */
static void group_release(struct sim_cmd *cmd) {
  struct group_cmd *g = (struct group_cmd *)cmd;
  if (g->gate) {
    g->gate->done = true;
    sim_wake_all();
  }
  gate_unref(g->gate);
  calls_ref(g->calls, g->n, -1);
  free(g->calls);
}

static const struct sim_cmd_ops group_ops = {
    .run = group_run, .dup = group_dup, .release = group_release};

struct gate_cmd {
  struct sim_cmd base;
  struct group_gate *gate;
  bool arrived;
};

static void gate_arrive(struct gate_cmd *c) {
  if (!c->arrived) {
    c->arrived = true;
    c->gate->arrived++;
    sim_wake_all();
  }
}

static void gate_run(struct sim_cmd *cmd, struct sim_stream *s) {
  struct gate_cmd *c = (struct gate_cmd *)cmd;
  sim_lock();
  gate_arrive(c);
  while (!c->gate->done && !atomic_load(&s->stop) && !sim_ctx_fault(s->obj.ctx))
    sim_wait();
  sim_unlock();
}

static void gate_release(struct sim_cmd *cmd) {
  struct gate_cmd *c = (struct gate_cmd *)cmd;
  gate_arrive(c); /* dropped unrun: the group must not wait for it */
  gate_unref(c->gate);
}

static const struct sim_cmd_ops gate_ops = {.run = gate_run, .release = gate_release};

/* The distinct streams of the calls, the first call's first (sim lock). */
static CUresult group_streams(struct nccl_call *calls, size_t n, struct sim_stream **out,
                              size_t *count) {
  *count = 0;
  for (size_t i = 0; i < n; i++) {
    struct sim_stream *s;
    CUresult r = sim_stream_get_live(calls[i].stream, &s);
    if (r != CUDA_SUCCESS)
      return r;
    bool seen = false;
    for (size_t j = 0; j < *count; j++)
      seen = seen || out[j] == s;
    if (!seen)
      out[(*count)++] = s;
  }
  return CUDA_SUCCESS;
}

/* Gates on the other streams, then the group's command on the first (sim lock). */
static int enqueue_gated(struct group_cmd *g, struct sim_stream **streams, size_t ns) {
  struct group_gate *gate = calloc(1, sizeof *gate);
  if (!gate)
    return CUV__NCCL_SYSTEM_ERROR;
  gate->refs = 1;
  gate->expected = (int)ns - 1;
  g->gate = gate;
  for (size_t i = 1; i < ns; i++) {
    struct gate_cmd *c = sim_cmd_new(&gate_ops, sizeof *c);
    if (!c) {
      gate->expected = (int)i - 1; /* those enqueued will arrive */
      break;
    }
    c->gate = gate;
    gate->refs++;
    sim_stream_push(streams[i], &c->base);
  }
  sim_stream_push(streams[0], &g->base);
  return CUV__NCCL_SUCCESS;
}

/* Enqueues a group's calls as one command; takes the calls array (freed on failure). */
static int group_enqueue(struct nccl_call *calls, size_t n) {
  struct sim_stream **streams = malloc(n * sizeof *streams);
  size_t ns = 0;
  sim_lock();
  CUresult r = streams ? group_streams(calls, n, streams, &ns) : CUDA_ERROR_OUT_OF_MEMORY;
  struct group_cmd *g = r == CUDA_SUCCESS ? sim_cmd_new(&group_ops, sizeof *g) : NULL;
  int result = r != CUDA_SUCCESS ? CUV__NCCL_UNHANDLED_CUDA_ERROR
                                 : g ? CUV__NCCL_SUCCESS : CUV__NCCL_SYSTEM_ERROR;
  bool captured = result == CUV__NCCL_SUCCESS && ns > 0 && streams[0]->cap;
  for (size_t i = 1; captured && i < ns; i++)
    if (streams[i]->cap != streams[0]->cap)
      result = CUV__NCCL_INVALID_USAGE; /* a group half inside a capture */
  if (result != CUV__NCCL_SUCCESS) {
    free(g);
    free(calls);
    sim_unlock();
    free(streams);
    return result;
  }
  g->calls = calls;
  g->n = n;
  calls_ref(calls, n, +1);
  if (captured)
    result = sim_stream_submit(streams[0], &g->base) == CUDA_SUCCESS ? CUV__NCCL_SUCCESS
                                                                     : CUV__NCCL_INVALID_USAGE;
  else
    result = enqueue_gated(g, streams, ns);
  sim_unlock();
  free(streams);
  return result;
}

/* ---- groups ---- */

static _Thread_local struct {
  int depth;
  int error; /* the first failed call's result: the whole group fails with it */
  struct nccl_call *calls;
  size_t n, cap;
  struct sim_nccl_comm *blocking[SIM_NCCL_MAX_RANKS]; /* created blocking, awaited at the end */
  size_t nblocking;
} group;

struct delayed_launch {
  struct nccl_call *calls;
  size_t n;
};

static void *delayed_main(void *arg) {
  struct delayed_launch *d = arg;
  sim_sleep_ns((uint64_t)atomic_load(&launch_delay_us) * 1000u);
  struct sim_nccl_comm **comms = malloc(d->n * sizeof *comms);
  for (size_t i = 0; comms && i < d->n; i++)
    comms[i] = d->calls[i].comm; /* held by the launch (launch_later) */
  int r = comms ? group_enqueue(d->calls, d->n) : CUV__NCCL_SYSTEM_ERROR;
  sim_lock();
  for (size_t i = 0; i < d->n; i++) {
    struct sim_nccl_comm *c = comms ? comms[i] : d->calls[i].comm;
    if (r != CUV__NCCL_SUCCESS)
      comm_fail(c, r);
    atomic_fetch_sub(&c->launches, 1);
    comm_unref(c);
  }
  sim_unlock();
  if (!comms)
    free(d->calls);
  free(comms);
  free(d);
  return NULL;
}

/* Whether the group's communicators are non-blocking; -1 when it mixes both kinds, which NCCL
 * refuses (ncclInvalidArgument: a group ends one way or the other). */
static int group_nonblocking(const struct nccl_call *calls, size_t n) {
  int blocking = 0, nonblocking = 0;
  for (size_t i = 0; i < n; i++) {
    blocking |= calls[i].comm->blocking;
    nonblocking |= !calls[i].comm->blocking;
  }
  return blocking && nonblocking ? -1 : nonblocking;
}

/* NCCL's non-blocking launch when cuv_sim_nccl_set_launch_delay_us asks for one: the calls reach
 * their streams later, from another thread (NCCL starts one per group end), and the communicators
 * report ncclInProgress until then. A blocking group is launched by its ncclGroupEnd, on the
 * calling thread: it never pays the delay. */
static bool launch_later(struct nccl_call *calls, size_t n, bool nonblocking) {
  bool delayed = nonblocking && atomic_load(&launch_delay_us);
  struct delayed_launch *d = delayed ? malloc(sizeof *d) : NULL;
  if (!d)
    return false;
  *d = (struct delayed_launch){calls, n};
  sim_lock();
  for (size_t i = 0; i < n; i++) {
    calls[i].comm->refs++;
    atomic_fetch_add(&calls[i].comm->launches, 1);
  }
  sim_unlock();
  if (sim_thread_start(delayed_main, d))
    return true;
  sim_lock();
  for (size_t i = 0; i < n; i++) {
    atomic_fetch_sub(&calls[i].comm->launches, 1);
    comm_unref(calls[i].comm);
  }
  sim_unlock();
  free(d);
  return false;
}

static int group_flush(void) {
  struct nccl_call *calls = group.calls;
  size_t n = group.n;
  int error = group.error;
  group.calls = NULL;
  group.n = group.cap = 0;
  group.error = 0;
  int nonblocking = n ? group_nonblocking(calls, n) : 0;
  if (nonblocking < 0 && !error)
    error = CUV__NCCL_INVALID_ARGUMENT;
  if (error || n == 0) {
    free(calls);
    return error;
  }
  atomic_fetch_add(nonblocking ? &groups_nonblocking : &groups_blocking, 1);
  if (launch_later(calls, n, nonblocking))
    return CUV__NCCL_IN_PROGRESS;
  return group_enqueue(calls, n);
}

static int group_add(const struct nccl_call *k) {
  if (group.n == group.cap) {
    size_t cap = group.cap ? group.cap * 2 : 8;
    struct nccl_call *grown = realloc(group.calls, cap * sizeof *grown);
    if (!grown)
      return CUV__NCCL_SYSTEM_ERROR;
    group.calls = grown;
    group.cap = cap;
  }
  group.calls[group.n++] = *k;
  return CUV__NCCL_SUCCESS;
}

/* The bytes a call reads and writes at this rank (NCCL ignores the root's-only pointers
 * elsewhere). */
static void call_bytes(const struct nccl_call *k, const struct sim_nccl_comm *c, size_t *send,
                       size_t *recv) {
  size_t one = k->count * sim_nccl_type_size(k->type), all = one * (size_t)c->nranks;
  bool root = c->rank == k->root;
  *send = k->kind == K_RECV || (k->kind == K_BROADCAST && !root) ? 0
          : k->kind == K_REDUCESCATTER                           ? all
                                                                 : one;
  *recv = k->kind == K_SEND || (k->kind == K_REDUCE && !root) ? 0
          : k->kind == K_ALLGATHER                            ? all
                                                              : one;
}

/* Checks a call and adds it to the group (a call outside one is a group of its own). */
static int call_submit(struct nccl_call *k, cuv__nccl_comm_t handle) {
  size_t size = sim_nccl_type_size(k->type), send_bytes = 0, recv_bytes = 0;
  int r = CUV__NCCL_SUCCESS;
  sim_lock();
  struct sim_nccl_comm *c = comm_get(handle);
  if (c)
    call_bytes(k, c, &send_bytes, &recv_bytes);
  struct sim_stream *s = NULL;
  if (!c || !size || (!is_p2p(k) && k->kind != K_ALLGATHER && k->kind != K_BROADCAST &&
                      !sim_nccl_op_valid(k->op)))
    r = CUV__NCCL_INVALID_ARGUMENT;
  else if (!sim_clique_complete(c->clique) || atomic_load(&c->revoked))
    r = CUV__NCCL_INVALID_USAGE; /* before the communicator is ready, or once revoked */
  else if (sim_stream_get_live(k->stream, &s) != CUDA_SUCCESS || s->obj.ctx->device != c->device)
    r = CUV__NCCL_INVALID_ARGUMENT; /* the stream must be of the communicator's device */
  else if (k->root < 0 || k->root >= c->nranks || k->peer < 0 || k->peer >= c->nranks)
    r = CUV__NCCL_INVALID_ARGUMENT;
  else if ((send_bytes && (!k->send || !sim_mem_valid((uintptr_t)k->send, send_bytes))) ||
           (recv_bytes && (!k->recv || !sim_mem_valid((uintptr_t)k->recv, recv_bytes))))
    r = CUV__NCCL_INVALID_ARGUMENT; /* outside every allocation: the GPU would fault */
  if (c)
    comm_set_device(c);
  sim_unlock();
  k->comm = c;
  if (r == CUV__NCCL_SUCCESS)
    r = group_add(k);
  if (r != CUV__NCCL_SUCCESS && !group.error)
    group.error = r;
  if (group.depth == 0)
    return r == CUV__NCCL_SUCCESS ? group_flush() : (group_flush(), r);
  return r;
}

/* ---- entry points ---- */

#define SIM_NCCL_ENTER(name)                                                                      \
  do {                                                                                            \
    CUresult sim__r = sim_enter(SIM_ID_##name, SIM_CHECK_NONE);                                   \
    if (sim__r != CUDA_SUCCESS)                                                                   \
      return (int)sim__r;                                                                         \
  } while (0)

static int sim_ncclGetVersion(int *version) {
  SIM_NCCL_ENTER(ncclGetVersion);
  if (!version)
    return CUV__NCCL_INVALID_ARGUMENT;
  *version = atomic_load(&version_setting);
  return CUV__NCCL_SUCCESS;
}

static int sim_ncclGetUniqueId(cuv__nccl_id_t *id) {
  SIM_NCCL_ENTER(ncclGetUniqueId);
  if (!id)
    return CUV__NCCL_INVALID_ARGUMENT;
  sim_clique_make_id(id);
  return CUV__NCCL_SUCCESS;
}

/* Blocking unless the configuration says blocking = 0 (NCCL's rule, versions 2.14 and later). */
static bool config_blocking(const cuv__nccl_config_t *config) {
  return !config || config->version < CUV__NCCL_VERSION(2, 14, 0) || config->blocking != 0;
}

/* A blocking init's wait on its caller's thread, counted for cuv_sim_nccl_inits_waiting. */
static int await_init(struct sim_nccl_comm *c) {
  atomic_fetch_add(&inits_waiting, 1);
  int state;
  while ((state = comm_state_now(c)) == CUV__NCCL_IN_PROGRESS)
    sim_sleep_ns(BACKOFF_MAX_NS);
  atomic_fetch_sub(&inits_waiting, 1);
  return state;
}

/* A new rank `rank` of the group `id` on `device`, listed live; NCCL's result. */
static int comm_new(struct sim_nccl_comm **out, int nranks, const cuv__nccl_id_t *id, int rank,
                    int device, bool blocking) {
  struct sim_nccl_comm *c = calloc(1, sizeof *c);
  if (!c)
    return CUV__NCCL_SYSTEM_ERROR;
  int r = sim_clique_join(id, nranks, rank, device, &c->clique);
  if (r != CUV__NCCL_SUCCESS) {
    free(c);
    return r;
  }
  c->magic = COMM_MAGIC;
  c->refs = 1;
  c->rank = rank;
  c->nranks = nranks;
  c->device = device;
  c->id = *id;
  c->blocking = blocking;
  c->handle_live = true;
  sim_lock();
  c->init_sync_at = sim_now_ns() + INIT_SYNC_NS;
  c->next = live_comms;
  live_comms = c;
  sim_unlock();
  *out = c;
  return CUV__NCCL_SUCCESS;
}

/* A new communicator's init: a blocking one inside a group is ready by the group's end, one
 * outside is awaited here; a non-blocking one reports its failure through
 * ncclCommGetAsyncError. */
static int comm_start(struct sim_nccl_comm *c) {
  if (c->blocking && group.depth > 0 && group.nblocking < SIM_NCCL_MAX_RANKS) {
    group.blocking[group.nblocking++] = c;
    return CUV__NCCL_SUCCESS;
  }
  int state = comm_state_now(c);
  if (c->blocking)
    state = await_init(c);
  return c->blocking || state == CUV__NCCL_SUCCESS ? state : CUV__NCCL_IN_PROGRESS;
}

static int init_rank_config(cuv__nccl_comm_t *out, int nranks, cuv__nccl_id_t id, int rank,
                            cuv__nccl_config_t *config) {
  if (!out || (config && config->magic != CUV__NCCL_CONFIG_MAGIC))
    return CUV__NCCL_INVALID_ARGUMENT;
  struct sim_ctx *ctx = sim_ctx_current();
  struct sim_nccl_comm *c;
  int r = comm_new(&c, nranks, &id, rank, ctx ? ctx->device : 0 /* NCCL's cudaGetDevice */,
                   config_blocking(config));
  if (r != CUV__NCCL_SUCCESS)
    return r;
  *out = (cuv__nccl_comm_t)(void *)c;
  return comm_start(c);
}

/* A call that fails inside a group fails the group, as NCCL's does: its ncclGroupEnd returns the
 * error, and the group's other inits do not wait for a rank that never joins. */
static int sim_ncclCommInitRankConfig(cuv__nccl_comm_t *out, int nranks, cuv__nccl_id_t id,
                                      int rank, cuv__nccl_config_t *config) {
  int r = (int)sim_enter(SIM_ID_ncclCommInitRankConfig, SIM_CHECK_NONE);
  if (r == CUV__NCCL_SUCCESS)
    r = init_rank_config(out, nranks, id, rank, config);
  if (r != CUV__NCCL_SUCCESS && r != CUV__NCCL_IN_PROGRESS && group.depth > 0 && !group.error)
    group.error = r;
  return r;
}

static int sim_ncclCommGetAsyncError(cuv__nccl_comm_t h, cuv__nccl_result_t *error) {
  SIM_NCCL_ENTER(ncclCommGetAsyncError);
  sim_lock();
  struct sim_nccl_comm *c = comm_get(h);
  int r = c && error ? CUV__NCCL_SUCCESS : CUV__NCCL_INVALID_ARGUMENT;
  if (r == CUV__NCCL_SUCCESS)
    *error = comm_state(c);
  sim_unlock();
  return r;
}

static int sim_ncclCommFinalize(cuv__nccl_comm_t h) {
  SIM_NCCL_ENTER(ncclCommFinalize);
  sim_lock();
  struct sim_nccl_comm *c = comm_get(h);
  /* NCCL's rule: a revoked communicator is destroyed, never finalized */
  int r = c && !atomic_load(&c->revoked) ? CUV__NCCL_SUCCESS : CUV__NCCL_INVALID_ARGUMENT;
  sim_unlock();
  return r;
}

/* Destroy and abort both end the handle at once: the simulator's commands of the communicator
 * are over by a destroy (the caller waited for them), and an abort ends those still waiting. */
static int comm_end(cuv__nccl_comm_t h) {
  sim_lock();
  struct sim_nccl_comm *c = comm_get(h);
  if (c)
    comm_close(c);
  sim_unlock();
  return c ? CUV__NCCL_SUCCESS : CUV__NCCL_INVALID_ARGUMENT;
}

static int sim_ncclCommDestroy(cuv__nccl_comm_t h) {
  SIM_NCCL_ENTER(ncclCommDestroy);
  return comm_end(h);
}

static int sim_ncclCommAbort(cuv__nccl_comm_t h) {
  SIM_NCCL_ENTER(ncclCommAbort);
  return comm_end(h);
}

static int sim_ncclGroupStart(void) {
  SIM_NCCL_ENTER(ncclGroupStart);
  group.depth++;
  return CUV__NCCL_SUCCESS;
}

/* The blocking communicators the group created: NCCL initializes a group's at its end, and a
 * blocking ncclGroupEnd returns once they are ready, or with the first one's error. A group with a
 * failed call initializes none: they report its error. */
static void await_blocking(void) {
  for (size_t i = 0; i < group.nblocking; i++) {
    int state = group.error ? group.error : await_init(group.blocking[i]);
    if (state != CUV__NCCL_SUCCESS) {
      comm_fail(group.blocking[i], state);
      group.error = state; /* the group's end returns it */
    }
  }
  group.nblocking = 0;
}

static int sim_ncclGroupEnd(void) {
  SIM_NCCL_ENTER(ncclGroupEnd);
  if (group.depth == 0)
    return CUV__NCCL_INVALID_USAGE;
  if (--group.depth > 0)
    return CUV__NCCL_SUCCESS;
  await_blocking();
  return group_flush();
}

/* A call of `kind` with NCCL's arguments, checked and grouped. */
static int call(int kind, const void *send, void *recv, size_t count, int type, int op, int root,
                int peer, cuv__nccl_comm_t comm, CUstream stream) {
  struct nccl_call k = {.kind = kind, .type = type, .op = op, .root = root, .peer = peer,
                        .count = count, .send = send, .recv = recv, .stream = stream};
  return call_submit(&k, comm);
}

static int sim_ncclAllReduce(const void *send, void *recv, size_t count, int type, int op,
                             cuv__nccl_comm_t comm, CUstream stream) {
  SIM_NCCL_ENTER(ncclAllReduce);
  return call(K_ALLREDUCE, send, recv, count, type, op, 0, 0, comm, stream);
}

static int sim_ncclBroadcast(const void *send, void *recv, size_t count, int type, int root,
                             cuv__nccl_comm_t comm, CUstream stream) {
  SIM_NCCL_ENTER(ncclBroadcast);
  return call(K_BROADCAST, send, recv, count, type, 0, root, 0, comm, stream);
}

static int sim_ncclReduce(const void *send, void *recv, size_t count, int type, int op, int root,
                          cuv__nccl_comm_t comm, CUstream stream) {
  SIM_NCCL_ENTER(ncclReduce);
  return call(K_REDUCE, send, recv, count, type, op, root, 0, comm, stream);
}

static int sim_ncclAllGather(const void *send, void *recv, size_t send_count, int type,
                             cuv__nccl_comm_t comm, CUstream stream) {
  SIM_NCCL_ENTER(ncclAllGather);
  return call(K_ALLGATHER, send, recv, send_count, type, 0, 0, 0, comm, stream);
}

static int sim_ncclReduceScatter(const void *send, void *recv, size_t recv_count, int type, int op,
                                 cuv__nccl_comm_t comm, CUstream stream) {
  SIM_NCCL_ENTER(ncclReduceScatter);
  return call(K_REDUCESCATTER, send, recv, recv_count, type, op, 0, 0, comm, stream);
}

static int sim_ncclSend(const void *send, size_t count, int type, int peer, cuv__nccl_comm_t comm,
                        CUstream stream) {
  SIM_NCCL_ENTER(ncclSend);
  return call(K_SEND, send, NULL, count, type, 0, 0, peer, comm, stream);
}

static int sim_ncclRecv(void *recv, size_t count, int type, int peer, cuv__nccl_comm_t comm,
                        CUstream stream) {
  SIM_NCCL_ENTER(ncclRecv);
  return call(K_RECV, NULL, recv, count, type, 0, 0, peer, comm, stream);
}

/* ---- revoke and shrink ---- */

/* Its collectives stop (those running end, those enqueued end at once when they run) and it
 * refuses new ones; the handle stays, for a shrink and the destroy. Local: the peers learn
 * nothing. */
static int sim_ncclCommRevoke(cuv__nccl_comm_t h, int flags) {
  SIM_NCCL_ENTER(ncclCommRevoke);
  sim_lock();
  struct sim_nccl_comm *c = comm_get(h);
  int r = c && flags == CUV__NCCL_REVOKE_DEFAULT ? CUV__NCCL_SUCCESS : CUV__NCCL_INVALID_ARGUMENT;
  if (r == CUV__NCCL_SUCCESS && atomic_exchange(&c->revoked, true))
    r = CUV__NCCL_INVALID_ARGUMENT; /* revoked already */
  if (r == CUV__NCCL_SUCCESS)
    sim_wake_all();
  sim_unlock();
  return r;
}

/* The excluded ranks as a set; INVALID_ARGUMENT for an empty list, a rank out of range or
 * repeated, or the caller's own rank (NCCL's rule: an excluded rank does not call the shrink). */
static int exclusion(const struct sim_nccl_comm *c, const int *exclude, int n, uint64_t *set) {
  *set = 0;
  if (!exclude || n <= 0)
    return CUV__NCCL_INVALID_ARGUMENT;
  for (int i = 0; i < n; i++) {
    if (exclude[i] < 0 || exclude[i] >= c->nranks || (*set >> exclude[i] & 1u))
      return CUV__NCCL_INVALID_ARGUMENT;
    *set |= (uint64_t)1 << exclude[i];
  }
  return *set >> c->rank & 1u ? CUV__NCCL_INVALID_ARGUMENT : CUV__NCCL_SUCCESS;
}

/* NCCL_SHRINK_ABORT: the parent's collectives running now end (NCCL sets its abort flags and
 * synchronizes its stream), then it takes new ones again. */
static void stop_running(struct sim_nccl_comm *c) {
  sim_lock();
  atomic_store(&c->stopping, true);
  sim_wake_all();
  sim_unlock();
  while (atomic_load(&c->running))
    sim_sleep_ns(BACKOFF_MAX_NS);
  atomic_store(&c->stopping, false);
}

/* The survivors' new group: every survivor derives the same id from the parent's, the count of
 * its shrinks (every rank makes them in one order) and the excluded set; its rank is its old one
 * less the excluded ranks below it, as NCCL renumbers them. The excluded ranks never join it. */
static int shrink(struct sim_nccl_comm *c, uint64_t set, int n, bool blocking,
                  struct sim_nccl_comm **out) {
  cuv__nccl_id_t id;
  sim_clique_derive_id(&c->id, set * 0x9e3779b97f4a7c15ull ^ ++c->shrinks, &id);
  int rank = c->rank;
  for (int j = 0; j < c->rank; j++)
    rank -= (int)(set >> j & 1u);
  return comm_new(out, c->nranks - n, &id, rank, c->device, blocking);
}

static int shrink_call(cuv__nccl_comm_t h, const int *exclude, int n, cuv__nccl_comm_t *out,
                       cuv__nccl_config_t *config, int flags) {
  if (out)
    *out = NULL; /* NCCL's, until the new communicator is made */
  if (!out || (flags & ~CUV__NCCL_SHRINK_ABORT) ||
      (config && config->magic != CUV__NCCL_CONFIG_MAGIC))
    return CUV__NCCL_INVALID_ARGUMENT;
  sim_lock();
  struct sim_nccl_comm *c = comm_get(h);
  uint64_t set = 0;
  int r = c ? exclusion(c, exclude, n, &set) : CUV__NCCL_INVALID_ARGUMENT;
  if (r == CUV__NCCL_SUCCESS && atomic_load(&c->dead))
    r = CUV__NCCL_SYSTEM_ERROR; /* its process is gone */
  else if (r == CUV__NCCL_SUCCESS && !sim_clique_complete(c->clique))
    r = CUV__NCCL_INVALID_USAGE; /* before the parent is ready */
  if (r == CUV__NCCL_SUCCESS) {
    c->refs++; /* the parent stays while this call uses it */
    comm_set_device(c);
  }
  sim_unlock();
  if (r != CUV__NCCL_SUCCESS)
    return r;
  if (flags & CUV__NCCL_SHRINK_ABORT)
    stop_running(c);
  struct sim_nccl_comm *made = NULL;
  r = shrink(c, set, n, config ? config_blocking(config) : c->blocking, &made);
  sim_lock();
  comm_unref(c);
  sim_unlock();
  if (r != CUV__NCCL_SUCCESS)
    return r;
  *out = (cuv__nccl_comm_t)(void *)made;
  return comm_start(made);
}

/* Inside a group, as an init: a failure fails the group, and a blocking shrink is ready by the
 * group's end (NCCL groups the shrinks of one process's ranks so that none waits for another). */
static int sim_ncclCommShrink(cuv__nccl_comm_t h, int *exclude, int n, cuv__nccl_comm_t *out,
                              cuv__nccl_config_t *config, int flags) {
  SIM_NCCL_ENTER(ncclCommShrink);
  int r = shrink_call(h, exclude, n, out, config, flags);
  if (r != CUV__NCCL_SUCCESS && r != CUV__NCCL_IN_PROGRESS && group.depth > 0 && !group.error)
    group.error = r;
  return r;
}

/* ---- the simulator's API (include/cuv/sim.h) ---- */

typedef void (*sim_fn)(void);

static const struct {
  const char *name;
  sim_fn fn;
} entries[] = {
#define SIM__NCCL_ENTRY(name, params) {#name, (sim_fn)sim_##name},
    CUV__NCCL_FUNCS(SIM__NCCL_ENTRY)
    CUV__NCCL_OPTIONAL_FUNCS(SIM__NCCL_ENTRY)
#undef SIM__NCCL_ENTRY
};

CUV_SIM_EXTERN void *cuv_sim_nccl_proc(const char *name) {
  for (size_t i = 0; name && !sim_entry_hidden(name) && i < COUNT_OF(entries); i++) {
    if (strcmp(entries[i].name, name) == 0) {
      void *fn;
      memcpy(&fn, &entries[i].fn, sizeof fn);
      return fn;
    }
  }
  return NULL;
}

CUV_SIM_EXTERN int cuv_sim_nccl_set_async_error(void *comm, int result) {
  sim_lock();
  struct sim_nccl_comm *c = comm_get(comm);
  if (c && result > 0)
    comm_fail(c, result);
  sim_unlock();
  return c && result > 0 ? 0 : -EINVAL;
}

CUV_SIM_EXTERN int cuv_sim_nccl_kill(void *comm) {
  sim_lock();
  struct sim_nccl_comm *c = comm_get(comm);
  if (c) {
    atomic_store(&c->dead, true);
    sim_clique_leave(c->clique);
    sim_wake_all();
  }
  sim_unlock();
  return c ? 0 : -EINVAL;
}

CUV_SIM_EXTERN int cuv_sim_nccl_vanish(void *comm) {
  sim_lock();
  struct sim_nccl_comm *c = comm_get(comm);
  if (c)
    atomic_store(&c->dead, true); /* it stays in its group: its peers wait for it, told nothing */
  sim_unlock();
  return c ? 0 : -EINVAL;
}

CUV_SIM_EXTERN void cuv_sim_nccl_set_launch_delay_us(unsigned usec) {
  atomic_store(&launch_delay_us, usec);
}

CUV_SIM_EXTERN void cuv_sim_nccl_hold_inits(int hold) { atomic_store(&inits_held, hold != 0); }

CUV_SIM_EXTERN unsigned cuv_sim_nccl_inits_waiting(void) { return atomic_load(&inits_waiting); }

CUV_SIM_EXTERN void cuv_sim_nccl_group_counts(unsigned long *blocking, unsigned long *nonblocking) {
  if (blocking)
    *blocking = atomic_load(&groups_blocking);
  if (nonblocking)
    *nonblocking = atomic_load(&groups_nonblocking);
}

CUV_SIM_EXTERN void cuv_sim_nccl_set_version(int version) {
  atomic_store(&version_setting, version > 0 ? version : DEFAULT_VERSION);
}
