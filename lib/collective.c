/* Collective ops: NCCL's collectives and send/recv on cuv buffers (include/cuv/collective.h).
 *
 * One op makes one NCCL call per entry (a local rank's part of a collective, or one transfer), all
 * in one group, each on its local rank's stream of the communicator (lib/comm.c says why). Each
 * part's stream first waits for what the executing stream enqueued so far, and the executing
 * stream then waits for every part, as fork.c orders its branches, so the submission's completion
 * on its own stream proves every part complete. A part on another device than the executing
 * stream's has a part submission of its own (lib/submission.h): its hazard records, events and
 * holds are that device's, and it retires (or leaks) with the submission. Inside a capture, such
 * a part's buffers are only held (hazard.c notes only the capturing submission's uses), so a
 * replay does not order other work of that device against them. */
#include <string.h>

#include "internal.h"
#include "comm.h"
#include "hazard.h"
#include "nccl.h"

enum { K_ALL_REDUCE, K_BROADCAST, K_REDUCE, K_ALL_GATHER, K_REDUCE_SCATTER, K_SEND, K_RECV };

static const size_t type_sizes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};

CUV_EXTERN size_t cuv_nccl_type_size(cuv_nccl_type_t type) {
  return (unsigned)type < CUV__COUNT_OF(type_sizes) ? type_sizes[type] : 0;
}

/* One NCCL call: a local rank's part of the collective, or one transfer. */
typedef struct coll_call {
  int kind, peer;
  unsigned local;
  size_t count;
  cuv_buffer_t *send, *recv; /* NULL where NCCL reads or writes nothing */
  size_t send_off, recv_off; /* bytes into them (the in-place forms point into recv) */
} coll_call_t;

typedef struct coll_op {
  struct cuv_op_s op;
  cuv_comm_t *comm;
  int type, redop, root;
  size_t n;
  coll_call_t calls[];
} coll_op_t;

/* Where one local rank's part runs during execution. */
typedef struct part {
  cuv__exec_t ex;   /* its submission (the op's, or a part of it) and its stream */
  bool forked;      /* ordered after the executing stream; joined back at the end */
  bool other_device;
} part_t;

static void coll_drop(cuv_op_t *op) {
  coll_op_t *c = (coll_op_t *)op;
  for (size_t i = 0; i < c->n; i++) {
    cuv_buffer_unref(c->calls[i].send);
    cuv_buffer_unref(c->calls[i].recv);
  }
  cuv_comm_unref(c->comm);
}

static void coll_touches(const cuv_op_t *op, cuv__touches_t *t) {
  const coll_op_t *c = (const coll_op_t *)op;
  for (size_t i = 0; i < c->n; i++) {
    cuv__touch(t, c->calls[i].recv, true);
    cuv__touch(t, c->calls[i].send, false);
  }
}

/* ---- execution ---- */

static void part_retire(void *sub) { cuv__sub_retire(sub); }

/* The part's submission and the fork: its stream waits for the executing stream's work so far. */
static int part_begin(part_t *p, cuv__exec_t *ex, cuv_stream_t *stream) {
  p->ex = (cuv__exec_t){ex->sub, stream, ex->policy, false};
  if (stream == ex->stream)
    return 0;
  int rc;
  p->other_device = stream->dev != ex->sub->dev;
  if (p->other_device) {
    rc = cuv__sub_create_part(&p->ex.sub, stream);
    if (rc == 0 && (rc = cuv__sub_hold(ex->sub, part_retire, p->ex.sub)) < 0)
      cuv__sub_retire(p->ex.sub);
  } else {
    rc = cuv__sub_use_stream(ex->sub, stream);
  }
  if (rc < 0)
    return rc;
  p->forked = true;
  return cuv__sub_order(ex->sub, ex->stream, stream);
}

/* The join, also after a failure: what the part enqueued must end before the submission can be
 * proven complete. Without it, the part's stream is waited for here. */
