/* tcp-infer: where the server listens (listen.c): --listen's ADDR:PORT (IPv4, or IPv6 in
 * brackets), each loop's socket, and how many connections the descriptor limit leaves room for. */
#ifndef TCP_INFER_LISTEN_H
#define TCP_INFER_LISTEN_H

#include <stdbool.h>
#include <stddef.h>

typedef struct listen_addr {
  char host[64]; /* a numeric IPv4 or IPv6 address */
  int port;      /* 0: an ephemeral one, the bound socket says which */
} listen_addr_t;

/* "127.0.0.1:8080", "0.0.0.0:80", "[::1]:8080", "[::]:0"; false when it is none of these. */
bool listen_addr_parse(const char *arg, listen_addr_t *a);
/* "host:port", or "[host]:port" for IPv6, into buf. */
void listen_addr_format(const listen_addr_t *a, char *buf, size_t n);
/* A listening socket's descriptor bound to a (with SO_REUSEPORT when several loops share the
 * address: the kernel spreads the connections over them); a->port becomes the bound one. -1
 * after a message. */
int listen_socket(listen_addr_t *a, bool reuseport);
/* Raises the descriptor limit to its hard maximum (best effort) and returns how many connections
 * fit under it, what the server itself holds (loops, listeners, worker pipes) set aside. */
unsigned listen_fd_room(unsigned loops);

#endif
