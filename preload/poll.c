// SPDX-License-Identifier: MIT
/*
 * Readiness: poll, select and epoll.  Until a connection is upgraded the
 * kernel's answer is the right one.
 */
#include "fdtab.h"
#include "shim.h"
#include "track.h"

/* Marks the engine's sockets among fds as waited on (see sock.c). */
static void rsx_mark_pollfds(const struct pollfd *fds, nfds_t nfds)
{
	nfds_t i;

	if (likely(!atomic_load_explicit(&rsx_engine_socks,
					 memory_order_relaxed)))
		return;
	for (i = 0; i < nfds; i++)
		rsx_mark_evented(fds[i].fd);
}

static void rsx_mark_fdset(int nfds, const fd_set *r, const fd_set *w)
{
	int fd;

	if (likely(!atomic_load_explicit(&rsx_engine_socks,
					 memory_order_relaxed)))
		return;
	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++)
		if ((r && FD_ISSET(fd, r)) || (w && FD_ISSET(fd, w)))
			rsx_mark_evented(fd);
}

RSX_EXPORT int poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	rsx_trace_call("poll", -1);
	rsx_mark_pollfds(fds, nfds);
	return RSX_REAL(poll)(fds, nfds, timeout);
}

RSX_EXPORT int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout,
			  size_t fdslen)
{
	rsx_trace_call("__poll_chk", -1);
	rsx_mark_pollfds(fds, nfds);
	return RSX_REAL(__poll_chk)(fds, nfds, timeout, fdslen);
}

RSX_EXPORT int ppoll(struct pollfd *fds, nfds_t nfds,
		     const struct timespec *ts, const sigset_t *ss)
{
	rsx_trace_call("ppoll", -1);
	rsx_mark_pollfds(fds, nfds);
	return RSX_REAL(ppoll)(fds, nfds, ts, ss);
}

RSX_EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t nfds,
			   const struct timespec *ts, const sigset_t *ss,
			   size_t fdslen)
{
	rsx_trace_call("__ppoll_chk", -1);
	rsx_mark_pollfds(fds, nfds);
	return RSX_REAL(__ppoll_chk)(fds, nfds, ts, ss, fdslen);
}

RSX_EXPORT int select(int nfds, fd_set *r, fd_set *w, fd_set *e,
		      struct timeval *tv)
{
	rsx_trace_call("select", -1);
	rsx_mark_fdset(nfds, r, w);
	return RSX_REAL(select)(nfds, r, w, e, tv);
}

RSX_EXPORT int pselect(int nfds, fd_set *r, fd_set *w, fd_set *e,
		       const struct timespec *ts, const sigset_t *ss)
{
	rsx_trace_call("pselect", -1);
	rsx_mark_fdset(nfds, r, w);
	return RSX_REAL(pselect)(nfds, r, w, e, ts, ss);
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
	rsx_trace_call("epoll_ctl", fd);
	if (op != EPOLL_CTL_DEL)
		rsx_mark_evented(fd);
	return RSX_REAL(epoll_ctl)(epfd, op, fd, ev);
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
