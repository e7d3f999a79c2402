// SPDX-License-Identifier: MIT
/*
 * Upgraded connections across exec() and fork() (upgrade-int.h): the
 * DOWNGRADE that takes one back to TCP, before an exec and for a fork
 * child that uses its parent's connection (handoff.h), and what a fork
 * does to the sockets of parent and child (share.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "handoff.h"
#include "linger.h"
#include "libc.h"
#include "log.h"
#include "oob.h"
#include "probe.h"
#include "rdma.h"
#include "ready.h"
#include "share.h"
#include "upgrade.h"
#include "upgrade-int.h"

/*
 * Before our DOWNGRADE: every ring byte the peer wrote is ours to lose, so
 * none may be left when the peer went back to TCP first (it will not send
 * them again).  Our own bytes it had not read go now.
 */
static int rsx_exec_peer_down(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;

	if (rsx_conn_readable(c))
		return -EPIPE;
	rsx_finish(s, fd, rsx_linger_end());
	if (!s->conn || s->conn->tx_resend != s->conn->tx_head)
		return -ETIMEDOUT;
	return 0;
}

/*
 * Under s->lock, after our DOWNGRADE: s is TCP again.  When a fork child
 * asked for it (n: where the stream stands, which the child counts on
 * from), an accepted socket with a share slot counts on from there as
 * well, as every holder does (share.h).  Gone to plain TCP, it would
 * taint the slot and keep the child from ever being alone with it, though
 * this process may never move another byte of it: a server that forks
 * per connection closes its copy right after, and when its CM thread took
 * the child's request before that close, the child stayed TCP (local.test
 * again-srvfork under load).
 */
static void rsx_down_to_tcp(struct rsx_sock *s, const struct rsx_ho_counts *n)
{
	if (!n || s->share_slot < 0 || !rsx_config.oob || s->rd_shut ||
	    s->wr_shut || atomic_load(&s->role) != RSX_ROLE_ACCEPTED) {
		rsx_to_tcp(s, RSX_STAT_COUNT);
		return;
	}
	rsx_count_on(s, n, RSX_STAT_COUNT);
}

/*
 * Under s->lock: our last message on the QP (DOWNGRADE, conn.h) hands the
 * data path back to TCP: the peer reads its ring up to our last byte and
 * TCP after it, and sends again over TCP whatever of its ring bytes our
 * application had not read.  When this cannot be done, the connection is
 * shut down: both ends see it end, never a stream with a hole.  why: see
 * upgrade-int.h; before an exec the process is about to execute another
 * program (see below).  Returns 0 (TCP now) or -errno (shut down).
 */
int rsx_downgrade(struct rsx_sock *s, int fd, enum rsx_down_why why)
{
	int64_t deadline = rsx_linger_end();
	int exec = why == RSX_DOWN_EXEC;
	struct rsx_ho_counts n;
	struct rsx_conn *c;
	int ret = 0, told = 0;

	rsx_call_until(deadline);
	if (s->state == RSX_ST_CLIENT_HELLO && s->conn) {
		ret = rsx_client_hello_settle(s, fd, rsx_linger_end());
		goto out;
	}
	c = s->conn;
	if (s->state != RSX_ST_UPGRADED || !c->qp_ready) {
		ret = s->state == RSX_ST_UPGRADED ? -EIO : 0;
		goto out;
	}
	rsx_conn_poll(c);
	if (c->peer_down) {
		ret = rsx_exec_peer_down(s, fd);
		goto out;
	}
	while ((ret = rsx_conn_downgrade(c)) == -EAGAIN &&
	       rsx_now_ms() < deadline) {
		/* a message credit; or another thread took it to TCP */
		if (rsx_wait_conn(s, fd, 0) == -ERESTART) {
			ret = 0;
			goto out;
		}
	}
	if (!ret)
		ret = rsx_conn_wait_sent(c, c->down_wr, rsx_config.linger_ms);
	/* the peer may have gone back to TCP at the same moment */
	if (!ret && rsx_conn_poll(c) >= 0 && c->peer_down)
		ret = rsx_exec_peer_down(s, fd);
	if (!ret && s->wr_shut)
		rsx_libc.shutdown(fd, SHUT_WR);	/* our FIN, as TCP's */
	if (!ret)
		rsx_stat_inc(exec ? RSX_STAT_exec_downgraded :
			     RSX_STAT_fork_downgraded);
	if (!ret && !c->peer_down && !s->wr_shut && !exec) {
		/* where the stream stands, for a child that counts on */
		n.tx = c->tx_tcp;
		n.rx = c->rx_tcp;
		n.tx_sum = c->tx_sum;
		n.rx_sum = c->rx_sum;
		rsx_handoff_counts(s, &n);
		told = why == RSX_DOWN_FORK;
	}
out:
	c = s->conn;
	if (ret && c) {
		rsx_warn("fd %d: could not take the connection back to TCP "
			 "for %s (%s): shut down", fd,
			 exec ? "exec" : "a fork child", strerror(-ret));
		rsx_libc.shutdown(fd, SHUT_RDWR);
		rsx_stat_inc(exec ? RSX_STAT_exec_lost : RSX_STAT_fork_lost);
	}
	rsx_handoff_done(s, !ret);
	if (why == RSX_DOWN_CLOSE) {
		/*
		 * We let go of it, moving no byte more: a child that holds
		 * it may find itself alone with it (share.h), which the
		 * taint of going to plain TCP would deny it; and a request
		 * for it is no longer ours to take (rsx_oob_find).
		 */
		rsx_share_drop(s);
		s->oob_ok = 0;
	}
	/* a thread asleep on it frees it, and goes on over TCP (rsx_sleep) */
	if (c)
		rsx_down_to_tcp(s, told ? &n : NULL);
	return ret;
}

