#ifndef CUV_SIM_CMD_H
#define CUV_SIM_CMD_H

/* Stream commands (cmd.c; struct sim_cmd and its ops are in sim.h). */

#include "sim.h"

SIM_HIDDEN void *sim_cmd_new(const struct sim_cmd_ops *ops, size_t size);
/* Memberwise copy + dup (lock held); NULL when out of memory. */
SIM_HIDDEN struct sim_cmd *sim_cmd_clone(const struct sim_cmd *cmd);
/* release + free (lock held). */
SIM_HIDDEN void sim_cmd_free(struct sim_cmd *cmd);
/* sim_cmd_free of every command of the list that starts at cmd (NULL: none; lock held). */
SIM_HIDDEN void sim_cmd_list_free(struct sim_cmd *cmd);

#endif
