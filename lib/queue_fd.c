/* The descriptor behind cuv_queue_fd: an eventfd whose readability mirrors whether the queue has
 * something to deliver, so any event loop (epoll, poll, asyncio, io_uring) waits on a queue as on
 * a socket. Only the system calls are here, at the ground of lib/: lib/queue.c decides when the
 * mirrored value changes, under its lock, so the descriptor can never show a state the queue was
 * not in when the lock was released. */
#include <errno.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "queue_fd.h"

/* Adds one to the counter: readable from now on. */
static void set(int fd) {
  uint64_t one = 1;
  /* Only EAGAIN can fail it, with the counter at its maximum: readable then, as wanted. */
  ssize_t n = write(fd, &one, sizeof one);
  (void)n;
}

/* Resets the counter to 0 (a read of an eventfd without EFD_SEMAPHORE): unreadable. */
static void clear(int fd) {
  uint64_t count;
  /* EAGAIN: the counter was 0 already, which is what clearing wants. */
  ssize_t n = read(fd, &count, sizeof count);
  (void)n;
}

int cuv__queue_fd_open(cuv__queue_fd_t *r, bool deliverable) {
  if (r->fd >= 0)
    return 0;
  /* Non-blocking: a clear of a counter at 0 must return, not wait. Close-on-exec: a program the
   * owner starts does not inherit it. */
  int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0)
    return -errno; /* cuv's codes are libuv's, -errno: include/cuv/errors.h */
  r->fd = fd;
  r->ready = false;
  cuv__queue_fd_mirror(r, deliverable);
  return 0;
}

void cuv__queue_fd_mirror(cuv__queue_fd_t *r, bool deliverable) {
  if (r->fd < 0 || r->ready == deliverable)
    return;
  r->ready = deliverable;
  if (deliverable)
    set(r->fd);
  else
    clear(r->fd);
}

void cuv__queue_fd_close(cuv__queue_fd_t *r) {
  if (r->fd >= 0)
    close(r->fd);
  *r = CUV__QUEUE_FD_NONE;
}