/*
 * s, counted, may not move out of band any more: another process holds
 * it too, or stdio moves its bytes.  An accepted socket that has not
 * shown whether an in-band HELLO leads its stream (SERVER_NEW, _STRIP)
 * keeps looking for one, and only stops counting; the others are TCP
 * now.  Under the socket's lock.
 */
static void rsx_oob_off(struct rsx_sock *s, enum rsx_stat why)
{
	if (rsx_state_counted(s->state)) {
		rsx_to_tcp(s, why);
	} else if (rsx_counts(s)) {
		s->oob_ok = 0;
		rsx_stat_inc(why);
	}
}

/*
 * Under s->lock, s counted when last looked at without it: it stops
 * counting (rsx_oob_off), unless an answer upgraded it in between, which
 * the caller then takes back to TCP (1).  Looked at first, the count
 * leaves no gap: an answer moves a counted socket to UPGRADED only.
 */
static int rsx_stop_counting(struct rsx_sock *s, enum rsx_stat why)
{
	if (s->state == RSX_ST_UPGRADED)
		return 1;
	rsx_oob_off(s, why);
	return 0;
}

/*
 * The process is about to execve() another program, which inherits fd: it
 * cannot use our RDMA resources, but it can use TCP (rsx_downgrade).
 * Should the exec fail, this process goes on with plain TCP just the same.
 */
int rsx_sock_exec_downgrade(struct rsx_sock *s, int fd)
{
	int ret, tries;

	for (tries = 0; rsx_sock_trylock(s); tries++) {
		if (tries == 100) {
			/* held by a thread the exec is about to end */
			rsx_warn("fd %d: busy at exec: shut down", fd);
			rsx_libc.shutdown(fd, SHUT_RDWR);
			rsx_stat_inc(RSX_STAT_exec_lost);
			return -EBUSY;
		}
		usleep(1000);
	}
	ret = rsx_downgrade(s, fd, RSX_DOWN_EXEC);
	rsx_sock_unlock(s);
	return ret;
}

/*
 * A new program inherits fd, upgraded: the connection goes back to TCP
 * first, which it can use.  Here (self), or in the parent of a spawned
 * child, which goes on over TCP too: two processes hold it now.  A fork
 * child's socket of its parent's is handed over (rsx_forked_use).  One
 * that may still be upgraded stays TCP, here and in a spawning parent, as
 * in a forking one.  Returns 1 when s was upgraded.
 */
int rsx_sock_exec_inherit(struct rsx_sock *s, int fd, int self)
{
	int up;

	/*
	 * A process that executes itself too: the new program does not know
	 * the count (only sockets that may still get a HELLO are handed
	 * over), and an answer that upgraded s between this look and
	 * execve() would leave it reading TCP while the peer writes into
	 * the ring.  Should the exec fail, s stays TCP.
	 */
	if (rsx_counts(s)) {
		/* bytes counted here no longer tell where the stream is */
		rsx_sock_lock(s);
		up = rsx_stop_counting(s, RSX_STAT_fallback_fork);
		rsx_sock_unlock(s);
		if (!up)
			return 0;
	}
	if (s->state == RSX_ST_UPGRADED || s->state == RSX_ST_CLIENT_HELLO) {
		rsx_sock_exec_downgrade(s, fd);	/* TCP now */
		return 1;
	}
	if (s->state != RSX_ST_FORKED)
		return 0;
	rsx_sock_lock(s);
	if (s->state == RSX_ST_FORKED && (!self || rsx_forked_use(s, 0))) {
		rsx_warn("fd %d: upgraded connection passed to a new program, "
			 "which cannot use it", fd);
		rsx_stat_inc(RSX_STAT_exec_lost);
	}
	rsx_sock_unlock(s);
	return 1;
}

