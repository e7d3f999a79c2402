/* SPDX-License-Identifier: MIT */
#ifndef RSX_LINGER_H
#define RSX_LINGER_H

#include <stdint.h>

#include "sock.h"

/*
 * Sockets the CM thread steps in the background (linger.c): closes that
 * linger, and servers that wait for their client's CUTOVER.
 *
 * close() of an upgraded socket must not end the TCP connection before
 * the peer has our FIN message, every byte before it in its ring (or, with
 * a HELLO still out, before the answer was taken off TCP).  A blocking
 * socket waits for that in close(), RSOCKX_LINGER_MS at most.  A
 * non-blocking one belongs to an event loop, which a close must not stop
 * for seconds: its close returns at once, and the socket lingers here,
 * with a private duplicate of its descriptor (s->orphan_fd) and a
 * reference of its own, until the CM thread sees the FIN land (or the
 * answer come), or RSOCKX_LINGER_MS pass; then that reference goes, and
 * with it the socket and its TCP connection.  Process exit waits for the
 * lingering ones with the others, within the same RSOCKX_LINGER_MS.
 *
 * A server whose ACK is out waits for the client's CUTOVER; a client that
 * never sends it must not keep the server's ring pinned for the life of
 * the TCP connection (conn.h says how the wait ends).  The CM thread looks
 * at each such server every round until the CUTOVER comes or the socket
 * goes back to TCP; the socket's last put takes it off the list.
 */
struct rsx_conn;
int rsx_linger_add(struct rsx_sock *s, int64_t until);
int rsx_linger_watch_cut(struct rsx_sock *s, struct rsx_conn *c);
void rsx_linger_forget(struct rsx_sock *s);
int rsx_linger_tick(void);
void rsx_linger_exit(int64_t deadline);
void rsx_linger_fork_child(void);

#endif
