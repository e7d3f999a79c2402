/* SPDX-License-Identifier: MIT */
#ifndef RSX_UPGRADE_INT_H
#define RSX_UPGRADE_INT_H

#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "sig.h"
#include "sock.h"
#include "stats.h"

/*
 * What upgrade.c (negotiation in band, the data path) and midstream.c (the
 * out-of-band switch) share.  Everything under s->lock.
 */
struct rsx_conn;
struct rsx_hello;

/* Do s's TCP bytes count towards an out-of-band cut-over? */
static inline int rsx_counts(const struct rsx_sock *s)
{
	return rsx_state_counted(s->state) ||
	       (s->oob_ok && (s->state == RSX_ST_SERVER_NEW ||
			      s->state == RSX_ST_SERVER_STRIP));
}

/*
 * May s still move to a queue pair while a thread sleeps on its TCP socket
 * without a connection?  Such sleepers get woken (rsx_wake_fd).
 */
static inline int rsx_may_move(const struct rsx_sock *s)
{
	return rsx_counts(s) || s->state == RSX_ST_SERVER_NEW ||
	       s->state == RSX_ST_SERVER_STRIP;
}

/*
 * Why a connection stays TCP when rsx_conn_create() or rsx_conn_connect()
 * failed with err: RSOCKX_MAX_QPS (-EDQUOT), RSOCKX_PIN_MAX (-ENOSR, from
 * the pools), or anything else.
 */
static inline enum rsx_stat rsx_fallback_of(int err)
{
	return err == -EDQUOT ? RSX_STAT_fallback_qp_limit :
	       err == -ENOSR ? RSX_STAT_fallback_pinned :
			       RSX_STAT_fallback_resources;
}

/* upgrade.c */
ssize_t rsx_tcp_io(int fd, const struct iovec *iov, int iovcnt, size_t skip,
		   size_t len, int flags, int send);
uint64_t rsx_sum_iov(uint64_t h, const struct iovec *iov, int iovcnt,
		     size_t skip, size_t n);
void rsx_kick(struct rsx_conn *c);
int rsx_sleep(struct rsx_sock *s, int fd, short events, const sigset_t *mask,
	      const struct rsx_sig_seen *seen);
void rsx_to_tcp(struct rsx_sock *s, enum rsx_stat reason);
int rsx_local_addr(int fd, struct sockaddr_storage *ss);
void rsx_ready_upgraded(struct rsx_sock *s);
int rsx_client_start(struct rsx_sock *s, int fd, int nonblock);
int rsx_server_conn(struct rsx_sock *s, int fd, const struct rsx_hello *hello,
		    enum rsx_stat *stat);

/* midstream.c */
int rsx_wake_fd(struct rsx_sock *s);
void rsx_wake_close(struct rsx_sock *s);
void rsx_wake_sleepers(struct rsx_sock *s);
ssize_t rsx_counted_io(struct rsx_sock *s, int fd, const struct iovec *iov,
		       int iovcnt, size_t len, int flags, int nonblock,
		       int send, size_t *done);
void rsx_board_check(struct rsx_sock *s, int fd);
void rsx_oob_apply(struct rsx_sock *s, int fd);

#endif
