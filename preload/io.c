// SPDX-License-Identifier: MIT
/*
 * The data path: reads, writes, their fortified variants, and zero-copy
 * calls.  Plain descriptors go straight to libc; sockets in the engine's
 * hands go to src/upgrade.c as an iovec.
 *
 * The hot wrappers are split in two: an exported fast path that only tail
 * calls (libc, or the cold *_slow function), so it needs no stack frame,
 * and the slow path, which also resolves libc lazily and traces.
 */
#include <sys/sendfile.h>

#include "shim.h"
#include "upgrade.h"

void __chk_fail(void) __attribute__((noreturn));

/*
 * The engine answers -ENOTSOCK when the descriptor turned out not to be the
 * socket it tracked (closed behind its back, number reused): then the real
 * call is made after all.
 */
#define RSX_TRY(expr)							\
	do {								\
		long rsx_r_ = (expr);					\
		if (rsx_r_ != -ENOTSOCK)				\
			return rsx_ret(rsx_r_);				\
	} while (0)

static ssize_t rsx_recv1(int fd, void *buf, size_t n, int flags)
{
	struct iovec iov = { .iov_base = buf, .iov_len = n };

	return rsx_sock_recv(fd, &iov, 1, flags);
}

static ssize_t rsx_send1(int fd, const void *buf, size_t n, int flags)
{
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = n };

	return rsx_sock_send(fd, &iov, 1, flags);
}

static __attribute__((noinline, cold)) ssize_t
rsx_read_slow(int fd, void *buf, size_t n)
{
	rsx_trace_call("read", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_recv1(fd, buf, n, 0));
	return RSX_REAL(read)(fd, buf, n);
}

RSX_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	__typeof__(rsx_libc.read) real = rsx_libc.read;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n);
	return rsx_read_slow(fd, buf, n);
}

static __attribute__((noinline, cold)) ssize_t
rsx_read_chk_slow(int fd, void *buf, size_t n, size_t buflen)
{
	rsx_trace_call("__read_chk", fd);
	if (rsx_engine(fd)) {
		if (n > buflen)
			__chk_fail();
		RSX_TRY(rsx_recv1(fd, buf, n, 0));
	}
	return RSX_REAL(__read_chk)(fd, buf, n, buflen);
}

RSX_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	__typeof__(rsx_libc.__read_chk) real = rsx_libc.__read_chk;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n, buflen);
	return rsx_read_chk_slow(fd, buf, n, buflen);
}

static __attribute__((noinline, cold)) ssize_t
rsx_write_slow(int fd, const void *buf, size_t n)
{
	rsx_trace_call("write", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_send1(fd, buf, n, 0));
	return RSX_REAL(write)(fd, buf, n);
}

RSX_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	__typeof__(rsx_libc.write) real = rsx_libc.write;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n);
	return rsx_write_slow(fd, buf, n);
}

static __attribute__((noinline, cold)) ssize_t
rsx_readv_slow(int fd, const struct iovec *iov, int iovcnt)
{
	rsx_trace_call("readv", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_sock_recv(fd, iov, iovcnt, 0));
	return RSX_REAL(readv)(fd, iov, iovcnt);
}

RSX_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	__typeof__(rsx_libc.readv) real = rsx_libc.readv;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, iov, iovcnt);
	return rsx_readv_slow(fd, iov, iovcnt);
}

static __attribute__((noinline, cold)) ssize_t
rsx_writev_slow(int fd, const struct iovec *iov, int iovcnt)
{
	rsx_trace_call("writev", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_sock_send(fd, iov, iovcnt, 0));
	return RSX_REAL(writev)(fd, iov, iovcnt);
}

RSX_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	__typeof__(rsx_libc.writev) real = rsx_libc.writev;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, iov, iovcnt);
	return rsx_writev_slow(fd, iov, iovcnt);
}

static __attribute__((noinline, cold)) ssize_t
rsx_recv_slow(int fd, void *buf, size_t n, int flags)
{
	rsx_trace_call("recv", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_recv1(fd, buf, n, flags));
	return RSX_REAL(recv)(fd, buf, n, flags);
}