/*
 * fdopen() of a socket: from now on the program's stdio moves its bytes
 * by libc's own read() and write(), past the shim (busybox wget, ftp
 * clients).  A counted socket would be upgraded under bytes it never
 * counted, which the CUTOVER's proof then breaks with a reset; an
 * upgraded one would leave ring bytes that stdio never reads.  Both go
 * to TCP for good, the upgraded one by a DOWNGRADE as for an exec.
 */
void rsx_sock_stdio(int fd)
{
	struct rsx_sock *s = rsx_fd_get(fd);
	int up = 1;

	if (!s)
		return;
	if (rsx_counts(s)) {
		rsx_sock_lock(s);
		up = rsx_stop_counting(s, RSX_STAT_fallback_stdio);
		rsx_sock_unlock(s);
	}
	if (up && (s->state == RSX_ST_UPGRADED ||
		   s->state == RSX_ST_CLIENT_HELLO) &&
	    !rsx_sock_exec_downgrade(s, fd))
		rsx_stat_inc(RSX_STAT_fallback_stdio);
	rsx_sock_put(s);
}

/*
 * A vfork child that clears close-on-exec itself or dup2()s a socket to
 * another number after rsx_on_vfork() looked (python's subprocess with
 * pass_fds, an inetd-like dup2 onto 0) hands it to the new program all
 * the same.  The child runs in our memory and may change nothing of ours
 * but a flag: it marks the socket and rings the CM thread, which takes it
 * back to TCP (rsx_vfork_serve); a close() of ours before that hands it
 * back as for a fork child (rsx_hand_back).  Bytes the new program sends
 * on TCP meanwhile wait in the peer's socket until our DOWNGRADE, and
 * ring bytes we had not read go again over TCP: nothing is out of order.
 */
static _Atomic int rsx_vfork_marks;

static void rsx_vfork_mark(struct rsx_sock *s)
{
	if (s->kind != RSX_SOCK_TCP ||
	    (s->state != RSX_ST_UPGRADED && s->state != RSX_ST_CLIENT_HELLO &&
	     !rsx_counts(s)))
		return;
	atomic_store(&s->vfork_exec, 1);
	atomic_store(&rsx_vfork_marks, 1);
	rsx_cm_ring();
}

/* The vfork child dup2()s oldfd: the copy is close-on-exec no more. */
void rsx_vfork_dup(int oldfd)
{
	struct rsx_sock *s = rsx_fd_peek(oldfd);

	if (s)
		rsx_vfork_mark(s);
}

/* The vfork child executes a program: what it inherits by number. */
void rsx_vfork_exec(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;
	int flags;

	if (!atomic_load_explicit(&rsx_engine_socks, memory_order_relaxed))
		return;
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s)
			continue;
		flags = rsx_libc.fcntl(fd, F_GETFD);
		if (flags >= 0 && !(flags & FD_CLOEXEC))
			rsx_vfork_mark(s);
	}
}

/* Sockets a vfork child passed on, the CM thread.  1: one was busy. */
int rsx_vfork_serve(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;
	int busy = 0;

	if (!atomic_exchange(&rsx_vfork_marks, 0))
		return 0;
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || !atomic_load(&s->vfork_exec) || !rsx_sock_tryget(s))
			continue;
		if (rsx_sock_trylock(s)) {
			busy = 1;
			atomic_store(&rsx_vfork_marks, 1);
			rsx_sock_put(s);
			continue;
		}
		if (rsx_fd_peek(fd) == s && atomic_exchange(&s->vfork_exec, 0)) {
			if (s->state == RSX_ST_UPGRADED ||
			    s->state == RSX_ST_CLIENT_HELLO)
				rsx_downgrade(s, fd, RSX_DOWN_EXEC);
			else
				rsx_oob_off(s, RSX_STAT_fallback_fork);
		}
		rsx_sock_unlock(s);
		rsx_sock_put(s);
	}
	return busy;
}

