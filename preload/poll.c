// SPDX-License-Identifier: MIT
/*
 * Readiness: poll, select and epoll.  Until a connection is upgraded the
 * kernel's answer is the right one; after, the engine puts a stand-in
 * descriptor in the socket's place (src/ready.h) for the length of the
 * call (poll, select) or in the epoll set (epoll_ctl).  epoll_wait needs
 * nothing: the kernel reports the stand-in with the program's own data.
 */
#include "fdtab.h"
#include "ready.h"
#include "shim.h"
#include "track.h"


/* poll and ppoll, plain or fortified: call is the real one, with fds. */
#define RSX_POLL(call)							\
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
			r_ = (call);					\
			RSX_KEEP_ERRNO(rsx_poll_leave(fds, &sv_));	\
		}							\
		r_;							\
	})

RSX_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	rsx_trace_call("poll", -1);
	return RSX_POLL(RSX_REAL(poll)(fds, nfds, timeout));
}

RSX_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
			  size_t fdslen)
{
	rsx_trace_call("__poll_chk", -1);
	return RSX_POLL(RSX_REAL(__poll_chk)(fds, nfds, timeout, fdslen));
}

RSX_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		     const struct timespec *ts, const sigset_t *ss)
{
	rsx_trace_call("ppoll", -1);
	return RSX_POLL(RSX_REAL(ppoll)(fds, nfds, ts, ss));
}

RSX_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			   const struct timespec *ts, const sigset_t *ss,
			   size_t fdslen)
{
	rsx_trace_call("__ppoll_chk", -1);
	return RSX_POLL(RSX_REAL(__ppoll_chk)(fds, nfds, ts, ss, fdslen));
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

RSX_EXPORT int epoll_wait(int epfd, struct epoll_event *ev, int max,
			  int timeout)
{
	rsx_trace_call("epoll_wait", epfd);
	return RSX_REAL(epoll_wait)(epfd, ev, max, timeout);
}

RSX_EXPORT int epoll_pwait(int epfd, struct epoll_event *ev, int max,
			   int timeout, const sigset_t *ss)
{
	rsx_trace_call("epoll_pwait", epfd);
	return RSX_REAL(epoll_pwait)(epfd, ev, max, timeout, ss);
}

RSX_EXPORT int epoll_pwait2(int epfd, struct epoll_event *ev, int max,
			    const struct timespec *ts, const sigset_t *ss)
{
	rsx_trace_call("epoll_pwait2", epfd);
	return RSX_REAL(epoll_pwait2)(epfd, ev, max, ts, ss);
}
