// SPDX-License-Identifier: MIT
/*
 * How a call on a socket waits (upgrade-int.h): the SO_RCVTIMEO and
 * SO_SNDTIMEO deadline of the call in progress, and sleeping on the
 * connection's completion channel or the TCP socket with s->lock dropped,
 * as the kernel's own socket waits do, signals and restarts included.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "board.h"
#include "clock.h"
#include "config.h"
#include "conn.h"
#include "fdtab.h"
#include "guard.h"
#include "libc.h"
#include "log.h"
#include "ready.h"
#include "upgrade-int.h"

/*
 * SO_RCVTIMEO / SO_SNDTIMEO of the call in progress on this thread: read
 * from the socket only when the call is about to sleep (an extra syscall
 * then costs nothing), as an absolute deadline in ms (0: none).
 */
#define RSX_DEADLINE_UNKNOWN (-1)
static RSX_TLS int64_t rsx_deadline = RSX_DEADLINE_UNKNOWN;
static RSX_TLS int rsx_timeo_opt;

void rsx_call_begin(int opt)
{
	rsx_deadline = RSX_DEADLINE_UNKNOWN;
	rsx_timeo_opt = opt;
}

/*
 * A wait of rsockx's own (close, exit, a downgrade) ends at until (ms),
 * whatever timeout the thread's last call had: never later (a peer that
 * takes no message would hold it for ever), and never at once for an
 * old SO_RCVTIMEO's deadline long past, which would make it spin.
 */
void rsx_call_until(int64_t until)
{
	rsx_deadline = until > 0 ? until : 1;
	rsx_timeo_opt = 0;
}

int64_t rsx_linger_end(void)
{
	return rsx_now_ms() + rsx_config.linger_ms;
}

/* A sleep that could not make its kick looks again this often. */
#define RSX_KICKLESS_MS 10

/*
 * Wakes the thread asleep in rsx_sleep()'s poll on c, if there is one, to
 * poll again: for events it does not watch, a completion another thread
 * took in, a descriptor that changed.  Under s->lock, which the sleeper
 * takes to set and clear c->polling.
 */
void rsx_kick(struct rsx_conn *c)
{
	uint64_t kick = 1;

	if (c->polling && c->kick_fd >= 0 &&
	    rsx_libc.write(c->kick_fd, &kick, sizeof(kick)) < 0)
		rsx_dbg("kick: %s", strerror(errno));
}

/* ms left before the call must give up with EAGAIN; -1: no limit. */
static int rsx_timeout_left(int fd)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	int64_t left;

	if (rsx_deadline == RSX_DEADLINE_UNKNOWN) {
		rsx_deadline = 0;
		if (!rsx_libc.getsockopt(fd, SOL_SOCKET, rsx_timeo_opt, &tv,
					 &len) && (tv.tv_sec || tv.tv_usec))
			rsx_deadline = rsx_now_ms() + tv.tv_sec * 1000 +
				       (tv.tv_usec + 999) / 1000;
	}
	if (!rsx_deadline)
		return -1;
	left = rsx_deadline - rsx_now_ms();
	return left > 0 ? (int)left : 0;
}

/*
 * A handler ran since seen, in a spin or a sleep of a blocking call: the
 * call ends with EINTR, or goes on (0) where the kernel's own would have
 * been restarted: never with SO_RCVTIMEO/SO_SNDTIMEO set, else when the
 * handlers had SA_RESTART (rsx_sig_restart), or, for a handler rsockx did
 * not see run, by rsx_guard_restartable's guess.
 */
static int rsx_intr(int timeout, const sigset_t *mask,
		    const struct rsx_sig_seen *seen)
{
	if (timeout < 0 && (rsx_sig_ran(seen) ? rsx_sig_restart(seen) :
			    rsx_guard_restartable(mask))) {
		rsx_stat_inc(RSX_STAT_intr_restarts);
		return 0;
	}
	return -EINTR;
}

/*
 * Drops s->lock for a sleep.  Returns 1 when a handler that the lock held
 * back ran as it dropped (sig.h), or will have by the time this returns
 * (RSOCKX_WRAP_HANDLERS=0): the sleep would not end for it, so it does
 * not begin, and the call ends as if it had (rsx_intr).
 */
static int rsx_sleep_unlock(struct rsx_sock *s,
			    const struct rsx_sig_seen *seen)
{
	int held = unlikely(rsx_sig_hold.masked) && rsx_sig_held_pending();

	rsx_sock_unlock(s);
	return held || rsx_sig_ran(seen);
}

/*
 * Sleeps until fd has one of events, or the connection's completion channel
 * fires, with s->lock dropped.  Returns fd's revents (0 when another thread
 * did the polling, or after a signal the call goes on from: rsx_intr),
 * -EINTR, or -ERESTART when the socket left the connection meanwhile (an
 * exec's or a fork child's downgrade, rsx_to_tcp): the caller must not
 * touch the connection again, and goes on in the socket's new state.
 * See struct rsx_conn for why only one thread polls a connection.
 * The TCP end (POLLRDHUP) is noted here for all.  With mask (signals held
 * back after a spin, rsx_guard_signals) the sleep takes that mask.  seen:
 * the handlers counted before the spin, NULL without one.
 */
