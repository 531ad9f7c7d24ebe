/* fileio: a file streamed through the GPU on one libuv loop. uv_fs_read fills a chunk, a kernel
 * enciphers it (each byte XORed with a keystream of its file offset: keystream.h), uv_fs_write
 * stores it at the same offset, and a uv_timer keeps ticking on the loop all along.
 *
 *   fileio <input> <output> [chunk-bytes] [slots] [stage-us] [ptx-file]
 *
 * Each of `slots` chunks cycles on a pinned host buffer and a device buffer of its own:
 *
 *   uv_fs_read(offset) -> cuv_uv_submit(upload; delay; fio_xor; download) -> uv_fs_write(offset)
 *   -> the next unread offset, until a read finds the end of the file
 *
 * The loop thread never waits: the reads and writes run on libuv's thread pool, the GPU work is
 * delivered through the bridge (include/cuv/uv.h). `delay` keeps the stream busy for stage-us
 * microseconds, so the timer visibly ticks while chunks are on the GPU. Running the output
 * through fileio again gives the input back. Exit status: 0 when every chunk was written, 77
 * without any CUDA driver (run it with CUV_DRIVER=sim), 1 otherwise. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuv.h>
#include <cuv/uv.h>

#include "fileio_launchers.h" /* fio_xor_launch, fio_delay_launch: generated from fileio.cu */

/* Host twins of the kernels for libcuv-sim (twins.c); a no-op without it. */
void fileio_register_twins(void);

#define EXIT_NO_DRIVER 77

typedef struct app app_t;

/* One chunk in flight: where it is in the file and the memory it cycles on. */
typedef struct slot {
  app_t *app;
  uv_fs_t req;
  cuv_host_buffer_t *host;
  cuv_buffer_t *dev;
  int64_t offset;
  unsigned bytes;
} slot_t;

struct app {
  uv_loop_t loop;
  uv_timer_t timer;
  cuv_uv_t *bridge;
  cuv_device_t *dev;
  fileio_module_t kernels;
  uv_file in, out;
  unsigned chunk, nslots, active, chunks;
  unsigned long long stage_ns;
  int64_t next_offset, bytes_written;
  int error; /* the first one; once set, no slot starts another chunk */
  unsigned ticks, ticks_while_busy;
  slot_t *slots;
};

static void read_next(slot_t *s);

static void finish(app_t *app) {
  uv_timer_stop(&app->timer);
  uv_close((uv_handle_t *)&app->timer, NULL);
  cuv_uv_close(app->bridge, NULL, NULL); /* nothing left in flight: closes at once */
}

/* A slot with nothing more to do; the last one ends the run. */
static void retire(slot_t *s, int status) {
  app_t *app = s->app;
  if (status < 0 && app->error == 0)
    app->error = status;
  if (--app->active == 0)
    finish(app);
}

static void on_written(uv_fs_t *req) {
  slot_t *s = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  if (n != (ssize_t)s->bytes) {
    retire(s, n < 0 ? (int)n : UV_EIO);
    return;
  }
  s->app->bytes_written += n;
  s->app->chunks++;
  read_next(s);
}

/* Completion, on the loop thread: the host buffer holds the enciphered chunk. */
static void on_processed(int status, cuv_output_t *out, void *arg) {
  slot_t *s = arg;
  if (status != 0) {
    retire(s, status);
    return;
  }
  uv_buf_t buf = uv_buf_init(cuv_host_buffer_data(s->host), s->bytes);
  int rc = uv_fs_write(&s->app->loop, &s->req, s->app->out, &buf, 1, s->offset, on_written);
  if (rc < 0)
    retire(s, rc);
}

/* One submission per chunk: the host buffer in and out again, the kernels in between. */
static void process(slot_t *s, unsigned bytes) {
  app_t *app = s->app;
  s->bytes = bytes;
  unsigned long long base = (unsigned long long)s->offset;
  cuv_op_t *op = cuv_upload(s->dev, 0, s->host, 0, s->bytes);
  op = cuv_seq(op, fio_delay_launch(&app->kernels, cuv_for_num_elems_block(1, 1), app->stage_ns));
  op = cuv_seq(op, fio_xor_launch(&app->kernels, cuv_for_num_elems(bytes), bytes, base, s->dev));
  op = cuv_seq(op, cuv_download_into(s->host, 0, s->dev, 0, s->bytes));
  int rc = cuv_uv_submit(app->bridge, op, on_processed, s, NULL); /* one check, at the end */
  if (rc != 0)
    retire(s, rc);
}

/* A regular file's read returns the whole chunk except at the end of the file. */
static void on_read(uv_fs_t *req) {
  slot_t *s = req->data;
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  if (n <= 0)
    retire(s, (int)n); /* 0: the end of the file */
  else
    process(s, (unsigned)n);
}

static void read_next(slot_t *s) {
  app_t *app = s->app;
  if (app->error != 0) {
    retire(s, 0);
    return;
  }
  s->offset = app->next_offset;
  app->next_offset += app->chunk;
  uv_buf_t buf = uv_buf_init(cuv_host_buffer_data(s->host), app->chunk);
  int rc = uv_fs_read(&app->loop, &s->req, app->in, &buf, 1, s->offset, on_read);
  if (rc < 0)
    retire(s, rc);
}

static void on_tick(uv_timer_t *timer) {
  app_t *app = timer->data;
  app->ticks++;
  app->ticks_while_busy += cuv_uv_pending(app->bridge) > 0;
}

