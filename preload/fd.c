// SPDX-License-Identifier: MIT
/* Descriptor management: close, dup, fcntl, ioctl, fstat. */
#include <stdarg.h>

#include "fdtab.h"
#include "shim.h"
#include "track.h"
#include "upgrade.h"

RSX_EXPORT int close(int fd)
{
	struct rsx_sock *old = NULL;
	int ret;

	rsx_trace_call("close", fd);
	if (unlikely(rsx_fd_peek(fd) != NULL) && !rsx_guarded() &&
	    rsx_close_begin(fd, &old))
		return 0;	/* an fd of ours: the program never had it */
	ret = RSX_REAL(close)(fd);
	if (old)
		RSX_KEEP_ERRNO(rsx_close_end(old));
	return ret;
}

/*
 * fclose() of a stream that fdopen() made of a socket closes the socket
 * inside libc, past close(): the socket's slot goes first, as at close(),
 * so that the number, once reused, never reaches the old connection.  (The
 * stream's own buffered bytes go by libc's internal write(), past rsockx:
 * stdio on upgraded sockets is not supported, librsockx(7).)
 */
RSX_EXPORT int fclose(FILE *stream)
{
	struct rsx_sock *old = NULL;
	int fd = -1, ret;

	if (stream && !rsx_guarded())
		fd = fileno(stream);
	rsx_trace_call("fclose", fd);
	if (fd >= 0 && unlikely(rsx_fd_peek(fd) != NULL)) {
		fflush(stream);		/* its bytes before the socket ends */
		if (rsx_close_begin(fd, &old))
			old = NULL;	/* an fd of ours: not the program's */
	}
	ret = RSX_REAL(fclose)(stream);
	if (old)
		RSX_KEEP_ERRNO(rsx_close_end(old));
	return ret;
}

/*
 * fdopen() of a socket: stdio's bytes go past the shim from now on, so
 * the engine keeps that connection on TCP (rsx_sock_stdio).
 */
RSX_EXPORT FILE *fdopen(int fd, const char *mode)
{
	rsx_trace_call("fdopen", fd);
	if (!rsx_guarded() && unlikely(rsx_fd_peek(fd) != NULL))
		RSX_KEEP_ERRNO(rsx_sock_stdio(fd));
	return RSX_REAL(fdopen)(fd, mode);
}

RSX_EXPORT int close_range(unsigned int first, unsigned int last, int flags)
{
	rsx_trace_call("close_range", first);
	if (!rsx_fdtab_hiwater() || rsx_guarded())
		return RSX_REAL(close_range)(first, last, flags);
	return rsx_ret(rsx_close_range(first, last, flags));
}

RSX_EXPORT void closefrom(int lowfd)
{
	rsx_trace_call("closefrom", lowfd);
	if (!rsx_fdtab_hiwater() || rsx_guarded()) {
		RSX_REAL(closefrom)(lowfd);
		return;
	}
	RSX_KEEP_ERRNO(rsx_closefrom(lowfd));
}

RSX_EXPORT int dup(int oldfd)
{
	int fd;

	rsx_trace_call("dup", oldfd);
	fd = RSX_REAL(dup)(oldfd);
	if (fd >= 0 && (rsx_fd_peek(oldfd) || rsx_fd_peek(fd)) &&
	    !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_dup(oldfd, fd));
	return fd;
}

/* dup2 and dup3 replace newfd: its slot is emptied before the real call. */
static int rsx_dup_onto(int oldfd, int newfd, int flags, int is_dup3)
{
	struct rsx_sock *prev;
	int ret, err;

	if (oldfd == newfd || (!rsx_fd_peek(oldfd) && !rsx_fd_peek(newfd)) ||
	    rsx_guarded())
		goto real;
	err = rsx_dup2_begin(newfd, &prev);
	if (err)
		return rsx_ret(err);
	ret = is_dup3 ? RSX_REAL(dup3)(oldfd, newfd, flags) :
			RSX_REAL(dup2)(oldfd, newfd);
	RSX_KEEP_ERRNO(rsx_dup2_end(oldfd, newfd, ret >= 0, prev));
	return ret;
real:
	if (unlikely(rsx_fd_peek(oldfd) != NULL) && oldfd != newfd &&
	    rsx_guard_vfork_child())
		rsx_vfork_dup(oldfd);
	return is_dup3 ? RSX_REAL(dup3)(oldfd, newfd, flags) :
			 RSX_REAL(dup2)(oldfd, newfd);
}

