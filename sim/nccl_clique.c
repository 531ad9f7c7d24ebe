/* The shared-memory segment where the ranks of one simulated NCCL group meet
 * (sim/nccl_clique.h). Its name comes from the group's unique id, so ranks in other processes of
 * the machine find it as ranks of this one do. Whichever rank comes first creates and lays it
 * out; the last to join unlinks the name (the mappings stay), so a finished group leaves nothing
 * in /dev/shm.
 *
 * Layout: the header (each rank's state, process id and step counters; the mailboxes' counters),
 * then one slot per rank, then one mailbox per ordered pair of ranks. A rank writes only its own
 * slot, its own counters and the mailboxes it sends into; every handover is a release store read
 * with an acquire load. */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl_clique.h"
#include "nccl_math.h"
#include "util.h"

#define CLQ_MAGIC 0x6375766eu         /* the segment is laid out */
#define SLOT_BYTES (1u << 20)         /* a collective step's input per rank */
#define BOX_BYTES (256u << 10)        /* a send/recv chunk */
#define LAYOUT_WAIT_NS 10000000000ull /* a joiner waits this long for the creator's layout */
#define PID_CHECK_NS 5000000ull       /* how often a waiting rank checks its peers' processes */

static const char ID_TAG[8] = {'c', 'u', 'v', 's', 'i', 'm', 'i', 'd'};

enum { RANK_FREE, RANK_JOINED, RANK_GONE };

struct clq_rank {
  _Atomic int state;
  _Atomic int pid;
  _Atomic int device;        /* written before `state` says joined */
  _Atomic uint64_t posted;   /* the last step whose input is in its slot */
  _Atomic uint64_t consumed; /* the last step it finished reading every slot of */
  struct sim_step desc;      /* the posted step's description, written before `posted` */
};

struct clq_box {
  _Atomic uint64_t sent, taken; /* chunks put in and taken out; full while they differ */
  uint64_t bytes;               /* of the chunk in it */
};

struct clq_hdr {
  _Atomic uint32_t magic;
  int nranks;
  _Atomic int joined;
  struct clq_rank rank[SIM_NCCL_MAX_RANKS];
  struct clq_box box[]; /* nranks * nranks, box[from * nranks + to] */
};

struct sim_clique {
  struct clq_hdr *hdr;
  size_t size;
  int rank, nranks;
  char name[64]; /* the segment's file in /dev/shm */
  const void *slots[SIM_NCCL_MAX_RANKS];
  unsigned char *boxes;
  uint64_t next_pid_check;
};

/* The id's bytes: the tag, then the segment's key. */
struct clq_id {
  char tag[8];
  uint64_t key;
};

void sim_clique_make_id(cuv__nccl_id_t *id) {
  static _Atomic uint64_t counter;
  struct clq_id made = {.key = sim_now_ns() ^ (uint64_t)getpid() << 40 ^
                               (atomic_fetch_add(&counter, 1) + 1) * 0x9e3779b97f4a7c15ull};
  memcpy(made.tag, ID_TAG, sizeof made.tag);
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &made, sizeof made);
}

void sim_clique_derive_id(const cuv__nccl_id_t *parent, uint64_t salt, cuv__nccl_id_t *id) {
  struct clq_id key;
  memcpy(&key, parent->internal, sizeof key);
  key.key = (key.key ^ salt) * 0xff51afd7ed558ccdull; /* a mix: no two salts give one key */
  key.key ^= key.key >> 33;
  memset(id, 0, sizeof *id);
  memcpy(id->internal, &key, sizeof key);
}

static size_t header_bytes(int nranks) {
  size_t bytes = sizeof(struct clq_hdr) + (size_t)nranks * nranks * sizeof(struct clq_box);
  return (bytes + 4095) & ~(size_t)4095;
}

static size_t segment_bytes(int nranks) {
  return header_bytes(nranks) + (size_t)nranks * SLOT_BYTES + (size_t)nranks * nranks * BOX_BYTES;
}

/* The creator's layout: what the zero-filled segment lacks, then the magic that publishes it. */
static void lay_out(struct clq_hdr *hdr, int nranks) {
  hdr->nranks = nranks;
  atomic_store_explicit(&hdr->magic, CLQ_MAGIC, memory_order_release);
}