static int part_join(part_t *p, cuv__exec_t *ex) {
  if (!p->forked)
    return 0;
  int rc = cuv__sub_order(p->ex.sub, p->ex.stream, ex->stream);
  if (rc < 0 && cuv__bind(p->ex.stream->dev) == 0) {
    int wait = cuv__cu(cuv__drv.cuStreamSynchronize(p->ex.stream->cu));
    rc = cuv_status_is_fault(wait) ? wait : rc;
  }
  return rc;
}

/* Holds a buffer for the part: tracked like a launch's, except another device's during a
 * capture. */
static int hold(part_t *p, cuv__exec_t *ex, cuv_buffer_t *buf, enum cuv_arg_kind kind) {
  if (!buf)
    return 0;
  if (p->other_device && cuv__hazard_capturing(ex->sub)) {
    int rc = cuv__sub_hold(p->ex.sub, cuv__buffer_release, buf);
    if (rc == 0)
      cuv_buffer_ref(buf);
    return rc;
  }
  return cuv__hold_buffer(&p->ex, buf, kind);
}

/* Written first: a buffer read and written by one call (in place) is held once, for both. */
static int hold_call(part_t *p, cuv__exec_t *ex, const coll_call_t *k) {
  int rc = hold(p, ex, k->recv, k->send == k->recv ? CUV_ARG_KIND_RW : CUV_ARG_KIND_WRITE);
  return rc < 0 ? rc : hold(p, ex, k->send, CUV_ARG_KIND_READ);
}

static void *ptr_of(const cuv_buffer_t *buf, size_t offset) {
  return buf ? (void *)(uintptr_t)(buf->ptr + offset) : NULL;
}

static cuv__nccl_result_t call_nccl(const cuv_comm_t *comm, const coll_op_t *c,
                                    const coll_call_t *k, CUstream stream) {
  cuv__nccl_comm_t nccl = comm->local[k->local].nccl;
  const void *send = ptr_of(k->send, k->send_off);
  void *recv = ptr_of(k->recv, k->recv_off);
  switch (k->kind) {
  case K_ALL_REDUCE:
    return cuv__nccl.ncclAllReduce(send, recv, k->count, c->type, c->redop, nccl, stream);
  case K_BROADCAST:
    return cuv__nccl.ncclBroadcast(send, recv, k->count, c->type, c->root, nccl, stream);
  case K_REDUCE:
    return cuv__nccl.ncclReduce(send, recv, k->count, c->type, c->redop, c->root, nccl, stream);
  case K_ALL_GATHER:
    return cuv__nccl.ncclAllGather(send, recv, k->count, c->type, nccl, stream);
  case K_REDUCE_SCATTER:
    return cuv__nccl.ncclReduceScatter(send, recv, k->count, c->type, c->redop, nccl, stream);
  case K_SEND: return cuv__nccl.ncclSend(send, k->count, c->type, k->peer, nccl, stream);
  default: return cuv__nccl.ncclRecv(recv, k->count, c->type, k->peer, nccl, stream);
  }
}

/* Every call in one group. The communicator is blocking: ncclGroupEnd returns once NCCL has the
 * calls on their streams (launched on this thread: no thread of NCCL's, no wait for one), or with
 * an error. An error of the communicator itself (not of the calls' arguments) is its asynchronous
 * error too: the fault watch of the submission (prepare's cuv__comm_track) fails the communicator
 * and aborts it. */
static int issue(const coll_op_t *c, cuv_comm_t *comm, part_t *parts) {
  CUcontext saved;
  int rc = cuv__comm_enter(comm, &saved);
  if (rc < 0)
    return rc;
  rc = cuv__nccl_status(cuv__nccl.ncclGroupStart());
  for (size_t i = 0; rc == 0 && i < c->n; i++)
    rc = cuv__nccl_status(call_nccl(comm, c, &c->calls[i],
                                    parts[c->calls[i].local].ex.stream->cu));
  int end = cuv__nccl_status(cuv__nccl.ncclGroupEnd());
  rc = rc < 0 ? rc : end;
  cuv__comm_leave(comm, saved);
  return rc;
}