RSX_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	__typeof__(rsx_libc.recv) real = rsx_libc.recv;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n, flags);
	return rsx_recv_slow(fd, buf, n, flags);
}

static __attribute__((noinline, cold)) ssize_t
rsx_recv_chk_slow(int fd, void *buf, size_t n, size_t buflen,
			      int flags)
{
	rsx_trace_call("__recv_chk", fd);
	if (rsx_engine(fd)) {
		if (n > buflen)
			__chk_fail();
		RSX_TRY(rsx_recv1(fd, buf, n, flags));
	}
	return RSX_REAL(__recv_chk)(fd, buf, n, buflen, flags);
}

RSX_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
			      int flags)
{
	__typeof__(rsx_libc.__recv_chk) real = rsx_libc.__recv_chk;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n, buflen, flags);
	return rsx_recv_chk_slow(fd, buf, n, buflen, flags);
}

/* A connected TCP socket reports no source address: *len becomes 0. */
static ssize_t rsx_recvfrom(int fd, void *buf, size_t n, int flags,
			    socklen_t *len)
{
	ssize_t ret = rsx_recv1(fd, buf, n, flags);	/* -errno */

	if (ret >= 0 && len)
		*len = 0;
	return ret;
}

static __attribute__((noinline, cold)) ssize_t
rsx_recvfrom_slow(int fd, void *buf, size_t n, int flags,
			    struct sockaddr *addr, socklen_t *len)
{
	rsx_trace_call("recvfrom", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_recvfrom(fd, buf, n, flags, len));
	return RSX_REAL(recvfrom)(fd, buf, n, flags, addr, len);
}

RSX_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags,
			    struct sockaddr *addr, socklen_t *len)
{
	__typeof__(rsx_libc.recvfrom) real = rsx_libc.recvfrom;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n, flags, addr, len);
	return rsx_recvfrom_slow(fd, buf, n, flags, addr, len);
}

static __attribute__((noinline, cold)) ssize_t
rsx_recvfrom_chk_slow(int fd, void *buf, size_t n, size_t buflen,
				  int flags, struct sockaddr *addr,
				  socklen_t *len)
{
	rsx_trace_call("__recvfrom_chk", fd);
	if (rsx_engine(fd)) {
		if (n > buflen)
			__chk_fail();
		RSX_TRY(rsx_recvfrom(fd, buf, n, flags, len));
	}
	return RSX_REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr, len);
}

RSX_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen,
				  int flags, struct sockaddr *addr,
				  socklen_t *len)
{
	__typeof__(rsx_libc.__recvfrom_chk) real = rsx_libc.__recvfrom_chk;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n, buflen, flags, addr,
					     len);
	return rsx_recvfrom_chk_slow(fd, buf, n, buflen, flags, addr,
					     len);
}

static ssize_t rsx_recvmsg(int fd, struct msghdr *msg, int flags)
{
	ssize_t ret = rsx_sock_recv(fd, msg->msg_iov, msg->msg_iovlen, flags);

	if (ret >= 0) {
		msg->msg_namelen = 0;
		msg->msg_controllen = 0;
		msg->msg_flags = 0;
	}
	return ret;
}

static __attribute__((noinline, cold)) ssize_t
rsx_recvmsg_slow(int fd, struct msghdr *msg, int flags)
{
	rsx_trace_call("recvmsg", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_recvmsg(fd, msg, flags));
	return RSX_REAL(recvmsg)(fd, msg, flags);
}

RSX_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	__typeof__(rsx_libc.recvmsg) real = rsx_libc.recvmsg;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, msg, flags);
	return rsx_recvmsg_slow(fd, msg, flags);
}

/* Message vectors on a stream: one message after another, like the
 * kernel; later ones do not block. */