/* A joiner's view: the creator has sized the segment and published its layout. */
static int await_layout(int fd, struct clq_hdr **hdr, size_t *size) {
  uint64_t deadline = sim_now_ns() + LAYOUT_WAIT_NS;
  struct stat st;
  while (fstat(fd, &st) == 0 && st.st_size == 0 && sim_now_ns() < deadline)
    sim_sleep_ns(100000);
  if (st.st_size == 0)
    return CUV__NCCL_SYSTEM_ERROR;
  void *map = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED)
    return CUV__NCCL_SYSTEM_ERROR;
  *hdr = map;
  *size = (size_t)st.st_size;
  while (atomic_load_explicit(&(*hdr)->magic, memory_order_acquire) != CLQ_MAGIC &&
         sim_now_ns() < deadline)
    sim_sleep_ns(100000);
  return atomic_load(&(*hdr)->magic) == CLQ_MAGIC ? CUV__NCCL_SUCCESS : CUV__NCCL_SYSTEM_ERROR;
}

/* The segment's file, opened as glibc's shm_open opens it (in /dev/shm, O_NOFOLLOW, O_CLOEXEC) but
 * through open, which ThreadSanitizer intercepts: shm_open's own open is internal to libc, so TSan
 * never saw this descriptor made and took a number libuv had just closed on its loop thread (with
 * syscall(SYS_close), unseen too: tests/tsan.supp) for that thread's socket still. */
static int open_segment(const struct sim_clique *c, int flags) {
  return open(c->name, flags | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0600);
}

/* Creates the segment, or maps the one another rank created. */
static int map_segment(struct sim_clique *c) {
  int fd = open_segment(c, O_CREAT | O_EXCL);
  bool creator = fd >= 0;
  if (!creator && errno == EEXIST)
    fd = open_segment(c, 0);
  if (fd < 0)
    return CUV__NCCL_SYSTEM_ERROR;
  int r = CUV__NCCL_SUCCESS;
  if (creator) {
    c->size = segment_bytes(c->nranks);
    void *map = MAP_FAILED;
    if (ftruncate(fd, (off_t)c->size) == 0)
      map = mmap(NULL, c->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
      unlink(c->name);
      r = CUV__NCCL_SYSTEM_ERROR;
    } else {
      c->hdr = map;
      lay_out(c->hdr, c->nranks);
    }
  } else {
    r = await_layout(fd, &c->hdr, &c->size);
  }
  close(fd);
  return r;
}

static void locate_slots(struct sim_clique *c) {
  unsigned char *base = (unsigned char *)c->hdr + header_bytes(c->nranks);
  for (int i = 0; i < c->nranks; i++)
    c->slots[i] = base + (size_t)i * SLOT_BYTES;
  c->boxes = base + (size_t)c->nranks * SLOT_BYTES;
}

static int claim_rank(struct sim_clique *c, int device) {
  struct clq_rank *me = &c->hdr->rank[c->rank];
  int expected = RANK_FREE;
  if (!atomic_compare_exchange_strong(&me->state, &expected, RANK_JOINED))
    return CUV__NCCL_INVALID_USAGE;
  atomic_store(&me->pid, (int)getpid());
  atomic_store(&me->device, device);
  if (atomic_fetch_add(&c->hdr->joined, 1) + 1 == c->nranks)
    unlink(c->name); /* every rank has it mapped: the name is no longer needed */
  return CUV__NCCL_SUCCESS;
}

int sim_clique_join(const cuv__nccl_id_t *id, int nranks, int rank, int device,
                    struct sim_clique **out) {
  struct clq_id key;
  memcpy(&key, id->internal, sizeof key);
  if (memcmp(key.tag, ID_TAG, sizeof key.tag) != 0 || nranks < 1 ||
      nranks > SIM_NCCL_MAX_RANKS || rank < 0 || rank >= nranks)
    return CUV__NCCL_INVALID_ARGUMENT;
  struct sim_clique *c = calloc(1, sizeof *c);
  if (!c)
    return CUV__NCCL_SYSTEM_ERROR;
  c->rank = rank;
  c->nranks = nranks;
  snprintf(c->name, sizeof c->name, "/dev/shm/cuv-sim-nccl-%016llx", (unsigned long long)key.key);
  int r = map_segment(c);
  if (r == CUV__NCCL_SUCCESS && (c->hdr->nranks != nranks || c->size < segment_bytes(nranks)))
    r = CUV__NCCL_INVALID_ARGUMENT; /* the group was made with another size */
  if (r == CUV__NCCL_SUCCESS) {
    locate_slots(c);
    r = claim_rank(c, device);
  }
  if (r != CUV__NCCL_SUCCESS) {
    if (c->hdr)
      munmap(c->hdr, c->size);
    free(c);
    return r;
  }
  *out = c;
  return CUV__NCCL_SUCCESS;
}

bool sim_clique_complete(const struct sim_clique *c) {
  return atomic_load_explicit(&c->hdr->joined, memory_order_acquire) >= c->nranks;
}

