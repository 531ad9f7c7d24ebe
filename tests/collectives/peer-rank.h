#ifndef CUVT_PEER_RANK_H
#define CUVT_PEER_RANK_H

/* Rank 1 of a two-rank group in a child process (collective-faults.c, shrink-peers.c): the
 * parent spawns its own program with `child HEX` (the group's NCCL id, in hex), and the child
 * parses the id and joins as rank 1 on device 1. Header-only (static inline). */

#include <spawn.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"

extern char **environ;

/* Spawns this program as `child HEX`; the child's pid. */
static inline pid_t cuvt_spawn_rank1(const cuv_nccl_id_t *id) {
  char self[4096], hex[2 * sizeof id->bytes + 1];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(len > 0);
  self[len] = '\0';
  for (size_t i = 0; i < sizeof id->bytes; i++)
    snprintf(hex + 2 * i, 3, "%02x", (unsigned char)id->bytes[i]);
  char *argv[] = {self, "child", hex, NULL};
  pid_t pid;
  assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
  return pid;
}

/* In the child: joins the group of id_hex as rank 1 of 2 on device 1. 0 with *dev and *comm
 * set; 2 when id_hex is not an id, 3 when the device or the group cannot be joined (the child's
 * exit status). */
static inline int cuvt_join_as_rank1(const char *id_hex, cuv_device_t **dev, cuv_comm_t **comm) {
  cuv_nccl_id_t id;
  for (size_t i = 0; i < sizeof id.bytes; i++) {
    unsigned byte;
    if (sscanf(id_hex + 2 * i, "%2x", &byte) != 1)
      return 2;
    id.bytes[i] = (char)byte;
  }
  cuv_output_t out;
  if (cuv_device_open(dev, 1) != 0 || cuv_sync(cuv_comm_init_rank(*dev, &id, 1, 2), &out) != 0)
    return 3;
  *comm = out.data;
  return 0;
}

#endif
