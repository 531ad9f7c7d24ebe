#ifndef CUV_LIB_HOST_TASK_H
#define CUV_LIB_HOST_TASK_H

/* host_task.c: host functions on a stream, with the host-task mode CUV_HOST_SYNC asks for where
 * the driver takes one. */

/* Enqueues fn(arg) on stream: cuLaunchHostFunc_v2 with CU_HOST_TASK_SPINWAIT (CUV_HOST_SYNC=spin)
 * or CU_HOST_TASK_BLOCKING (block) where the driver has it, otherwise (and with CUV_HOST_SYNC=off)
 * cuLaunchHostFunc. The driver's result. */
CUresult cuv__launch_host_func(CUstream stream, CUhostFn fn, void *arg);

#endif