bool sim_clique_shares_device(const struct sim_clique *c) {
  int mine = atomic_load(&c->hdr->rank[c->rank].device);
  for (int i = 0; i < c->nranks; i++)
    if (i != c->rank && atomic_load(&c->hdr->rank[i].device) == mine)
      return true;
  return false;
}

void sim_clique_leave(struct sim_clique *c) {
  atomic_store_explicit(&c->hdr->rank[c->rank].state, RANK_GONE, memory_order_release);
  if (!sim_clique_complete(c))
    unlink(c->name); /* no one else may join a group that lost a rank */
}

void sim_clique_release(struct sim_clique *c) {
  munmap(c->hdr, c->size);
  free(c);
}

static bool process_gone(int pid) { return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH; }

int sim_clique_peer_gone(struct sim_clique *c) {
  bool check_pids = sim_now_ns() >= c->next_pid_check;
  if (check_pids)
    c->next_pid_check = sim_now_ns() + PID_CHECK_NS;
  for (int j = 0; j < c->nranks; j++) {
    if (j == c->rank)
      continue;
    struct clq_rank *r = &c->hdr->rank[j];
    if (atomic_load_explicit(&r->state, memory_order_acquire) == RANK_GONE)
      return j;
    int pid = atomic_load(&r->pid);
    if (check_pids && pid != (int)getpid() && process_gone(pid))
      return j;
  }
  return -1;
}

/* ---- collective steps ---- */

uint64_t sim_clique_step_elems(const struct sim_clique *c, int type, bool scatter) {
  size_t size = sim_nccl_type_size(type);
  return SLOT_BYTES / size / (scatter ? (size_t)c->nranks : 1u);
}

bool sim_clique_try_post(struct sim_clique *c, uint64_t step, const struct sim_step *d,
                         const void *src, size_t bytes) {
  for (int j = 0; j < c->nranks; j++)
    if (atomic_load_explicit(&c->hdr->rank[j].consumed, memory_order_acquire) + 1 < step)
      return false; /* someone still reads the previous step's slots */
  struct clq_rank *me = &c->hdr->rank[c->rank];
  if (bytes)
    memcpy((void *)c->slots[c->rank], src, bytes);
  me->desc = *d;
  atomic_store_explicit(&me->posted, step, memory_order_release);
  return true;
}

const void *const *sim_clique_try_gather(struct sim_clique *c, uint64_t step, bool *mismatch) {
  const struct sim_step *mine = &c->hdr->rank[c->rank].desc;
  *mismatch = false;
  for (int j = 0; j < c->nranks; j++) {
    struct clq_rank *r = &c->hdr->rank[j];
    if (atomic_load_explicit(&r->posted, memory_order_acquire) < step)
      return NULL;
    *mismatch = *mismatch || memcmp(&r->desc, mine, sizeof *mine) != 0;
  }
  return c->slots;
}

void sim_clique_consumed(struct sim_clique *c, uint64_t step) {
  atomic_store_explicit(&c->hdr->rank[c->rank].consumed, step, memory_order_release);
}

/* ---- send/recv ---- */

size_t sim_clique_box_bytes(const struct sim_clique *c) {
  (void)c;
  return BOX_BYTES;
}

static struct clq_box *box_of(struct sim_clique *c, int from, int to) {
  return &c->hdr->box[from * c->nranks + to];
}

static unsigned char *box_data(struct sim_clique *c, int from, int to) {
  return c->boxes + ((size_t)from * c->nranks + to) * BOX_BYTES;
}

bool sim_clique_try_send(struct sim_clique *c, int peer, const void *src, size_t bytes) {
  struct clq_box *b = box_of(c, c->rank, peer);
  uint64_t sent = atomic_load_explicit(&b->sent, memory_order_relaxed);
  if (atomic_load_explicit(&b->taken, memory_order_acquire) != sent)
    return false;
  memcpy(box_data(c, c->rank, peer), src, bytes);
  b->bytes = bytes;
  atomic_store_explicit(&b->sent, sent + 1, memory_order_release);
  return true;
}

bool sim_clique_try_recv(struct sim_clique *c, int peer, void *dst, size_t max, size_t *bytes) {
  struct clq_box *b = box_of(c, peer, c->rank);
  uint64_t taken = atomic_load_explicit(&b->taken, memory_order_relaxed);
  if (atomic_load_explicit(&b->sent, memory_order_acquire) == taken)
    return false;
  *bytes = b->bytes;
  memcpy(dst, box_data(c, peer, c->rank), b->bytes < max ? b->bytes : max);
  atomic_store_explicit(&b->taken, taken + 1, memory_order_release);
  return true;
}
