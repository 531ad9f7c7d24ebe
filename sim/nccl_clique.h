#ifndef CUV_SIM_NCCL_CLIQUE_H
#define CUV_SIM_NCCL_CLIQUE_H

/* The shared segment where the ranks of one NCCL group meet (nccl_clique.c), for the simulator's
 * NCCL (nccl.c), over the simulated devices of one process or of several.
 *
 * A group of ranks (a clique) meets in a POSIX shared-memory segment named after its unique id,
 * so ranks may be devices of one process or separate processes, as with NCCL. Each rank owns a
 * slot of the segment: a collective step copies the rank's input into its slot, waits until every
 * rank posted, computes its own output from all slots, and marks the slots consumed; large
 * collectives go in chunks of a slot. Each ordered pair of ranks has a mailbox for send/recv. The
 * ranks' counters in the segment are atomics polled with short sleeps; no lock spans processes. */

#include "nccl_funcs.h"
#include "sim.h"

#define SIM_NCCL_MAX_RANKS 64

struct sim_clique; /* one rank's mapping of the segment */

/* Maps (creating it when first) the segment of id for a group of nranks, and claims `rank` on
 * `device` (an ordinal: the simulated GPUs of processes of one machine are the same GPUs).
 * CUV__NCCL_* result: INVALID_ARGUMENT for an id the simulator did not make or a group size that
 * differs from the creator's, INVALID_USAGE for a rank already claimed, SYSTEM_ERROR when the
 * segment cannot be made. */
SIM_HIDDEN int sim_clique_join(const cuv__nccl_id_t *id, int nranks, int rank, int device,
                               struct sim_clique **out);
/* Every rank joined. */
SIM_HIDDEN bool sim_clique_complete(const struct sim_clique *c);
/* Once complete: another rank is on this rank's device, which NCCL's init refuses ("Duplicate
 * GPU detected": ncclInvalidUsage). */
SIM_HIDDEN bool sim_clique_shares_device(const struct sim_clique *c);
/* This rank leaves (abort, destroy or death): its peers see it gone. */
SIM_HIDDEN void sim_clique_leave(struct sim_clique *c);
/* Unmaps the segment (once no command of the rank uses it). */
SIM_HIDDEN void sim_clique_release(struct sim_clique *c);
/* A peer that left or whose process is gone: its rank, or -1. Checks processes at most every few
 * milliseconds. */
SIM_HIDDEN int sim_clique_peer_gone(struct sim_clique *c);
SIM_HIDDEN void sim_clique_make_id(cuv__nccl_id_t *id);
/* The id of a group derived from `parent`'s (a shrink's): the same for every rank that passes the
 * same salt, another for another salt. */
SIM_HIDDEN void sim_clique_derive_id(const cuv__nccl_id_t *parent, uint64_t salt,
                                     cuv__nccl_id_t *id);

/* One collective step's description, compared across ranks (a mismatch is invalid usage). */
struct sim_step {
  int kind, type, op, root;
  uint64_t count;       /* of the whole call */
  uint64_t offset, len; /* this step's chunk, in elements */
};

/* Elements of `type` per step: a slot's capacity, shared by every rank's share when `scatter`
 * (reduce-scatter posts one chunk per destination rank). */
SIM_HIDDEN uint64_t sim_clique_step_elems(const struct sim_clique *c, int type, bool scatter);
/* Non-blocking halves of a step (the caller polls): post copies `bytes` from src (NULL: none)
 * into this rank's slot once every rank consumed the previous step; gather returns the slots once
 * every rank posted this step (NULL until then), *mismatch set when their descriptions differ. */
SIM_HIDDEN bool sim_clique_try_post(struct sim_clique *c, uint64_t step, const struct sim_step *d,
                                    const void *src, size_t bytes);
SIM_HIDDEN const void *const *sim_clique_try_gather(struct sim_clique *c, uint64_t step,
                                                    bool *mismatch);
SIM_HIDDEN void sim_clique_consumed(struct sim_clique *c, uint64_t step);
/* Point to point: one chunk (at most the mailbox's capacity) into the mailbox to `peer`, once it
 * is empty; or out of the mailbox from `peer`, once it holds one (*bytes: its size). */
SIM_HIDDEN size_t sim_clique_box_bytes(const struct sim_clique *c);
SIM_HIDDEN bool sim_clique_try_send(struct sim_clique *c, int peer, const void *src, size_t bytes);
SIM_HIDDEN bool sim_clique_try_recv(struct sim_clique *c, int peer, void *dst, size_t max,
                                    size_t *bytes);

#endif
