// SPDX-License-Identifier: MIT
/*
 * Readiness: poll, select and epoll.  Until a connection is upgraded the
 * kernel's answer is the right one; after, the engine puts a stand-in
 * descriptor in the socket's place (src/ready.h) for the length of the
 * call (poll, select) or in the epoll set (epoll_ctl).  epoll_wait needs
 * nothing more: the kernel reports the stand-in with the program's own
 * data.  Any of them may spin a while before it sleeps (rsx_ready_spin).
 */
#include "fdtab.h"
#include "ready.h"
#include "shim.h"
#include "track.h"


/*
 * The wait of a poll with an upgraded socket in it (rsx_ready_call): the
 * program's call becomes ppoll, which takes the signal mask the spin needs.
 */
struct rsx_poll_call {
	struct pollfd *fds;
	nfds_t nfds;
	const struct timespec *ts;
	size_t fdslen;
	int chk;		/* a fortified entry: check fdslen once */
};

static int rsx_poll_call(void *arg, int wait, const sigset_t *mask)
{
	static const struct timespec zero;
	struct rsx_poll_call *a = arg;

	if (wait)
		return RSX_REAL(ppoll)(a->fds, a->nfds, a->ts, mask);
	if (a->chk)
		return RSX_REAL(__ppoll_chk)(a->fds, a->nfds, &zero, NULL,
					     a->fdslen);
	return RSX_REAL(ppoll)(a->fds, a->nfds, &zero, NULL);
}

/* poll and ppoll, plain or fortified: call is the real one, with fds. */
#define RSX_POLL(call, pc, ss)						\
	({								\
		struct rsx_poll_save sv_;				\
		int n_ = rsx_poll_enter(fds, nfds, &sv_), r_;		\
									\
		if (likely(n_ == 0)) {					\
			r_ = (call);					\
		} else if (n_ < 0) {					\
			errno = -n_;					\
			r_ = -1;					\
		} else {						\
			r_ = rsx_ready_spin(rsx_poll_call, &(pc), NULL,	\
					    rsx_ready_ts_us((pc).ts), ss); \
			RSX_KEEP_ERRNO(rsx_poll_leave(fds, &sv_));	\
		}							\
		r_;							\
	})

/* poll's timeout as ppoll's */
static const struct timespec *rsx_ms_ts(int ms, struct timespec *ts)
{
	if (ms < 0)
		return NULL;
	ts->tv_sec = ms / 1000;
	ts->tv_nsec = (long)(ms % 1000) * 1000000;
	return ts;
}

RSX_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct timespec ts;
	struct rsx_poll_call pc = { fds, nfds, rsx_ms_ts(timeout, &ts), 0, 0 };

	rsx_trace_call("poll", -1);
	return RSX_POLL(RSX_REAL(poll)(fds, nfds, timeout), pc, NULL);
}

RSX_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
			  size_t fdslen)
{
	struct timespec ts;
	struct rsx_poll_call pc = { fds, nfds, rsx_ms_ts(timeout, &ts),
				    fdslen, 1 };

	rsx_trace_call("__poll_chk", -1);
	return RSX_POLL(RSX_REAL(__poll_chk)(fds, nfds, timeout, fdslen), pc,
			NULL);
}

RSX_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		     const struct timespec *ts, const sigset_t *ss)
{
	struct rsx_poll_call pc = { fds, nfds, ts, 0, 0 };

	rsx_trace_call("ppoll", -1);
	return RSX_POLL(RSX_REAL(ppoll)(fds, nfds, ts, ss), pc, ss);
}

RSX_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			   const struct timespec *ts, const sigset_t *ss,
			   size_t fdslen)
{
	struct rsx_poll_call pc = { fds, nfds, ts, fdslen, 1 };

	rsx_trace_call("__ppoll_chk", -1);
	return RSX_POLL(RSX_REAL(__ppoll_chk)(fds, nfds, ts, ss, fdslen), pc,
			ss);
}

RSX_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
		      struct timeval *tv)
{
	struct timespec ts;
	int ret;

