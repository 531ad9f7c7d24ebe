/* tcp-infer: connections (conn.c) */
#ifndef TCP_INFER_CONN_H
#define TCP_INFER_CONN_H

#include "server.h"

void conn_settings_init(llhttp_settings_t *settings);
/* Serves a connected stream socket (accept.c's; fuzz/http.c: one end of a socketpair), or answers
 * it 503 over --max-connections; the loop owns and closes it once this returns 0. */
int conn_open(loop_t *lp, uv_os_sock_t sock);
void conn_close_all(loop_t *lp);
/* Shutdown: closes the connections and the loop's own handles of conn.c, frees its caches. */
void conn_loop_close(loop_t *lp);
/* For timeouts.c: the loop's connections, and where each is: closing (a clock of its own), idle
 * (since its last read or write), in a request's head or body (since it began), or owed answers
 * (the GPU work's own limits apply). */
typedef enum { CONN_CLOSING, CONN_IDLE, CONN_HEAD, CONN_BODY, CONN_BUSY } conn_stage_t;
conn_t *conn_first(loop_t *lp);
conn_t *conn_next(const conn_t *c);
conn_stage_t conn_stage(const conn_t *c, uint64_t *since_ms);
/* Its time is up: a request in its head or body is answered 408 and the connection closes after
 * the answers owed before it; an idle one closes. */
void conn_expire(conn_t *c);

#endif
