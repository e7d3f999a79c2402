// SPDX-License-Identifier: MIT
/*
 * The data path: reads, writes, their fortified variants, and zero-copy
 * calls.  Until a connection is upgraded these go straight to libc.
 */
#include <sys/sendfile.h>

#include "shim.h"

RSX_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
	rsx_trace_call("read", fd);
	return RSX_REAL(read)(fd, buf, n);
}

RSX_EXPORT ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	rsx_trace_call("__read_chk", fd);
	return RSX_REAL(__read_chk)(fd, buf, n, buflen);
}

RSX_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
	rsx_trace_call("write", fd);
	return RSX_REAL(write)(fd, buf, n);
}

RSX_EXPORT ssize_t readv(int fd, const struct iovec *iov, int iovcnt)
{
	rsx_trace_call("readv", fd);
	return RSX_REAL(readv)(fd, iov, iovcnt);
}

RSX_EXPORT ssize_t writev(int fd, const struct iovec *iov, int iovcnt)
{
	rsx_trace_call("writev", fd);
	return RSX_REAL(writev)(fd, iov, iovcnt);
}

RSX_EXPORT ssize_t recv(int fd, void *buf, size_t n, int flags)
{
	rsx_trace_call("recv", fd);
	return RSX_REAL(recv)(fd, buf, n, flags);
}

RSX_EXPORT ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen,
			      int flags)
{
	rsx_trace_call("__recv_chk", fd);
	return RSX_REAL(__recv_chk)(fd, buf, n, buflen, flags);
}

RSX_EXPORT ssize_t recvfrom(int fd, void *buf, size_t n, int flags,
			    struct sockaddr *addr, socklen_t *len)
{
	rsx_trace_call("recvfrom", fd);
	return RSX_REAL(recvfrom)(fd, buf, n, flags, addr, len);
}

RSX_EXPORT ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen,
				  int flags, struct sockaddr *addr,
				  socklen_t *len)
{
	rsx_trace_call("__recvfrom_chk", fd);
	return RSX_REAL(__recvfrom_chk)(fd, buf, n, buflen, flags, addr, len);
}

RSX_EXPORT ssize_t recvmsg(int fd, struct msghdr *msg, int flags)
{
	rsx_trace_call("recvmsg", fd);
	return RSX_REAL(recvmsg)(fd, msg, flags);
}

RSX_EXPORT int recvmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			int flags, struct timespec *timeout)
{
	rsx_trace_call("recvmmsg", fd);
	return RSX_REAL(recvmmsg)(fd, vec, vlen, flags, timeout);
}

RSX_EXPORT ssize_t send(int fd, const void *buf, size_t n, int flags)
{
	rsx_trace_call("send", fd);
	return RSX_REAL(send)(fd, buf, n, flags);
}

RSX_EXPORT ssize_t sendto(int fd, const void *buf, size_t n, int flags,
			  const struct sockaddr *addr, socklen_t len)
{
	rsx_trace_call("sendto", fd);
	return RSX_REAL(sendto)(fd, buf, n, flags, addr, len);
}

RSX_EXPORT ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
	rsx_trace_call("sendmsg", fd);
	return RSX_REAL(sendmsg)(fd, msg, flags);
}

RSX_EXPORT int sendmmsg(int fd, struct mmsghdr *vec, unsigned int vlen,
			int flags)
{
	rsx_trace_call("sendmmsg", fd);
	return RSX_REAL(sendmmsg)(fd, vec, vlen, flags);
}

RSX_EXPORT ssize_t sendfile(int out_fd, int in_fd, off_t *offset,
			    size_t count)
{
	rsx_trace_call("sendfile", out_fd);
	return RSX_REAL(sendfile)(out_fd, in_fd, offset, count);
}

RSX_EXPORT ssize_t sendfile64(int out_fd, int in_fd, off64_t *offset,
			      size_t count)
{
	rsx_trace_call("sendfile64", out_fd);
	return RSX_REAL(sendfile64)(out_fd, in_fd, offset, count);
}

RSX_EXPORT ssize_t splice(int fd_in, off64_t *off_in, int fd_out,
			  off64_t *off_out, size_t len, unsigned int flags)
{
	rsx_trace_call("splice", fd_in);
	return RSX_REAL(splice)(fd_in, off_in, fd_out, off_out, len, flags);
}