/* Forks the local ranks that have calls (every one, but for send/recv), holds the buffers, and
 * watches the submission. */
static int prepare(coll_op_t *c, cuv_comm_t *comm, cuv__exec_t *ex, part_t *parts) {
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < c->n; i++) {
    part_t *p = &parts[c->calls[i].local];
    if (!p->ex.sub)
      rc = part_begin(p, ex, comm->local[c->calls[i].local].stream);
    if (rc == 0)
      rc = hold_call(p, ex, &c->calls[i]);
  }
  if (rc == 0 && !cuv__hazard_capturing(ex->sub)) /* a graph's replays are not watched */
    rc = cuv__comm_track(comm, ex->sub);
  return rc;
}

static int coll_execute(cuv_op_t *op, cuv__exec_t *ex, cuv_output_t *out) {
  (void)out;
  coll_op_t *c = (coll_op_t *)op;
  cuv_comm_t *comm = c->comm;
  part_t inline_parts[4], *parts = inline_parts;
  if (comm->n > CUV__COUNT_OF(inline_parts))
    parts = calloc(comm->n, sizeof *parts);
  else
    memset(inline_parts, 0, sizeof inline_parts);
  int rc = parts ? cuv__comm_hold(ex->sub, comm) : CUV_ENOMEM;
  if (rc == 0)
    c->comm = NULL; /* the submission has the op's reference now */
  CUcontext saved = cuv__nccl_enter(); /* the parts' devices are made current on the way */
  if (rc == 0)
    rc = prepare(c, comm, ex, parts);
  if (rc == 0)
    rc = issue(c, comm, parts);
  for (unsigned i = 0; parts && i < comm->n; i++) {
    int join = part_join(&parts[i], ex);
    rc = rc < 0 ? rc : join;
  }
  cuv__nccl_leave(saved);
  if (parts != inline_parts)
    free(parts);
  coll_drop(op);
  return rc;
}

static const cuv__op_vt_t coll_vt = {"collective", coll_execute, coll_drop, coll_touches};

/* ---- construction ---- */

static coll_op_t *coll_new(cuv_comm_t *comm, size_t n, int type, int redop, int root) {
  coll_op_t *c = (coll_op_t *)cuv__op_new(&coll_vt, sizeof *c + n * sizeof c->calls[0]);
  if (!c)
    return NULL;
  c->comm = cuv__comm_ref(comm);
  c->n = n;
  c->type = type;
  c->redop = redop;
  c->root = root;
  /* One rank's communicator runs on its device; a clique's runs on any device's stream. Every
   * rank's device is ordered in the engines (engine.c), as a tree over those devices is. */
  c->op.device = comm->n == 1 ? comm->local[0].dev->ordinal : -1;
  for (unsigned i = 0; i < comm->n; i++)
    c->op.devices |= CUV__DEVICE_BIT(comm->local[i].dev->ordinal);
  /* A blocking ncclGroupEnd may wait (a transfer's first use of a peer connects it). */
  c->op.host = CUV__OP_WAITS;
  return c;
}

/* The buffers' references, taken once every check passed. */
static cuv_op_t *coll_finish(coll_op_t *c) {
  for (size_t i = 0; i < c->n; i++) {
    if (c->calls[i].send)
      cuv_buffer_ref(c->calls[i].send);
    if (c->calls[i].recv)
      cuv_buffer_ref(c->calls[i].recv);
  }
  return &c->op;
}

/* A buffer a call uses: on the rank's device and holding [offset, offset + bytes). */
static int check_buffer(const cuv_comm_t *comm, unsigned local, const cuv_buffer_t *buf,
                        size_t offset, size_t bytes) {
  if (!buf)
    return CUV_EINVAL;
  if (buf->dev != comm->local[local].dev)
    return CUV_EDEVICE;
  return cuv__buffer_check_range(buf, offset, bytes);
}