/*
 * Right before fork(), under s->lock: from now on the child holds s too,
 * though the CM thread, not held yet, may still answer a request for it.
 *
 * An upgraded socket gets a hand-off slot (bell: the CM thread's), where a
 * child that uses it asks for it back (handoff.h).
 *
 * Any other answer must wait (s->shared): taken now, s would be upgraded
 * with no hand-off slot, and the child would find it neither TCP nor its
 * own (EIO).  An accepted socket that gets a share slot counts on, its
 * request waiting on the board for the process left alone with it; a
 * client's too, the answer to its request let go: the process left alone
 * with it asks again (rsx_fork_parent_sockets, rsx_fork_child_sockets).
 * All of it is decided under the lock that an answer takes: a look at
 * s->conn before it can be stale by the time the lock is ours.
 */
static void rsx_fork_share_one(struct rsx_sock *s, int fd, int bell)
{
	if (s->state == RSX_ST_UPGRADED && s->conn) {
		if (bell < 0 || rsx_handoff_share(s, fd, bell))
			rsx_info("fd %d: no hand-off slot: a fork child that "
				 "uses it gets EIO", fd);
		else if (rsx_share_fork(s))
			rsx_dbg("fd %d: no share slot: it stays TCP once "
				"handed over", fd);
		return;
	}
	if (rsx_share_may(s)) {
		if (rsx_share_fork(s))
			rsx_dbg("fd %d: no share slot: it stays TCP in "
				"parent and child", fd);
		else if (atomic_load(&s->role) == RSX_ROLE_CONNECTOR)
			s->oob_until = rsx_now_ms() +
				       rsx_config.oob_window_ms;
		s->shared = 1;
	} else if (rsx_state_counted(s->state)) {
		s->shared = 1;
	}
}

/*
 * fork() (handoff.h).  Right before it: the sockets that the child will
 * hold too, each under its lock (rsx_fork_share_one).
 */
void rsx_fork_share_sockets(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;
	int bell = -1, rang = 0;

	/* an upgraded socket is in the engine's hands: none, nothing to do */
	if (!atomic_load_explicit(&rsx_engine_socks, memory_order_relaxed))
		return;
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP || !rsx_sock_tryget(s))
			continue;
		rsx_sock_lock(s);
		if (s->conn && !rang) {
			/* it may start the CM thread, which takes s->lock */
			rsx_sock_unlock(s);
			bell = rsx_cm_bell_fd();
			rang = 1;
			rsx_sock_lock(s);
		}
		rsx_fork_share_one(s, fd, bell);
		rsx_sock_unlock(s);
		rsx_sock_put(s);
	}
}

/*
 * Under s->lock, for the CM thread: s goes back to TCP for a fork child
 * that asked.  One that is still cutting over, or whose peer downgraded
 * first and whose ring is not read yet, waits for the next round.
 */
static void rsx_fork_serve_one(struct rsx_sock *s, int fd)
{
	struct rsx_conn *c = s->conn;

	if (!rsx_handoff_live(s) || fd < 0)
		return;
	if (s->state == RSX_ST_UPGRADED && c->peer_down) {
		rsx_progress(s, fd);	/* settles once read */
		rsx_down_settle(s, fd);
		return;
	}
	if (s->state != RSX_ST_UPGRADED || c->qp_ready)
		rsx_downgrade(s, fd, RSX_DOWN_FORK);
}

/*
 * The CM thread: the sockets that a fork child asked for.  Returns 1 when
 * one was busy (its lock held): soon again.
 */
int rsx_fork_serve(void)
{
	int slot = 0, fd = -1, busy = 0;
	struct rsx_sock *s;

	while ((s = rsx_handoff_next(&slot, &fd))) {
		if (rsx_sock_trylock(s)) {
			busy = 1;
		} else {
			rsx_fork_serve_one(s, fd);
			rsx_sock_unlock(s);
		}
		rsx_sock_put(s);
	}
	return busy;
}

/*
 * A fork child uses s, which its parent holds on a QP: the parent takes it
 * back to TCP first.  Under s->lock.  0: TCP now; -EIO: not usable.
 * recount: where the parent said where the stream stands (handoff.h), s
 * counts on from there, to move back onto a queue pair once this process
 * alone holds it (share.h); otherwise it is plain TCP.
 */