RSX_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			int flags, struct timespec *timeout)
{
	unsigned int i;
	ssize_t n;

	rsx_trace_call("recvmmsg", fd);
	if (!rsx_engine(fd))
		return RSX_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
	for (i = 0; i < vlen; i++) {
		n = rsx_recvmsg(fd, &vec[i].msg_hdr,
				(flags & ~MSG_WAITFORONE) |
				(i && (flags & MSG_WAITFORONE) ?
				 MSG_DONTWAIT : 0));
		if (n == -ENOTSOCK && !i)
			return RSX_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
		if (n < 0)
			return i ? (int)i : rsx_ret(n);
		vec[i].msg_len = n;
		if (n == 0)
			return i + 1;
	}
	return i;
}

static __attribute__((noinline, cold)) ssize_t
rsx_send_slow(int fd, const void *buf, size_t n, int flags)
{
	rsx_trace_call("send", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_send1(fd, buf, n, flags));
	return RSX_REAL(send)(fd, buf, n, flags);
}

RSX_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	__typeof__(rsx_libc.send) real = rsx_libc.send;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n, flags);
	return rsx_send_slow(fd, buf, n, flags);
}

static __attribute__((noinline, cold)) ssize_t
rsx_sendto_slow(int fd, const void *buf, size_t n, int flags,
			  const struct sockaddr *addr, socklen_t len)
{
	rsx_trace_call("sendto", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_send1(fd, buf, n, flags));
	return RSX_REAL(sendto)(fd, buf, n, flags, addr, len);
}

RSX_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			  const struct sockaddr *addr, socklen_t len)
{
	__typeof__(rsx_libc.sendto) real = rsx_libc.sendto;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, buf, n, flags, addr, len);
	return rsx_sendto_slow(fd, buf, n, flags, addr, len);
}

static __attribute__((noinline, cold)) ssize_t
rsx_sendmsg_slow(int fd, const struct msghdr *msg, int flags)
{
	rsx_trace_call("sendmsg", fd);
	if (rsx_engine(fd))
		RSX_TRY(rsx_sock_send(fd, msg->msg_iov, msg->msg_iovlen, flags));
	return RSX_REAL(sendmsg)(fd, msg, flags);
}

RSX_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	__typeof__(rsx_libc.sendmsg) real = rsx_libc.sendmsg;

	if (likely(real && !rsx_slow(fd)))
		return real(fd, msg, flags);
	return rsx_sendmsg_slow(fd, msg, flags);
}

RSX_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			int flags)
{
	unsigned int i;
	ssize_t n;

	rsx_trace_call("sendmmsg", fd);
	if (!rsx_engine(fd))
		return RSX_REAL(sendmmsg)(fd, vec, vlen, flags);
	for (i = 0; i < vlen; i++) {
		n = rsx_sock_send(fd, vec[i].msg_hdr.msg_iov,
				  vec[i].msg_hdr.msg_iovlen, flags);
		if (n == -ENOTSOCK && !i)
			return RSX_REAL(sendmmsg)(fd, vec, vlen, flags);
		if (n < 0)
			return i ? (int)i : rsx_ret(n);
		vec[i].msg_len = n;
	}
	return i;
}

RSX_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset,
			    size_t count)
{
	rsx_trace_call("sendfile", out_fd);
	if (rsx_engine(out_fd))
		RSX_TRY(rsx_sock_sendfile(out_fd, in_fd, offset, count));
	return RSX_REAL(sendfile)(out_fd, in_fd, offset, count);
}

RSX_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset,
			      size_t count)
{
	rsx_trace_call("sendfile64", out_fd);
	if (rsx_engine(out_fd))
		RSX_TRY(rsx_sock_sendfile(out_fd, in_fd, offset, count));
	return RSX_REAL(sendfile64)(out_fd, in_fd, offset, count);
}

/* splice() cannot move ring bytes through the kernel: the engine copies. */
RSX_EXPORT ssize_t splice(int fd_in, off64_t *off_in, int fd_out,
			  off64_t *off_out, size_t len, unsigned int flags)
{
	rsx_trace_call("splice", fd_in);
	if (rsx_engine(fd_in) && rsx_engine(fd_out))
		return rsx_ret(-EINVAL);	/* no pipe at either end */
	if (rsx_engine(fd_in) || rsx_engine(fd_out))
		return rsx_ret(rsx_sock_splice(fd_in, off_in, fd_out, off_out,
					       len, flags));
	return RSX_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
}
