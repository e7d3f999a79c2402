// SPDX-License-Identifier: MIT
/*
 * Failing (and some succeeding) wrapped calls, one line each with the
 * return value and errno by name.  errno.test runs it with and without
 * librsockx and requires identical output: every wrapper must leave exactly
 * the kernel's errno on failure, and leave errno alone on success.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include "pt.h"

static void show(const char *what, long rc)
{
	const char *name = strerrorname_np(errno);

	printf("%-40s rc=%ld errno=%s\n", what, rc, name ? name : "?");
	fflush(stdout);
}

/* Run CALL with errno preset to a marker, so "unchanged" is visible too. */
#define T(what, call) do {						\
	long rc_;							\
	errno = EXDEV;							\
	rc_ = (long)(call);						\
	show(what, rc_);						\
} while (0)

static volatile sig_atomic_t got_sigpipe;

static void on_sigpipe(int sig)
{
	got_sigpipe = sig;
}

int main(void)
{
	struct sockaddr_in addr, taken;
	struct timeval tv = { .tv_usec = 100000 };
	struct epoll_event ev = { .events = EPOLLIN };
	struct pollfd *pfs;
	struct rlimit rl;
	rlim_t i;
	struct stat st;
	char buf[16];
	int c, a, l, s, p[2], e, v;
	socklen_t len;

	pt_tcp_pair(&c, &a);
	pt_check(pipe(p) == 0);

	T("close(-1)", close(-1));
	T("close(12345)", close(12345));
	T("read(-1)", read(-1, buf, 1));
	T("write(-1)", write(-1, "x", 1));
	T("send(pipe)", send(p[1], "x", 1, 0));
	T("recv(pipe)", recv(p[0], buf, 1, MSG_DONTWAIT));
	T("recv(nonblocking, empty)", recv(a, buf, 1, MSG_DONTWAIT));
	pt_check(fcntl(a, F_SETFL, O_NONBLOCK) == 0);
	T("read(O_NONBLOCK, empty)", read(a, buf, 1));
	T("accept(connected socket)", accept(a, NULL, NULL));
	T("listen(-1)", listen(-1, 1));
	T("getpeername(pipe)", getpeername(p[0], NULL, NULL));
	T("shutdown(pipe)", shutdown(p[0], SHUT_RD));
	T("setsockopt(bad level)", setsockopt(a, 12345, 1, &v, sizeof(v)));
	len = sizeof(v);
	T("getsockopt(bad option)", getsockopt(a, SOL_SOCKET, 12345, &v, &len));
	T("socket(bad family)", socket(12345, SOCK_STREAM, 0));
	T("socket(bad type)", socket(AF_INET, 12345, 0));
	T("fcntl(-1)", fcntl(-1, F_GETFL));
	T("dup(-1)", dup(-1));
	T("dup2(-1, 100)", dup2(-1, 100));
	T("dup3(a, a)", dup3(a, a, 0));
	T("fstat(-1)", fstat(-1, &st));
	/* nfds above RLIMIT_NOFILE: EINVAL (all entries valid memory, for
	 * ASan's poll interceptor in sanitizer builds) */
	pt_check(getrlimit(RLIMIT_NOFILE, &rl) == 0);
	pfs = calloc(rl.rlim_cur + 1, sizeof(*pfs));
	pt_check(pfs);
	for (i = 0; i <= rl.rlim_cur; i++)
		pfs[i].fd = -1;
	T("poll(nfds > RLIMIT_NOFILE)", poll(pfs, rl.rlim_cur + 1, 0));
	free(pfs);
	T("epoll_ctl(regular file)",
	  epoll_ctl(e = epoll_create1(0), EPOLL_CTL_ADD,
		    open("/proc/self/stat", O_RDONLY), &ev));
	close(e);

	/* connect: refused, in progress, already connected */
	l = pt_listener(&addr);
	close(l);
	s = socket(AF_INET, SOCK_STREAM, 0);
	T("connect(closed port)", connect(s, (struct sockaddr *)&addr,
					  sizeof(addr)));
	close(s);
	l = pt_listener(&addr);
	s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	T("connect(nonblocking)", connect(s, (struct sockaddr *)&addr,
					  sizeof(addr)) < 0 ? -1 : 0);
	{
		struct pollfd pf = { .fd = s, .events = POLLOUT };

		pt_check(poll(&pf, 1, 5000) == 1);
	}
	T("connect(again, connected)", connect(s, (struct sockaddr *)&addr,
					       sizeof(addr)));
	T("bind(address in use)", bind(socket(AF_INET, SOCK_STREAM, 0),
				       (struct sockaddr *)&addr,
				       sizeof(addr)));
	close(s);
	taken = addr;

	/* SO_RCVTIMEO: EAGAIN after the timeout */
	pt_check(fcntl(a, F_SETFL, 0) == 0);
	pt_check(setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0);
	T("recv(SO_RCVTIMEO)", recv(a, buf, 1, 0));

	/* success leaves errno alone */
	T("send(ok)", send(c, "ok", 2, 0));
	T("recv(ok)", recv(a, buf, 2, MSG_WAITALL));
	T("write(ok)", write(c, "ok", 2));
	T("read(ok)", read(a, buf, 2));
	T("getsockname(ok)", getsockname(a, (struct sockaddr *)&taken,
					 (len = sizeof(taken), &len)));
	T("fcntl(ok)", fcntl(a, F_GETFD));

	/* EPIPE with SIGPIPE ignored, then SIGPIPE delivered unless
	 * MSG_NOSIGNAL */
	close(a);
	pt_check(send(c, "x", 1, 0) == 1);	/* draws the RST */
	usleep(100000);
	signal(SIGPIPE, SIG_IGN);
	T("send(reset peer)", send(c, "x", 1, 0));
	T("write(reset peer)", write(c, "x", 1));
	signal(SIGPIPE, on_sigpipe);
	T("send(MSG_NOSIGNAL)", send(c, "x", 1, MSG_NOSIGNAL));
	printf("sigpipe after MSG_NOSIGNAL: %d\n", (int)got_sigpipe);
	T("write(SIGPIPE handler)", write(c, "x", 1));
	printf("sigpipe after write: %d\n", (int)got_sigpipe);
	close(c);
	T("close(closed)", close(c));
	return 0;
}
