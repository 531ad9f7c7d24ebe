/* tcp-infer: where the server listens (listen.h). 127.0.0.1 unless --listen says otherwise: a
 * server reachable from a network is the operator's choice. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <uv.h>

#include "listen.h"

#define FD_RESERVE 64       /* descriptors the process keeps: stdio, files, the loops' own */
#define FD_PER_LOOP 16      /* a loop's listener, its handles, its workers' pipes */

/* The address as a sockaddr: IPv4, else IPv6; its length, 0 when it is neither. */
static socklen_t to_sockaddr(const listen_addr_t *a, struct sockaddr_storage *ss) {
  if (uv_ip4_addr(a->host, a->port, (struct sockaddr_in *)ss) == 0)
    return sizeof(struct sockaddr_in);
  if (uv_ip6_addr(a->host, a->port, (struct sockaddr_in6 *)ss) == 0)
    return sizeof(struct sockaddr_in6);
  return 0;
}

bool listen_addr_parse(const char *arg, listen_addr_t *a) {
  const char *host = arg, *colon = strrchr(arg, ':');
  size_t len = colon ? (size_t)(colon - arg) : 0;
  if (arg[0] == '[') { /* [v6]:port */
    const char *close = strchr(arg, ']');
    if (!close || close[1] != ':')
      return false;
    host = arg + 1;
    len = (size_t)(close - host);
    colon = close + 1;
  }
  if (!colon || len == 0 || len >= sizeof a->host || !colon[1])
    return false;
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end || port < 0 || port > 65535)
    return false;
  listen_addr_t parsed = {.port = (int)port};
  memcpy(parsed.host, host, len);
  struct sockaddr_storage ss;
  if (!to_sockaddr(&parsed, &ss))
    return false;
  *a = parsed;
  return true;
}

void listen_addr_format(const listen_addr_t *a, char *buf, size_t n) {
  snprintf(buf, n, strchr(a->host, ':') ? "[%s]:%d" : "%s:%d", a->host, a->port);
}

int listen_socket(listen_addr_t *a, bool reuseport) {
  struct sockaddr_storage ss;
  socklen_t len = to_sockaddr(a, &ss);
  int fd = len ? socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
  char where[96];
  listen_addr_format(a, where, sizeof where);
  if (fd < 0) {
    fprintf(stderr, "tcp-infer: cannot listen on %s: %s\n", where, strerror(errno));
    return -1;
  }
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (reuseport)
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
      getsockname(fd, (struct sockaddr *)&ss, &len) != 0) {
    fprintf(stderr, "tcp-infer: cannot bind %s: %s\n", where, strerror(errno));
    close(fd);
    return -1;
  }
  a->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                           : ((struct sockaddr_in *)&ss)->sin_port);
  return fd;
}

unsigned listen_fd_room(unsigned loops) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
    return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    struct rlimit raised = {rl.rlim_max, rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
      rl = raised;
  }
  rlim_t keep = FD_RESERVE + (rlim_t)FD_PER_LOOP * loops;
  if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > keep + 1000000u)
    return 1000000u;
  return rl.rlim_cur > keep ? (unsigned)(rl.rlim_cur - keep) : 1;
}
