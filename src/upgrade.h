/* SPDX-License-Identifier: MIT */
#ifndef RSX_UPGRADE_H
#define RSX_UPGRADE_H

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
void rsx_sock_orphan(struct rsx_sock *s, int fd);
void rsx_sock_orphan_end(struct rsx_sock *s);
void rsx_sock_connected(struct rsx_sock *s, int fd, int action,
			int connected);
void rsx_sock_accepted(struct rsx_sock *s);
void rsx_exit_flush(void);
int rsx_sock_exec_downgrade(struct rsx_sock *s, int fd);
void rsx_sock_rcvlowat(int fd, int val);
void rsx_fork_child_sockets(void);

#endif