/* A call that failed; while initialization has failed (every call then fails with its status),
 * also why: cuv_init_error names what cuv tried and the reason (the loader's, for a driver). */
static int fail(const char *what, int rc) {
  const char *why = cuv_init_error();
  fprintf(stderr, "fileio: %s: %s (%s)%s%s\n", what, cuv_err_name(rc), cuv_strerror(rc),
          why ? ": " : "", why ? why : "");
  return EXIT_FAILURE;
}

/* From ptx when given, else the PTX embedded in the program. */
static int load_kernels(app_t *app, const char *ptx) {
  return ptx ? fileio_module_load_file(&app->kernels, app->dev, ptx)
             : fileio_module_load(&app->kernels, app->dev);
}

/* Files opened synchronously (a NULL callback): the loop is not running yet. */
static int open_files(app_t *app, const char *in, const char *out) {
  uv_fs_t req;
  app->in = uv_fs_open(NULL, &req, in, O_RDONLY, 0, NULL);
  uv_fs_req_cleanup(&req);
  if (app->in < 0)
    return app->in;
  app->out = uv_fs_open(NULL, &req, out, O_WRONLY | O_CREAT | O_TRUNC, 0644, NULL);
  uv_fs_req_cleanup(&req);
  return app->out < 0 ? app->out : 0;
}

static int make_slots(app_t *app) {
  if (!(app->slots = calloc(app->nslots, sizeof *app->slots)))
    return CUV_ENOMEM;
  for (unsigned i = 0; i < app->nslots; i++) {
    slot_t *s = &app->slots[i];
    s->app = app;
    s->req.data = s;
    int rc = cuv_host_buffer_create(&s->host, app->dev, app->chunk);
    if (rc != 0 || (rc = cuv_buffer_create(&s->dev, app->dev, app->chunk)) != 0)
      return rc;
  }
  return 0;
}

static int setup(app_t *app, char **argv, const char *ptx) {
  int rc;
  if ((rc = cuv_device_open(&app->dev, 0)) != 0)
    return fail("cuv_device_open", rc);
  if ((rc = load_kernels(app, ptx)) != 0)
    return fail(ptx ? ptx : "the embedded PTX", rc);
  if ((rc = open_files(app, argv[1], argv[2])) != 0)
    return fail("opening the files", rc);
  if ((rc = make_slots(app)) != 0)
    return fail("making the buffers", rc);
  uv_loop_init(&app->loop);
  if ((rc = cuv_uv_open(&app->bridge, &app->loop)) != 0) {
    uv_loop_close(&app->loop);
    return fail("cuv_uv_open", rc);
  }
  uv_timer_init(&app->loop, &app->timer);
  app->timer.data = app;
  uv_timer_start(&app->timer, on_tick, 1, 1);
  return 0;
}

static void teardown(app_t *app) {
  uv_fs_t req;
  for (unsigned i = 0; app->slots && i < app->nslots; i++) {
    cuv_host_buffer_unref(app->slots[i].host);
    cuv_buffer_unref(app->slots[i].dev);
  }
  free(app->slots);
  uv_file files[] = {app->in, app->out};
  for (int i = 0; i < 2; i++)
    if (files[i] >= 0) {
      uv_fs_close(NULL, &req, files[i], NULL);
      uv_fs_req_cleanup(&req);
    }
  fileio_module_destroy(&app->kernels);
  cuv_device_unref(app->dev);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: fileio <input> <output> [chunk-bytes] [slots] [stage-us] [ptx]\n");
    return EXIT_FAILURE;
  }
  app_t app = {.in = -1, .out = -1};
  app.chunk = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 1u << 20;
  app.nslots = argc > 4 ? (unsigned)strtoul(argv[4], NULL, 10) : 4;
  app.stage_ns = (argc > 5 ? strtoull(argv[5], NULL, 10) : 2000) * 1000u;
  app.chunk = app.chunk ? app.chunk : 1;
  app.nslots = app.nslots ? app.nslots : 1;

  fileio_register_twins();
  int rc = cuv_init();
  if (rc == CUV_ENODRIVER) {
    const char *why = cuv_init_error();
    fprintf(stderr, "fileio: no CUDA driver: %s; CUV_DRIVER=sim runs it on the CPU simulator\n",
            why ? why : cuv_strerror(rc));
    return EXIT_NO_DRIVER;
  }
  if (rc != 0)
    return fail("cuv_init", rc);
  if (setup(&app, argv, argc > 6 ? argv[6] : NULL) != 0) {
    teardown(&app); /* what setup made before it failed */
    return EXIT_FAILURE;
  }

  uint64_t t0 = uv_hrtime();
  app.active = app.nslots;
  for (unsigned i = 0; i < app.nslots; i++)
    read_next(&app.slots[i]);
  uv_run(&app.loop, UV_RUN_DEFAULT); /* returns once the last slot closed the bridge */
  int closed = uv_loop_close(&app.loop);

  printf("fileio: %lld bytes in %u chunks in %.1f ms; the loop ticked %u times while GPU work "
         "was in flight (%u in all)\n",
         (long long)app.bytes_written, app.chunks, (double)(uv_hrtime() - t0) / 1e6,
         app.ticks_while_busy, app.ticks);
  teardown(&app);
  if (app.error != 0)
    return fail("streaming the file", app.error);
  return closed == 0 ? EXIT_SUCCESS : fail("uv_loop_close", closed);
}
