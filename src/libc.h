/* SPDX-License-Identifier: MIT */
#ifndef RSX_LIBC_H
#define RSX_LIBC_H

/*
 * The real libc functions behind every entry point the shim intercepts.
 *
 * preload/real.c fills this table (with dlsym, in a constructor and lazily);
 * the engine in src/ only calls through it.  A plain call to read() from
 * inside librsockx would bind to our own exported read(), so src/ must call
 * intercepted functions only as rsx_libc.read(...).
 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

/* Fortified and legacy entry points have no prototype in glibc 2.36's headers
 * unless the caller is built with _FORTIFY_SOURCE; declare them here. */
ssize_t __read_chk(int fd, void *buf, size_t nbytes, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *addrlen);
int __poll_chk(struct pollfd *fds, nfds_t nfds, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t nfds, const struct timespec *ts,
		const sigset_t *ss, size_t fdslen);
int __fxstat(int ver, int fd, struct stat *buf);
int __fxstat64(int ver, int fd, struct stat64 *buf);

/*
 * X(name, version): version is NULL for the default version of the symbol;
 * the legacy stat entry points exist only as compat symbols in glibc >= 2.33
 * and an unversioned dlsym() would not find them.
 */
#define RSX_LIBC_FUNCS(X) \
	X(socket, NULL) X(socketpair, NULL) X(bind, NULL) X(listen, NULL) \
	X(accept, NULL) X(accept4, NULL) X(connect, NULL) X(shutdown, NULL) \
	X(close, NULL) X(close_range, NULL) X(closefrom, NULL) X(fclose, NULL) X(fdopen, NULL) \
	X(read, NULL) X(write, NULL) X(readv, NULL) X(writev, NULL) \
	X(recv, NULL) X(recvfrom, NULL) X(recvmsg, NULL) X(recvmmsg, NULL) \
	X(send, NULL) X(sendto, NULL) X(sendmsg, NULL) X(sendmmsg, NULL) \
	X(sendfile, NULL) X(sendfile64, NULL) X(splice, NULL) \
	X(poll, NULL) X(ppoll, NULL) X(select, NULL) X(pselect, NULL) \
	X(epoll_create, NULL) X(epoll_create1, NULL) X(epoll_ctl, NULL) \
	X(epoll_wait, NULL) X(epoll_pwait, NULL) X(epoll_pwait2, NULL) \
	X(fcntl, NULL) X(fcntl64, NULL) X(ioctl, NULL) \
	X(getsockopt, NULL) X(setsockopt, NULL) \
	X(getsockname, NULL) X(getpeername, NULL) \
	X(dup, NULL) X(dup2, NULL) X(dup3, NULL) \
	X(fstat, NULL) X(fstat64, NULL) \
	X(__fxstat, "GLIBC_2.2.5") X(__fxstat64, "GLIBC_2.2.5") \
	X(fork, NULL) X(vfork, NULL) X(_Fork, NULL) X(daemon, NULL) \
	X(execve, NULL) X(execv, NULL) X(execvp, NULL) X(execvpe, NULL) \
	X(fexecve, NULL) X(posix_spawn, NULL) X(_exit, NULL) X(_Exit, NULL) \
	X(__read_chk, NULL) X(__recv_chk, NULL) X(__recvfrom_chk, NULL) \
	X(__poll_chk, NULL) X(__ppoll_chk, NULL) \
	X(sigaction, NULL) X(signal, NULL) X(sysv_signal, NULL) \
	X(sigset, NULL) X(siginterrupt, NULL)

/* sigset and siginterrupt are deprecated, and still the program's to call */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct rsx_libc {
#define RSX_LIBC_FIELD(name, ver) __typeof__(name) *name;
	RSX_LIBC_FUNCS(RSX_LIBC_FIELD)
#undef RSX_LIBC_FIELD
};
#pragma GCC diagnostic pop

extern struct rsx_libc rsx_libc;

/* Fills rsx_libc if that has not happened yet (the shim does the lookups;
 * src/ resolves no symbols itself). */
void rsx_libc_resolve(void);

#endif
