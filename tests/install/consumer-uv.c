/* Built against an installed cuv-uv (pkg-config cuv-uv) by check.sh and run on the simulator:
 * one submission delivered into a libuv loop. */
#include <stdio.h>

#include <cuv/uv.h>

static int calls, status = -1;

static void done(int st, cuv_output_t *output, void *arg) {
  calls++;
  status = st;
}

int main(void) {
  uv_loop_t loop;
  cuv_uv_t *bridge;
  cuv_device_t *dev;
  cuv_buffer_t *buf;
  if (uv_loop_init(&loop) != 0 || cuv_init() != 0 || cuv_device_open(&dev, 0) != 0 ||
      cuv_buffer_create(&buf, dev, 4096) != 0 || cuv_uv_open(&bridge, &loop) != 0)
    return 1;
  if (cuv_uv_submit(bridge, cuv_memset8(buf, 0, 7, 4096), done, NULL, NULL) != 0)
    return 1;
  uv_run(&loop, UV_RUN_DEFAULT);
  cuv_uv_close(bridge, NULL, NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  cuv_buffer_unref(buf);
  cuv_device_unref(dev);
  int closed = uv_loop_close(&loop);
  printf("callbacks %d, status %d, loop close %d\n", calls, status, closed);
  return calls == 1 && status == 0 && closed == 0 ? 0 : 1;
}