	rsx_trace_call("select", -1);
	if (likely(!rsx_select_needs(nfds, r, w, e)))
		return RSX_REAL(select)(nfds, r, w, e, tv);
	if (tv) {
		if (tv->tv_sec < 0 || tv->tv_usec < 0 ||
		    tv->tv_usec >= 1000000)
			return rsx_ret(-EINVAL);
		ts.tv_sec = tv->tv_sec;
		ts.tv_nsec = tv->tv_usec * 1000;
	}
	ret = rsx_select_poll(nfds, r, w, e, tv ? &ts : NULL, NULL);
	if (tv) {
		/* Linux select() leaves the time not slept */
		tv->tv_sec = ts.tv_sec;
		tv->tv_usec = ts.tv_nsec / 1000;
	}
	return rsx_ret(ret);
}

RSX_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
		       const struct timespec *ts, const sigset_t *ss)
{
	struct timespec left;

	rsx_trace_call("pselect", -1);
	if (likely(!rsx_select_needs(nfds, r, w, e)))
		return RSX_REAL(pselect)(nfds, r, w, e, ts, ss);
	if (ts) {
		if (ts->tv_sec < 0 || ts->tv_nsec < 0 ||
		    ts->tv_nsec >= 1000000000)
			return rsx_ret(-EINVAL);
		left = *ts;	/* glibc's pselect leaves *ts alone */
	}
	return rsx_ret(rsx_select_poll(nfds, r, w, e, ts ? &left : NULL, ss));
}

/* A new epoll fd may reuse the number of a socket closed behind our back. */
static int rsx_new_fd(int fd)
{
	if (fd >= 0 && unlikely(rsx_fd_peek(fd) != NULL) && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_untracked(fd));
	return fd;
}

RSX_EXPORT int epoll_create(int size)
{
	rsx_trace_call("epoll_create", -1);
	return rsx_new_fd(RSX_REAL(epoll_create)(size));
}

RSX_EXPORT int epoll_create1(int flags)
{
	rsx_trace_call("epoll_create1", -1);
	return rsx_new_fd(RSX_REAL(epoll_create1)(flags));
}

RSX_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	int ret;

	rsx_trace_call("epoll_ctl", fd);
	ret = rsx_ready_epoll_ctl(epfd, op, fd, ev);
	if (likely(ret == 1))
		return RSX_REAL(epoll_ctl)(epfd, op, fd, ev);
	return rsx_ret(ret);
}

/*
 * The wait of an epoll_wait while connections are watched (rsx_ready_call):
 * into out.ev after the out.n events the spin put there itself.
 */
struct rsx_epoll_call {
	struct rsx_epoll_out out;
	int timeout;
	int pwait2;		/* epoll_pwait2, with ts instead of timeout */
	const struct timespec *ts;
};

static int rsx_epoll_call(void *arg, int wait, const sigset_t *mask)
{
	struct rsx_epoll_call *a = arg;
	struct epoll_event *ev = a->out.ev + a->out.n;
	int epfd = a->out.epfd, max = a->out.max - a->out.n;

	if (!wait)
		return RSX_REAL(epoll_wait)(epfd, ev, max, 0);
	if (a->pwait2)
		return RSX_REAL(epoll_pwait2)(epfd, ev, max, a->ts, mask);
	if (!mask)
		return RSX_REAL(epoll_wait)(epfd, ev, max, a->timeout);
	return RSX_REAL(epoll_pwait)(epfd, ev, max, a->timeout, mask);
}

static int64_t rsx_ms_us(int ms)
{
	return ms < 0 ? -1 : (int64_t)ms * 1000;
}

RSX_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max,
			  int timeout)
{
	struct rsx_epoll_call ec = { { epfd, ev, max, 0 }, timeout, 0, NULL };

	rsx_trace_call("epoll_wait", epfd);
	return rsx_ready_spin(rsx_epoll_call, &ec, &ec.out, rsx_ms_us(timeout),
			      NULL);
}

RSX_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max,
			   int timeout, const sigset_t *ss)
{
	struct rsx_epoll_call ec = { { epfd, ev, max, 0 }, timeout, 0, NULL };

	rsx_trace_call("epoll_pwait", epfd);
	return rsx_ready_spin(rsx_epoll_call, &ec, &ec.out, rsx_ms_us(timeout),
			      ss);
}

RSX_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max,
			    const struct timespec *ts, const sigset_t *ss)
{
	struct rsx_epoll_call ec = { { epfd, ev, max, 0 }, -1, 1, ts };

	rsx_trace_call("epoll_pwait2", epfd);
	return rsx_ready_spin(rsx_epoll_call, &ec, &ec.out,
			      rsx_ready_ts_us(ts), ss);
}