static int check_comm(const cuv_comm_t *comm, int type, int redop, bool reduces) {
  if (!comm || !cuv_nccl_type_size((cuv_nccl_type_t)type))
    return CUV_EINVAL;
  if (reduces && (redop < CUV_NCCL_SUM || redop > CUV_NCCL_AVG))
    return CUV_EINVAL;
  return cuv_comm_status(comm);
}

/* count elements of `type` in bytes, or SIZE_MAX when that overflows (no buffer is that big). */
static size_t bytes_of(size_t count, int type, size_t times) {
  size_t size = cuv_nccl_type_size((cuv_nccl_type_t)type);
  if (times && count > SIZE_MAX / size / times)
    return SIZE_MAX;
  return count * size * times;
}

/* What one local rank's call of a collective reads and writes. */
typedef struct shape {
  int kind;
  size_t count;
  size_t send_bytes, recv_bytes; /* needed in each (in place: in recv, the larger) */
  bool needs_send, needs_recv;   /* at this rank (the root's alone, for some) */
  size_t in_place_send, in_place_recv; /* byte offsets into recv of the in-place form */
} shape_t;

static shape_t shape_of(int kind, const cuv_comm_t *comm, unsigned local, size_t count, int type,
                        int root) {
  size_t one = bytes_of(count, type, 1), all = bytes_of(count, type, (size_t)comm->nranks);
  size_t slot = one == SIZE_MAX ? SIZE_MAX : one * (size_t)comm->local[local].rank;
  bool is_root = comm->local[local].rank == root;
  shape_t s = {kind, count, one, one, true, true, 0, 0};
  if (kind == K_BROADCAST)
    s.needs_send = is_root;
  if (kind == K_REDUCE)
    s.needs_recv = is_root;
  if (kind == K_ALL_GATHER) {
    s.recv_bytes = all;
    s.in_place_send = slot;
  }
  if (kind == K_REDUCE_SCATTER) {
    s.send_bytes = all;
    s.in_place_recv = slot;
  }
  return s;
}

/* Fills the call of local rank i, or fails with what is wrong with its buffers. */
static int fill_call(coll_call_t *k, const shape_t *s, const cuv_comm_t *comm, unsigned i,
                     cuv_buffer_t *const *send, cuv_buffer_t *const *recv) {
  *k = (coll_call_t){.kind = s->kind, .local = i, .count = s->count};
  if (!send) { /* in place: recv is both, as NCCL lays the in-place forms out */
    size_t bytes = s->send_bytes > s->recv_bytes ? s->send_bytes : s->recv_bytes;
    k->send = k->recv = recv[i];
    k->send_off = s->in_place_send;
    k->recv_off = s->in_place_recv;
    return check_buffer(comm, i, recv[i], 0, bytes);
  }
  int rc = 0;
  if (s->needs_send || send[i]) {
    k->send = send[i];
    rc = check_buffer(comm, i, send[i], 0, s->send_bytes);
  }
  if (rc == 0 && (s->needs_recv || recv[i])) {
    k->recv = recv[i];
    rc = check_buffer(comm, i, recv[i], 0, s->recv_bytes);
  }
  return rc;
}

static cuv_op_t *collective(int kind, cuv_comm_t *comm, cuv_buffer_t *const *send,
                            cuv_buffer_t *const *recv, size_t count, int type, int redop,
                            int root) {
  bool reduces = kind == K_ALL_REDUCE || kind == K_REDUCE || kind == K_REDUCE_SCATTER;
  int rc = check_comm(comm, type, redop, reduces);
  if (rc == 0 && (!recv || root < 0 || root >= comm->nranks))
    rc = CUV_EINVAL;
  coll_op_t *c = rc == 0 ? coll_new(comm, comm->n, type, redop, root) : NULL;
  if (rc == 0 && !c)
    rc = CUV_ENOMEM;
  for (unsigned i = 0; rc == 0 && i < comm->n; i++) {
    shape_t s = shape_of(kind, comm, i, count, type, root);
    rc = fill_call(&c->calls[i], &s, comm, i, send, recv);
  }
  if (rc < 0) {
    if (c) {
      memset(c->calls, 0, c->n * sizeof c->calls[0]); /* no buffer reference taken yet */
      cuv__op_drop(&c->op);
    }
    return cuv__op_fail(rc);
  }
  return coll_finish(c);
}