int rsx_sleep(struct rsx_sock *s, int fd, short events, const sigset_t *mask,
	      const struct rsx_sig_seen *seen)
{
	struct rsx_conn *c = s->conn;
	struct rsx_sig_seen now;
	struct pollfd pfd[4];
	uint64_t kick;
	uint32_t gen;
	int ret, rev;
	struct timespec until, ts;
	int timeout, nested, look, kickless = 0;
	short want = 0;

	fd = rsx_sfd(s, fd);
	timeout = rsx_timeout_left(fd);

	if (timeout == 0)
		return -EAGAIN;		/* SO_RCVTIMEO/SO_SNDTIMEO ran out */
	if (!seen) {
		rsx_sig_snap(&now);
		seen = &now;
	} else if (rsx_sig_ran(seen) && rsx_intr(timeout, mask, seen)) {
		return -EINTR;	/* a handler ran during a spin (no mask) */
	}
	if (mask && (!c || c->polling)) {
		/*
		 * These sleeps cannot take a mask: let the signals in.  One
		 * held back during the spin has its handler run right here,
		 * and the sleep after it would not end for it: the call ends
		 * now, as the kernel's would have (or goes on: rsx_intr).
		 */
		ret = rsx_guard_signalled(mask);
		rsx_guard_signals_end(mask);
		if (ret && rsx_intr(timeout, mask, seen))
			return -EINTR;
		mask = NULL;
	}
	if (!c) {
		/*
		 * A pre-forked worker's request comes up on the family's
		 * board, which rings nobody in this process: the sleep ends
		 * every RSX_BOARD_LOOK_MS for the caller to look (once, the
		 * whole exchange of a connection went by on TCP before the
		 * worker asleep in recv() took its request).
		 */
		if (unlikely(s->oob_ok) && s->state == RSX_ST_SERVER_WAIT &&
		    rsx_board_have() &&
		    (timeout < 0 || timeout > RSX_BOARD_LOOK_MS))
			timeout = RSX_BOARD_LOOK_MS;
		pfd[0].fd = fd;
		pfd[0].events = events;
		pfd[0].revents = 0;
		/* an out-of-band upgrade wakes us (never read: it comes once) */
		pfd[1].fd = rsx_wake_fd(s);
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		s->wake_users++;
		if (rsx_sleep_unlock(s, seen)) {
			ret = -1;
			errno = EINTR;
		} else {
			ret = rsx_libc.poll(pfd, pfd[1].fd >= 0 ? 2 : 1,
					    timeout);
		}
		rsx_sock_lock(s);
		s->wake_users--;
		rsx_wake_close(s);
		if (ret > 0 && pfd[1].revents && !pfd[0].revents)
			return 0;
		if (ret < 0)
			return errno == EINTR ? rsx_intr(timeout, NULL, seen) :
						0;
		if (pfd[0].revents & POLLNVAL)
			return s->orphan_fd >= 0 ? 0 : -EBADF;
		return pfd[0].revents;
	}
	/*
	 * A handler of the program that runs in this thread's own sleep and
	 * calls into s must not wait for the poller, itself: it polls, and
	 * gives the poll back to the sleep it interrupted.
	 */
	nested = c->polling && c->poller == &rsx_sig_hold;
	if (c->polling && !nested) {
		if ((c->want | events) != c->want) {
			c->want |= events;
			rsx_kick(c);
		}
		gen = c->wake_gen;
		if (timeout >= 0) {
			clock_gettime(CLOCK_MONOTONIC, &until);
			until.tv_sec += timeout / 1000;
			until.tv_nsec += (long)(timeout % 1000) * 1000000;
			if (until.tv_nsec >= 1000000000) {
				until.tv_sec++;
				until.tv_nsec -= 1000000000;
			}
		}
		ret = 0;
		c->waiters++;
		while (c->polling && gen == c->wake_gen && s->conn == c) {
			rsx_stat_inc(RSX_STAT_naps);
			if (rsx_sleep_unlock(s, seen)) {
				ret = rsx_intr(timeout, NULL, seen);
				rsx_sock_lock(s);
				if (ret)
					break;
				rsx_sig_snap(&now);	/* restarted */
				seen = &now;
				continue;
			}
			ret = rsx_conn_nap(c, gen, timeout < 0 ? NULL : &until);
			rsx_sock_lock(s);
			if (ret == -ETIMEDOUT)
				ret = -EAGAIN;
			if (ret)
				break;
		}
		c->waiters--;
		if (s->conn != c) {
			/* dropped by rsx_to_tcp: the last one out frees it */
			if (!c->waiters && !c->polling)
				rsx_conn_destroy(c);
			return ret < 0 ? ret : -ERESTART;
		}
		return ret;
	}
	/*
	 * The kick before the arm: the completions of an RDMA connection on
	 * its device's channel reach this sleep through it (the readiness
	 * watcher drains that channel, rsx_rdma_chan_drain), and one that
	 * came between the arm and the kick's making would go unheard.
	 */
	if (unlikely(c->kick_fd < 0))
		__atomic_store_n(&c->kick_fd,
				 rsx_fd_hide(eventfd(0, EFD_NONBLOCK |
						     EFD_CLOEXEC)),
				 __ATOMIC_SEQ_CST);
	/*
	 * No kick to be had (EMFILE), or no watcher to drain the channel:
	 * nothing can wake this sleep, which looks again every
	 * RSX_KICKLESS_MS instead.
	 */
	kickless = c->kick_fd < 0 ||
		   (c->dev && c->qp_ready && rsx_conn_chan_fd(c) < 0 &&
		    rsx_ready_chan_watch(c->dev));
	if (c->qp_ready && rsx_conn_arm(c) == 0 && rsx_conn_poll(c) != 0)
		return 0;	/* something came in meanwhile */
	look = rsx_conn_gone_look(c) &&
	       (timeout < 0 || timeout > RSX_GONE_LOOK_MS);
	if (unlikely(look))
		timeout = RSX_GONE_LOOK_MS;
	if (nested)
		want = c->want;
	kickless = kickless && (timeout < 0 || timeout > RSX_KICKLESS_MS);
	if (unlikely(kickless))
		timeout = RSX_KICKLESS_MS;
	c->polling = 1;
	c->poller = &rsx_sig_hold;
	c->want = events;
	pfd[0].fd = fd;
	pfd[0].events = c->want;
	pfd[1].fd = c->kick_fd;
	pfd[1].events = POLLIN;
	pfd[2].fd = rsx_conn_chan_fd(c);	/* -1: the device's */
	pfd[2].events = POLLIN;
	/* the device's events: a port that goes down (rsx_dev_async_all) */
	pfd[3].fd = c->dev ? rsx_dev_async_fd(c->dev) : -1;
	pfd[3].events = POLLIN;
	pfd[0].revents = pfd[1].revents = pfd[2].revents = pfd[3].revents = 0;
	rsx_stat_inc(RSX_STAT_sleeps);
	if (mask) {
		/* all signals blocked: ppoll lets them in, atomically */
		rsx_sock_unlock_masked(s);
		ts.tv_sec = timeout / 1000;
		ts.tv_nsec = (long)(timeout % 1000) * 1000000;
		ret = rsx_libc.ppoll(pfd, c->qp_ready ? 4 : 2,
				     timeout < 0 ? NULL : &ts, mask);
	} else if (rsx_sleep_unlock(s, seen)) {
		ret = -1;
		errno = EINTR;
	} else {
		ret = rsx_libc.poll(pfd, c->qp_ready ? 4 : 2, timeout);
	}
	if (pfd[3].revents)
		rsx_dev_async_all();
	rsx_sock_lock(s);
	if (ret < 0)
		ret = errno == EINTR ? rsx_intr(timeout, mask, seen) : 0;
	else if (ret == 0 && look)
		rsx_conn_ping(c);	/* fails c if the peer is gone */
	else if (ret == 0 && timeout >= 0 && !kickless)
		ret = -EAGAIN;	/* the caller's deadline, not ours */
	if (pfd[1].revents)
		while (rsx_libc.read(c->kick_fd, &kick, sizeof(kick)) > 0)
			;
	if (pfd[2].revents)
		rsx_conn_event(c);
	rev = pfd[0].revents;
	/*
	 * The program closed the descriptor under this blocked call: it goes
	 * on with the duplicate (next time round), or fails where there was
	 * none to make.
	 */
	if (rev & POLLNVAL) {
		rev = 0;
		if (ret >= 0 && s->orphan_fd < 0)
			ret = -EBADF;
	}
	if (nested) {
		c->want = want;	/* the interrupted sleep's, which goes on */
	} else {
		c->polling = 0;
		c->want = 0;
	}
	rsx_conn_wake(c);
	if (s->conn != c) {
		/* dropped by rsx_to_tcp while we slept */
		if (!c->waiters && !nested)
			rsx_conn_destroy(c);
		return ret < 0 ? ret : -ERESTART;
	}
	if (!c->tcp_eof && (rev & (POLLRDHUP | POLLHUP | POLLERR)))
		rsx_peer_closed(s);
	return ret < 0 ? ret : rev;
}

/* Waits up to ms for fd to become readable, without s->lock. */
void rsx_wait_in(struct rsx_sock *s, int fd, int ms)
{
	struct pollfd pfd = { .fd = rsx_sfd(s, fd), .events = POLLIN };

	if (ms <= 0)
		return;
	rsx_sock_unlock(s);
	rsx_libc.poll(&pfd, 1, ms);
	rsx_sock_lock(s);
}