RSX_EXPORT int dup2(int oldfd, int newfd)
{
	rsx_trace_call("dup2", oldfd);
	return rsx_dup_onto(oldfd, newfd, 0, 0);
}

RSX_EXPORT int dup3(int oldfd, int newfd, int flags)
{
	rsx_trace_call("dup3", oldfd);
	return rsx_dup_onto(oldfd, newfd, flags, 1);
}

/*
 * fcntl's third argument is an int or a pointer depending on cmd; reading it
 * as a pointer is what glibc itself does, and is harmless when absent.
 */
static int rsx_fcntl_done(int fd, int cmd, void *arg, int ret)
{
	if (ret < 0 || rsx_guarded())
		return ret;
	if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) &&
	    (rsx_fd_peek(fd) || rsx_fd_peek(ret)))
		RSX_KEEP_ERRNO(rsx_on_dup(fd, ret));
	else if (cmd == F_SETFL && rsx_fd_peek(fd))
		RSX_KEEP_ERRNO(rsx_on_setfl(fd, (int)(long)arg));
	return ret;
}

RSX_EXPORT int fcntl(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	rsx_trace_call("fcntl", fd);
	return rsx_fcntl_done(fd, cmd, arg, RSX_REAL(fcntl)(fd, cmd, arg));
}

RSX_EXPORT int fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	void *arg;

	va_start(ap, cmd);
	arg = va_arg(ap, void *);
	va_end(ap);
	rsx_trace_call("fcntl64", fd);
	return rsx_fcntl_done(fd, cmd, arg,
			      RSX_REAL(fcntl64)(fd, cmd, arg));
}

static __attribute__((noinline, cold)) int
rsx_ioctl_slow(int fd, unsigned long req, void *arg)
{
	int ret;

	rsx_trace_call("ioctl", fd);
	if (rsx_engine(fd)) {
		ret = rsx_sock_ioctl(fd, req, arg);
		if (ret <= 0)
			return rsx_ret(ret);
	}
	ret = RSX_REAL(ioctl)(fd, req, arg);
	if (ret == 0 && req == FIONBIO && arg && rsx_fd_peek(fd) &&
	    !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_fionbio(fd, *(int *)arg));
	return ret;
}

/*
 * A descriptor rsockx does not track (libibverbs' own ioctls on the device,
 * in every post and poll of Soft-RoCE) goes straight to libc, as in io.c.
 */
RSX_EXPORT int ioctl(int fd, unsigned long req, ...)
{
	__typeof__(rsx_libc.ioctl) real = rsx_libc.ioctl;
	va_list ap;
	void *arg;

	va_start(ap, req);
	arg = va_arg(ap, void *);
	va_end(ap);
	if (likely(real && !rsx_fd_peek(fd) &&
		   rsx_log_level < RSX_LOG_TRACE))
		return real(fd, req, arg);
	return rsx_ioctl_slow(fd, req, arg);
}

RSX_EXPORT int fstat(int fd, struct stat *st)
{
	rsx_trace_call("fstat", fd);
	return RSX_REAL(fstat)(fd, st);
}

RSX_EXPORT int fstat64(int fd, struct stat64 *st)
{
	rsx_trace_call("fstat64", fd);
	return RSX_REAL(fstat64)(fd, st);
}

/* Binaries built against glibc < 2.33 call these instead of fstat(). */
RSX_EXPORT int __fxstat(int ver, int fd, struct stat *st)
{
	rsx_trace_call("__fxstat", fd);
	return RSX_REAL(__fxstat)(ver, fd, st);
}

RSX_EXPORT int __fxstat64(int ver, int fd, struct stat64 *st)
{
	rsx_trace_call("__fxstat64", fd);
	return RSX_REAL(__fxstat64)(ver, fd, st);
}
