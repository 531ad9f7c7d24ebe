/* Stream commands: small malloc'd structs embedding struct sim_cmd first, made by the entry points
 * that enqueue work, cloned for each graph launch, freed once run or dropped. */

#include <stdlib.h>
#include <string.h>

#include "cmd.h"

void *sim_cmd_new(const struct sim_cmd_ops *ops, size_t size) {
  struct sim_cmd *cmd = calloc(1, size);
  if (!cmd)
    return NULL;
  cmd->ops = ops;
  cmd->size = size;
  return cmd;
}

struct sim_cmd *sim_cmd_clone(const struct sim_cmd *cmd) {
  struct sim_cmd *copy = malloc(cmd->size);
  if (!copy)
    return NULL;
  memcpy(copy, cmd, cmd->size);
  copy->next = NULL;
  if (cmd->ops->dup && !cmd->ops->dup(copy)) {
    free(copy);
    return NULL;
  }
  return copy;
}

void sim_cmd_free(struct sim_cmd *cmd) {
  if (cmd->ops->release)
    cmd->ops->release(cmd);
  free(cmd);
}

void sim_cmd_list_free(struct sim_cmd *cmd) {
  while (cmd) {
    struct sim_cmd *next = cmd->next;
    sim_cmd_free(cmd);
    cmd = next;
  }
}
