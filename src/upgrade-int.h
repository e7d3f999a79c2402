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
 * What the engine's socket side shares: upgrade.c (the state machine and
 * the data path), wait.c (waiting), inband.c (the in-band negotiation),
 * midstream.c (the out-of-band switch), close.c (shutdown, close, exit)
 * and forkexec.c (fork and exec).  Everything under s->lock.
 */
struct rsx_conn;
struct rsx_hello;

/*
 * The descriptor of s's TCP socket for a call under way: the one it came
 * in with, or, once the program closed that while the call slept, the
 * private duplicate it goes on with (rsx_sock_orphan()).  Read under
 * s->lock, again each time a call takes the lock back.
 */
static inline int rsx_sfd(const struct rsx_sock *s, int fd)
{
	return unlikely(s->orphan_fd >= 0) ? s->orphan_fd : fd;
}

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
 * Why a connection stays TCP when rsx_rdma_create() or rsx_conn_connect()
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
void rsx_to_tcp(struct rsx_sock *s, enum rsx_stat reason);
int rsx_local_addr(int fd, struct sockaddr_storage *ss);
void rsx_ready_upgraded(struct rsx_sock *s);
void rsx_peer_closed(struct rsx_sock *s);
int rsx_resend(struct rsx_sock *s, int fd);
void rsx_progress(struct rsx_sock *s, int fd);
int rsx_down_settle(struct rsx_sock *s, int fd);
int rsx_cut_abandoned(struct rsx_sock *s);
int rsx_may_count_on(struct rsx_sock *s, const struct rsx_conn *c);
struct rsx_ho_counts;
void rsx_count_on(struct rsx_sock *s, const struct rsx_ho_counts *n,
		  enum rsx_stat why);
int rsx_peer_gone(const struct rsx_conn *c);
int rsx_wait_conn(struct rsx_sock *s, int fd, int want_tcp);
ssize_t rsx_tcp_send_now(struct rsx_sock *s, int fd, const struct iovec *iov,
			 int iovcnt, size_t sent, size_t len, int flags);
ssize_t rsx_up_send(struct rsx_sock *s, int fd, const struct iovec *iov,
		    int iovcnt, size_t len, int flags, int nonblock,
		    size_t sent);

/* wait.c */
void rsx_call_begin(int opt);
void rsx_call_until(int64_t until);
int64_t rsx_linger_end(void);
void rsx_kick(struct rsx_conn *c);
int rsx_sleep(struct rsx_sock *s, int fd, short events, const sigset_t *mask,
	      const struct rsx_sig_seen *seen);
void rsx_wait_in(struct rsx_sock *s, int fd, int ms);

/* inband.c */
int rsx_client_start(struct rsx_sock *s, int fd, int nonblock);
int rsx_client_answer(struct rsx_sock *s, int fd);
int rsx_server_conn(struct rsx_sock *s, int fd, const struct rsx_hello *hello,
		    int shm,
		    enum rsx_stat *stat);
int rsx_peek_msg(struct rsx_sock *s, int fd, struct rsx_hello *h);
void rsx_consume_msg(int fd);
ssize_t rsx_hello_send(struct rsx_sock *s, int fd, const struct iovec *iov,
		       int iovcnt, size_t len, int flags, int nonblock);
int rsx_negotiate(struct rsx_sock *s, int fd, int reading, int nonblock);

/* close.c */
int rsx_finish(struct rsx_sock *s, int fd, int64_t deadline);
int rsx_client_hello_settle(struct rsx_sock *s, int fd, int64_t deadline);

/* forkexec.c: why a connection goes back to TCP (rsx_downgrade) */
enum rsx_down_why {
	RSX_DOWN_FORK = 0,	/* a fork child asked for it */
	RSX_DOWN_EXEC,		/* this process executes another program */
	RSX_DOWN_CLOSE,		/* it lets go of it; a fork child may not */
};
int rsx_downgrade(struct rsx_sock *s, int fd, enum rsx_down_why why);
int rsx_forked_use(struct rsx_sock *s, int recount);

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