CUV_EXTERN cuv_op_t *cuv_comm_all_reduce(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                         cuv_buffer_t *const *recv, size_t count,
                                         cuv_nccl_type_t type, cuv_nccl_redop_t op) {
  return collective(K_ALL_REDUCE, comm, send, recv, count, type, op, 0);
}

CUV_EXTERN cuv_op_t *cuv_comm_reduce(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                     cuv_buffer_t *const *recv, size_t count,
                                     cuv_nccl_type_t type, cuv_nccl_redop_t op, int root) {
  return collective(K_REDUCE, comm, send, recv, count, type, op, root);
}

CUV_EXTERN cuv_op_t *cuv_comm_broadcast(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                        cuv_buffer_t *const *recv, size_t count,
                                        cuv_nccl_type_t type, int root) {
  return collective(K_BROADCAST, comm, send, recv, count, type, CUV_NCCL_SUM, root);
}

CUV_EXTERN cuv_op_t *cuv_comm_all_gather(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                         cuv_buffer_t *const *recv, size_t send_count,
                                         cuv_nccl_type_t type) {
  return collective(K_ALL_GATHER, comm, send, recv, send_count, type, CUV_NCCL_SUM, 0);
}

CUV_EXTERN cuv_op_t *cuv_comm_reduce_scatter(cuv_comm_t *comm, cuv_buffer_t *const *send,
                                             cuv_buffer_t *const *recv, size_t recv_count,
                                             cuv_nccl_type_t type, cuv_nccl_redop_t op) {
  return collective(K_REDUCE_SCATTER, comm, send, recv, recv_count, type, op, 0);
}

static int fill_transfer(coll_call_t *k, const cuv_comm_t *comm, const cuv_nccl_p2p_t *t,
                         int type) {
  if ((t->kind != CUV_NCCL_SEND && t->kind != CUV_NCCL_RECV) || t->local >= comm->n ||
      t->peer < 0 || t->peer >= comm->nranks)
    return CUV_EINVAL;
  bool send = t->kind == CUV_NCCL_SEND;
  *k = (coll_call_t){.kind = send ? K_SEND : K_RECV, .peer = t->peer, .local = t->local,
                     .count = t->count};
  if (send)
    k->send = t->buffer;
  else
    k->recv = t->buffer;
  return check_buffer(comm, t->local, t->buffer, 0, bytes_of(t->count, type, 1));
}

CUV_EXTERN cuv_op_t *cuv_comm_send_recv(cuv_comm_t *comm, const cuv_nccl_p2p_t *transfers,
                                        size_t n, cuv_nccl_type_t type) {
  int rc = check_comm(comm, type, CUV_NCCL_SUM, false);
  /* A count no array of transfers can reach would overflow the op's size below. */
  if (rc == 0 && (!transfers || n == 0 || n > (SIZE_MAX - sizeof(coll_op_t)) / sizeof(coll_call_t)))
    rc = CUV_EINVAL;
  coll_op_t *c = rc == 0 ? coll_new(comm, n, type, CUV_NCCL_SUM, 0) : NULL;
  if (rc == 0 && !c)
    rc = CUV_ENOMEM;
  for (size_t i = 0; rc == 0 && i < n; i++)
    rc = fill_transfer(&c->calls[i], comm, &transfers[i], type);
  if (rc < 0) {
    if (c) {
      memset(c->calls, 0, c->n * sizeof c->calls[0]);
      cuv__op_drop(&c->op);
    }
    return cuv__op_fail(rc);
  }
  return coll_finish(c);
}
