/* SPDX-License-Identifier: MIT */
#ifndef RSX_OOB_H
#define RSX_OOB_H

#include <stdint.h>
#include <sys/socket.h>

#include "sock.h"
#include "wire.h"

/*
 * The out-of-band upgrade: a TCP connection moves onto a queue pair at any
 * point of its life, without a byte in the TCP stream that the
 * application did not write.
 *
 * A client whose connection started before it knew that the server runs
 * rsockx (its probe was out) keeps that connection on TCP, counting every
 * byte (RSX_ST_CLIENT_WAIT).  Once the probe says yes, the CM thread makes
 * the connection's queue pair and ring and sends an RDMA CM connection
 * request to the server's port, its private data naming the TCP
 * connection (wire.h: the client's TCP port, with the request's own
 * addresses) and carrying what a HELLO carries (RSX_ST_CLIENT_OOB).  The
 * server's CM thread, the one that answers probes for that port, finds the
 * accepted socket (or waits for the program to accept it) and answers with
 * a reject whose private data is an ACK with its own queue pair and ring,
 * or a NAK.  From there on it is the in-band upgrade's cut-over: the
 * server keeps sending on TCP until the client's CUTOVER(n), n the bytes
 * the client sent on TCP since connect(); each reader takes exactly n
 * bytes from TCP, then the ring.
 *
 * Where the program waits: a thread asleep in poll() or select() on the
 * TCP descriptor would not hear of bytes that come by the ring, so while
 * one is (s->pollers) the CM thread leaves the switch to the program's
 * next call on the socket (counted in oob_deferred).  epoll registrations
 * move to the readiness stand-in, and a blocking call's sleep is woken.
 */
struct rsx_oob_pend {
	struct rsx_oob_pend *next;	/* outbox, or waiting for accept() */
	int type;		/* HELLO: a request; ACK, NAK: an answer; 0 failed */
	struct rsx_hello h;
	void *id;		/* a request's CM id, answered by the CM thread */
	int64_t expires;	/* ms: a request not answered by then is NAKed */
	uint8_t peer_addr[16];	/* a request's TCP connection, as the server sees it */
	uint16_t peer_port;
	uint16_t local_port;
	int slot;		/* on the family's board (board.h), or -1 */
	uint32_t seq;
	uint8_t answer[RSX_WIRE_LEN];
	/* same host (local.h): the Unix socket, the descriptors, the peer */
	int ufd;		/* the request's connection, or -1 */
	int fds[3];		/* an ACK's: memfd, server's and client's eventfd */
	int pid;		/* the peer's process */
	uint8_t shm;		/* a request for shared memory */
	uint8_t again;		/* its socket was settling: asked again */
	/*
	 * The answer of another process of the family (board.h): its pid and
	 * the numbers, in its table, of its TCP socket, memfd and eventfds.
	 */
	int tpid;
	int tfds[4];
	uint64_t tino;		/* the memfd's inode */
};

/* The CM thread (probe.c). */
int rsx_oob_cm_request(void *id, const void *priv, uint8_t len);
int rsx_oob_owns(const void *ctx);
void *rsx_oob_cm_event(void *ev);
int rsx_oob_tick(void);
int rsx_oob_pending(void);
void rsx_oob_rescan(void);

/* Any thread. */
void rsx_oob_accepted(struct rsx_sock *s, int fd, struct rsx_sock *l);
struct rsx_oob_pend *rsx_oob_pend_new(void);
void rsx_oob_pend_free(struct rsx_oob_pend *p);
void rsx_oob_route(struct rsx_oob_pend *p);
void rsx_oob_answered(int fd, const struct rsx_sock *asker, uint32_t gen,
		      uint64_t nonce, struct rsx_oob_pend *p, int why);
void rsx_oob_send(struct rsx_oob_pend *p, const struct rsx_hello *h);
void rsx_oob_drop(struct rsx_oob_pend *p);
void rsx_oob_sock_free(struct rsx_sock *s);
void rsx_oob_fork_child(void);

int rsx_oob_names(const struct rsx_sock *s, const uint8_t peer_addr[16],
		  uint16_t peer_port, uint16_t local_port);

/* IPv4 addresses as ::ffff:a.b.c.d, for comparing with IPv6 sockets. */
int rsx_oob_addr(const void *sa, uint8_t addr[16], uint16_t *port);
int rsx_oob_port_listens(const struct sockaddr *addr);

#endif
