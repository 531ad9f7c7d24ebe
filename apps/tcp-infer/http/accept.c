/* tcp-infer: accepting connections. The loop accepts them itself, through a uv_poll_t on the
 * listening socket, not uv_listen: out of descriptors (EMFILE, ENFILE), libuv closes its spare
 * descriptor, accepts and closes every waiting connection with it and tells nobody, so those
 * connections were counted nowhere. Here the same trick is the server's own: a descriptor kept in
 * reserve (/dev/null) makes room to accept each waiting connection, which gets a 503 line when
 * its socket takes it at once, is closed, and is counted
 * (cuv_infer_connections_refused_fds_total); then the reserve is taken again. Accepted
 * connections go to conn.c (conn_open), which applies --max-connections, so that the cap, fitted
 * under the descriptor limit (listen.c), answers the usual 503 well before this happens. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accept.h"
#include "conn.h"
#include "server.h"

#define BACKLOG 1024

static const char REFUSED[] = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
                              "Content-Length: 26\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
                              "server out of descriptors\n";

static int accept_one(int listen_fd) {
  return accept4(listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

/* Out of descriptors: the reserve makes room for one at a time; each waiting connection is
 * answered 503 (if its socket takes the line now: nothing waits for it) and closed. */
static void refuse_waiting(loop_t *lp) {
  if (lp->reserve_fd < 0) { /* not taken again last time: nothing to make room with */
    lp->n.accept_errors++;
    lp->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return;
  }
  close(lp->reserve_fd);
  int fd;
  while ((fd = accept_one(lp->listen_fd)) >= 0 || errno == EINTR || errno == ECONNABORTED) {
    if (fd < 0)
      continue;
    (void)!send(fd, REFUSED, sizeof REFUSED - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
    close(fd);
    lp->n.connections_refused_fds++;
  }
  lp->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

/* The listening socket is readable: every waiting connection accepted. */
static void on_listen_readable(uv_poll_t *poll, int status, int events) {
  (void)events;
  loop_t *lp = poll->data;
  if (status < 0 || lp->stopping)
    return;
  for (;;) {
    int fd = accept_one(lp->listen_fd);
    if (fd >= 0) {
      if (conn_open(lp, fd) != 0)
        close(fd); /* not adopted (no memory, shutting down) */
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED)
      continue;
    if (errno == EMFILE || errno == ENFILE)
      refuse_waiting(lp);
    else if (errno != EAGAIN && errno != EWOULDBLOCK)
      lp->n.accept_errors++;
    return;
  }
}

int accept_start(loop_t *lp) {
  lp->reserve_fd = -1;
  if (listen(lp->listen_fd, BACKLOG) != 0)
    return -errno;
  int rc = uv_poll_init_socket(&lp->loop, &lp->listener, lp->listen_fd);
  if (rc != 0)
    return rc;
  lp->listener.data = lp;
  lp->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return uv_poll_start(&lp->listener, UV_READABLE, on_listen_readable);
}

/* The socket is closed once the poll handle is: never while libuv may still watch it. */
static void on_listener_closed(uv_handle_t *handle) {
  loop_t *lp = handle->data;
  close(lp->listen_fd);
  lp->listen_fd = -1;
}

void accept_stop(loop_t *lp) {
  if (!lp->listener.data || uv_is_closing((uv_handle_t *)&lp->listener))
    return;
  uv_close((uv_handle_t *)&lp->listener, on_listener_closed);
  if (lp->reserve_fd >= 0)
    close(lp->reserve_fd);
  lp->reserve_fd = -1;
}