int rsx_forked_use(struct rsx_sock *s, int recount)
{
	int ret = rsx_handoff_ask(s, rsx_config.linger_ms + 1000);
	struct rsx_ho_counts n;

	if (ret)
		return ret;
	rsx_stat_inc(RSX_STAT_fork_handoffs);
	if (recount && s->share_slot >= 0 && rsx_config.oob &&
	    !s->rd_shut && !s->wr_shut && !rsx_handoff_recount(s, &n) &&
	    (atomic_load(&s->role) == RSX_ROLE_ACCEPTED ||
	     (s->peer_port && rsx_cm_running()))) {
		s->tcp_tx = n.tx;
		s->tcp_rx = n.rx;
		s->tx_sum = n.tx_sum;
		s->rx_sum = n.rx_sum;
		s->oob_until = rsx_now_ms() + rsx_config.oob_window_ms;
		/* a client asks (rsx_sock_oob_start), a server waits */
		rsx_sock_set_state(s, atomic_load(&s->role) ==
				   RSX_ROLE_ACCEPTED ? RSX_ST_SERVER_WAIT :
						       RSX_ST_CLIENT_WAIT);
		if (s->state == RSX_ST_CLIENT_WAIT)
			rsx_oob_rescan();
		rsx_dbg("the parent's connection, counted on from %llu bytes "
			"out, %llu in", (unsigned long long)n.tx,
			(unsigned long long)n.rx);
		return 0;
	}
	if (s->share_slot >= 0)
		rsx_share_taint(s);	/* its bytes are not counted */
	rsx_sock_set_state(s, RSX_ST_TCP);
	return 0;
}

/* poll, select, epoll_ctl and shutdown of a fork child. */
void rsx_sock_forked_use(struct rsx_sock *s)
{
	if (s->state == RSX_ST_FORKED)
		rsx_forked_use(s, 1);
}

/*
 * In a fork child the parent's RDMA resources cannot be used.  An upgraded
 * (or half-negotiated) connection stays the parent's; the child gets EIO on
 * it rather than a stream with holes.  Locks held by other parent threads
 * at fork time are re-initialised.
 */
void rsx_fork_child_sockets(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;

	rsx_probe_fork_child();
	rsx_share_fork_child();
	rsx_handoff_fork_child();	/* after: the parent's bell stays */
	rsx_linger_fork_child();
	rsx_ready_fork_child();
	rsx_rdma_fork_child();
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP)
			continue;
		pthread_mutex_init(&s->lock, NULL);
		s->spinners = 0;	/* threads of the parent's */
		s->pollers = 0;
		s->cm_knock = 0;	/* the parent's CM thread */
		s->vfork_exec = 0;
		s->wake_users = 0;
		rsx_probe_fork_sock(s);	/* the parent's responder */
		/*
		 * Two processes have it: counting in one proves nothing,
		 * unless the other lets go of it first (share.h).
		 */
		s->shared = 1;
		free(s->oob);		/* a request of the parent's CM id */
		s->oob = NULL;
		if (s->state == RSX_ST_CLIENT_OOB && rsx_share_keeps(s)) {
			s->conn = NULL;	/* the parent's request */
			rsx_sock_set_state(s, RSX_ST_CLIENT_WAIT);
		}
		if (rsx_state_counted(s->state) && !rsx_share_keeps(s)) {
			s->conn = NULL;	/* the parent's, left alone */
			rsx_sock_set_state(s, RSX_ST_TCP);
		}
		/* the parent's stand-in (the watcher table is reset) */
		rsx_ready_off(s, 0);
		if (!s->conn)
			continue;
		s->conn = NULL;	/* the child's copy is left alone */
		rsx_sock_set_state(s, RSX_ST_FORKED);
		rsx_stat_inc(RSX_STAT_fallback_fork);
	}
}

/*
 * The parent of a fork: its sockets are the child's too, so bytes counted
 * here no longer tell where a stream stands; those that waited for an
 * out-of-band upgrade stay TCP, but for those with a share slot, which
 * count on until one process alone holds them (share.h): a client whose
 * request was out asks again then.  The CM thread is held (fork prepare).
 */
void rsx_fork_parent_sockets(int failed)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;

	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind != RSX_SOCK_TCP || !rsx_sock_tryget(s))
			continue;
		rsx_sock_lock(s);
		/* its answer may have come and gone since the sharing pass */
		if (s->state == RSX_ST_CLIENT_OOB && s->share_slot >= 0)
			rsx_count_on(s, NULL, RSX_STAT_COUNT);
		if (failed && s->share_slot >= 0) {
			rsx_share_unfork(s);
			rsx_sock_unlock(s);
			rsx_sock_put(s);
			continue;
		}
		s->shared = 1;
		if (rsx_state_counted(s->state) && !rsx_share_keeps(s))
			rsx_to_tcp(s, RSX_STAT_fallback_fork);
		rsx_sock_unlock(s);
		rsx_sock_put(s);
	}
}
