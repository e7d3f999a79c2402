/* SPDX-License-Identifier: MIT */
#ifndef RSX_UPGRADE_H
#define RSX_UPGRADE_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "sock.h"

/*
 * The data path of sockets in the engine's hands (rsx_sock.mode == 1):
 * negotiation on the TCP stream, the cut-over, and I/O on upgraded
 * connections.  Entry points take the descriptor the application used and
 * return a byte count or -errno; the shim turns that into -1/errno.
 */
ssize_t rsx_sock_recv(int fd, const struct iovec *iov, int iovcnt, int flags);
ssize_t rsx_sock_send(int fd, const struct iovec *iov, int iovcnt, int flags);
ssize_t rsx_sock_sendfile(int out_fd, int in_fd, off_t *offset,
			  size_t count);
int rsx_sock_shutdown(int fd, int how);
int rsx_sock_ioctl(int fd, unsigned long req, void *arg);
void rsx_sock_close_last(struct rsx_sock *s, int fd);
/* A step of a close left to the background (linger.h), under s->lock:
 * 1 while the peer is still to get the stream's end. */
int rsx_sock_linger_step(struct rsx_sock *s, int64_t deadline);
/* The CM thread, under s->lock, for a server whose ACK is out (conn.h):
 * 1 while it still waits for c's CUTOVER. */
struct rsx_conn;
int rsx_sock_cut_step(struct rsx_sock *s, struct rsx_conn *c, int64_t now);
/* s->lock, unless another thread holds it until deadline: -EBUSY. */
int rsx_lock_until(struct rsx_sock *s, int64_t deadline);
void rsx_sock_orphan(struct rsx_sock *s, int fd);
void rsx_sock_orphan_end(struct rsx_sock *s);
void rsx_sock_connected(struct rsx_sock *s, int fd, int action,
			int connected);
void rsx_sock_accepted(struct rsx_sock *s);
void rsx_exit_flush(void);
int rsx_sock_exec_downgrade(struct rsx_sock *s, int fd);
int rsx_sock_exec_inherit(struct rsx_sock *s, int fd, int self);
void rsx_sock_stdio(int fd);
void rsx_vfork_dup(int oldfd);
void rsx_vfork_exec(void);
int rsx_vfork_serve(void);
ssize_t rsx_sock_splice(int in, loff_t *off_in, int out, loff_t *off_out,
			size_t len, unsigned int flags);
void rsx_sock_rcvlowat(int fd, int val);
void rsx_fork_share_sockets(void);
void rsx_fork_child_sockets(void);
void rsx_fork_parent_sockets(int failed);
int rsx_fork_serve(void);
void rsx_sock_forked_use(struct rsx_sock *s);

/* Out of band (oob.h). */
struct rsx_oob_pend;
struct rsx_hello;
struct sockaddr_storage;
int rsx_sock_oob_request(struct rsx_sock *s, int fd,
			 struct rsx_oob_pend *p);
void rsx_sock_oob_answer(struct rsx_sock *s, int fd, struct rsx_oob_pend *p,
			 uint64_t nonce, int why);
int rsx_sock_oob_start(struct rsx_sock *s, int fd, int yes,
		       struct rsx_hello *h, struct sockaddr_storage *src,
		       struct sockaddr_storage *dst, uint16_t *port);
int rsx_sock_oob_dst(const struct rsx_sock *s, struct sockaddr_storage *ss);
int rsx_sock_poll_begin(struct rsx_sock *s);
void rsx_sock_poll_done(int fd, uint32_t gen);

#endif
