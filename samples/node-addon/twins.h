#ifndef CUV_NODE_TWINS_H
#define CUV_NODE_TWINS_H

/* Registers the host twins of kernels.cu with libcuv-sim (harmless on a GPU: the PTX runs). */
void cuv_node_register_twins(void);

#endif
