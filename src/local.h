/* SPDX-License-Identifier: MIT */
#ifndef RSX_LOCAL_H
#define RSX_LOCAL_H

#include <sys/socket.h>

#include "oob.h"
#include "sock.h"

struct rsx_conn;

/*
 * Same-host connections: the out-of-band upgrade (oob.h) onto the
 * shared-memory transport (shm.h), with a Unix socket where RDMA has the
 * CM.
 *
 * A listener under rsockx also listens on an abstract Unix socket (of its
 * network namespace, as its TCP port is) named after its address and
 * port: "rsockx-tcp:<port>:<address, 32 hex digits, IPv4 as ::ffff:a.b.c.d>".
 * A client whose destination is on this host asks there, a SEQPACKET
 * message: the 56-byte request of wire.h, with its TCP socket itself
 * (SCM_RIGHTS).  The server does not believe the request's port: the
 * socket's own addresses name the connection, and holding the socket
 * proves that the requester is its end.  It answers with the 72-byte ACK
 * or NAK of wire.h; an ACK comes with four descriptors: the server's TCP
 * socket (its proof to the client, checked the same way before anything
 * is mapped), the connection's memfd and the two eventfds (server's,
 * client's).  A process never maps memory of a connection whose other end
 * it has not seen; neither keeps the other's TCP socket past the check.
 *
 * In a pre-forked server the connection is a worker's: the listener posts
 * the request on the family's board (board.h), the worker takes it and
 * answers there with its pid and the numbers of its four descriptors, and
 * the listener's CM thread takes those out of the worker (pidfd_getfd; the
 * worker is its descendant) and sends them to the client.  That ACK's qpn
 * is the worker's pid, the process whose exit the client must watch.
 */

int rsx_local_dst(const struct sockaddr *sa, socklen_t len);
void rsx_local_listen(struct rsx_sock *s, int fd);
void rsx_local_unlisten(struct rsx_sock *s);

/* The CM thread (probe.c). */
int rsx_local_start(void);
int rsx_local_epfd(void);
int rsx_local_ask(struct rsx_sock *s, int fd);
void rsx_local_ask_again(struct rsx_sock *s, int fd,
			 const struct rsx_hello *h);
void rsx_local_serve(void);
int rsx_local_tick(int64_t now);
void rsx_local_relay(struct rsx_oob_pend *p);

/* Any thread, under the socket's lock. */
int rsx_local_send(struct rsx_oob_pend *p, const struct rsx_hello *h,
		    struct rsx_conn *c, int tcp_fd);
int rsx_local_give(struct rsx_conn *c, struct rsx_oob_pend *p);
void rsx_local_board_answer(struct rsx_oob_pend *p, struct rsx_hello *h,
			    struct rsx_conn *c, int tcp_fd);
void rsx_local_fork_child(void);

#endif
