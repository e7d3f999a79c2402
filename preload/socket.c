// SPDX-License-Identifier: MIT
/* Socket lifetime and socket options. */
#include "fdtab.h"
#include "shim.h"
#include "track.h"
#include "upgrade.h"

RSX_EXPORT int socket(int domain, int type, int protocol)
{
	int fd;

	rsx_trace_call("socket", -1);
	fd = RSX_REAL(socket)(domain, type, protocol);
	if (fd >= 0 && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_socket(fd, domain, type, protocol));
	return fd;
}

RSX_EXPORT int socketpair(int domain, int type, int protocol, int sv[2])
{
	int ret;

	rsx_trace_call("socketpair", -1);
	ret = RSX_REAL(socketpair)(domain, type, protocol, sv);
	if (ret == 0 && !rsx_guarded()) {
		RSX_KEEP_ERRNO(rsx_on_untracked(sv[0]));
		RSX_KEEP_ERRNO(rsx_on_untracked(sv[1]));
	}
	return ret;
}

RSX_EXPORT int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	rsx_trace_call("bind", fd);
	return RSX_REAL(bind)(fd, addr, len);
}

RSX_EXPORT int listen(int fd, int backlog)
{
	int ret;

	rsx_trace_call("listen", fd);
	ret = RSX_REAL(listen)(fd, backlog);
	if (ret == 0 && rsx_fd_peek(fd) && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_listen(fd));
	return ret;
}

RSX_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
	int nfd;

	rsx_trace_call("accept", fd);
	RSX_KEEP_ERRNO(rsx_on_accept_prepare(fd));
	nfd = RSX_REAL(accept)(fd, addr, len);
	if (nfd >= 0 && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_accept(fd, nfd, 0));
	return nfd;
}

RSX_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len,
		       int flags)
{
	int nfd;

	rsx_trace_call("accept4", fd);
	RSX_KEEP_ERRNO(rsx_on_accept_prepare(fd));
	nfd = RSX_REAL(accept4)(fd, addr, len, flags);
	if (nfd >= 0 && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_accept(fd, nfd, flags));
	return nfd;
}

RSX_EXPORT int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int ret;

	rsx_trace_call("connect", fd);
	if (rsx_fd_peek(fd) && !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_connect_prepare(fd, addr, len));
	ret = RSX_REAL(connect)(fd, addr, len);
	if ((ret == 0 || errno == EINPROGRESS) && rsx_fd_peek(fd) &&
	    !rsx_guarded())
		RSX_KEEP_ERRNO(rsx_on_connect(fd, addr, len, ret == 0));
	return ret;
}

RSX_EXPORT int shutdown(int fd, int how)
{
	rsx_trace_call("shutdown", fd);
	if (rsx_engine(fd))
		return rsx_ret(rsx_sock_shutdown(fd, how));
	return RSX_REAL(shutdown)(fd, how);
}

RSX_EXPORT int getsockopt(int fd, int level, int name, void *val,
			  socklen_t *len)
{
	int ret;

	rsx_trace_call("getsockopt", fd);
	ret = RSX_REAL(getsockopt)(fd, level, name, val, len);
	/* how a program learns that its non-blocking connect() is done */
	if (ret == 0 && level == SOL_SOCKET && name == SO_ERROR && val &&
	    len && *len >= sizeof(int) && *(int *)val == 0 && rsx_engine(fd))
		RSX_KEEP_ERRNO(rsx_on_connect_done(fd));
	return ret;
}

RSX_EXPORT int setsockopt(int fd, int level, int name, const void *val,
			  socklen_t len)
{
	int ret;

	rsx_trace_call("setsockopt", fd);
	ret = RSX_REAL(setsockopt)(fd, level, name, val, len);
	/* ring bytes count against it, too */
	if (ret == 0 && level == SOL_SOCKET && name == SO_RCVLOWAT && val &&
	    len >= sizeof(int) && rsx_engine(fd))
		RSX_KEEP_ERRNO(rsx_sock_rcvlowat(fd, *(const int *)val));
	return ret;
}

RSX_EXPORT int getsockname(int fd, struct sockaddr *addr, socklen_t *len)
{
	rsx_trace_call("getsockname", fd);
	return RSX_REAL(getsockname)(fd, addr, len);
}

RSX_EXPORT int getpeername(int fd, struct sockaddr *addr, socklen_t *len)
{
	rsx_trace_call("getpeername", fd);
	return RSX_REAL(getpeername)(fd, addr, len);
}
