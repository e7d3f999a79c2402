/* SPDX-License-Identifier: MIT */
#ifndef RSX_LINGER_H
#define RSX_LINGER_H

#include <stdint.h>

#include "sock.h"

/*
 * Closes that go on in the background (linger.c).
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
 */
int rsx_linger_add(struct rsx_sock *s, int64_t until);
void rsx_linger_tick(void);
void rsx_linger_exit(int64_t deadline);
void rsx_linger_fork_child(void);

#endif
