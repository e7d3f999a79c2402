// SPDX-License-Identifier: MIT
/*
 * Calls every entry point that librsockx wraps at least once, on real TCP
 * sockets, a socketpair and a pipe, and checks each result.  coverage.test
 * runs it traced and requires a `call NAME` line for every exported
 * wrapper, so a wrapper that is never reached (missing from the export
 * list, or shadowed by a libc-internal call) is caught.
 *
 *   allcalls            run everything
 *   allcalls child FD   (exec'ed by execve/posix_spawn) write "x" to FD
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include "pt.h"

/* The fortified entry points, called directly (fortify.test calls them
 * the way compiled code does). */
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __recv_chk(int fd, void *buf, size_t n, size_t buflen, int flags);
ssize_t __recvfrom_chk(int fd, void *buf, size_t n, size_t buflen, int flags,
		       struct sockaddr *addr, socklen_t *alen);
int __poll_chk(struct pollfd *fds, nfds_t n, int timeout, size_t fdslen);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *ts,
		const sigset_t *ss, size_t fdslen);

extern char **environ;

/* One byte from w to r through the given fds, checking it arrives. */
static void ping(int w, int r, char ch)
{
	char got = 0;

	pt_check(write(w, &ch, 1) == 1);
	pt_check(read(r, &got, 1) == 1 && got == ch);
}

static void wait_ok(pid_t pid)
{
	int st;

	pt_check(pid > 0);
	pt_check(waitpid(pid, &st, 0) == pid);
	pt_check(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void sockets(void)
{
	struct sockaddr_in addr, peer;
	socklen_t alen = sizeof(peer);
	struct mmsghdr mm[2];
	struct iovec iov[2];
	struct msghdr msg;
	char buf[64];
	int l, c, a, a4, sp[2], val;
	int one = 1;

	l = pt_listener(&addr);		/* socket bind listen getsockname */
	c = socket(AF_INET, SOCK_STREAM, 0);
	pt_check(c >= 0);
	pt_check(connect(c, (struct sockaddr *)&addr, sizeof(addr)) == 0);
	a = accept(l, (struct sockaddr *)&peer, &alen);
	pt_check(a >= 0);

	pt_check(getpeername(c, (struct sockaddr *)&peer, &alen) == 0);
	pt_check(peer.sin_port == addr.sin_port);
	pt_check(setsockopt(c, IPPROTO_TCP, 1 /* TCP_NODELAY */, &one,
			    sizeof(one)) == 0);
	alen = sizeof(val);
	pt_check(getsockopt(c, IPPROTO_TCP, 1, &val, &alen) == 0 && val);

	/* send/recv families on the TCP pair */
	pt_check(send(c, "ab", 2, 0) == 2);
	pt_check(recv(a, buf, 2, MSG_WAITALL) == 2 && !memcmp(buf, "ab", 2));
	pt_check(sendto(c, "cd", 2, 0, NULL, 0) == 2);
	pt_check(recvfrom(a, buf, 2, MSG_WAITALL, NULL, NULL) == 2 &&
		 !memcmp(buf, "cd", 2));
	iov[0].iov_base = "ef";
	iov[0].iov_len = 2;
	iov[1].iov_base = "gh";
	iov[1].iov_len = 2;
	memset(&msg, 0, sizeof(msg));
	msg.msg_iov = iov;
	msg.msg_iovlen = 2;
	pt_check(sendmsg(c, &msg, 0) == 4);
	pt_check(writev(c, iov, 2) == 4);
	iov[0].iov_base = buf;
	iov[1].iov_base = buf + 2;
	pt_check(recvmsg(a, &msg, MSG_WAITALL) == 4 &&
		 !memcmp(buf, "efgh", 4));
	pt_check(readv(a, iov, 2) == 4 && !memcmp(buf, "efgh", 4));

	memset(mm, 0, sizeof(mm));
	iov[0].iov_base = "ij";
	mm[0].msg_hdr.msg_iov = &iov[0];
	mm[0].msg_hdr.msg_iovlen = 1;
	pt_check(sendmmsg(c, mm, 1, 0) == 1 && mm[0].msg_len == 2);
	iov[0].iov_base = buf;
	pt_check(recvmmsg(a, mm, 1, MSG_WAITALL, NULL) == 1 &&
		 mm[0].msg_len == 2 && !memcmp(buf, "ij", 2));

	/* the fortified entry points, called as fortified code calls them */
	pt_check(send(c, "klmnop", 6, 0) == 6);
	pt_check(__read_chk(a, buf, 2, sizeof(buf)) == 2);
	pt_check(__recv_chk(a, buf + 2, 2, sizeof(buf), MSG_WAITALL) == 2);
	pt_check(__recvfrom_chk(a, buf + 4, 2, sizeof(buf), MSG_WAITALL,
				NULL, NULL) == 2);
	pt_check(!memcmp(buf, "klmnop", 6));

	/* ioctl FIONREAD sees a pending byte */
	pt_check(write(c, "q", 1) == 1);
	{
		struct pollfd p = { .fd = a, .events = POLLIN };
		struct timespec ts = { .tv_sec = 5 };

		pt_check(poll(&p, 1, 5000) == 1);
		pt_check(ppoll(&p, 1, &ts, NULL) == 1);
		pt_check(__poll_chk(&p, 1, 5000, sizeof(p)) == 1);
		pt_check(__ppoll_chk(&p, 1, &ts, NULL, sizeof(p)) == 1);
	}
	pt_check(ioctl(a, FIONREAD, &val) == 0 && val == 1);
	pt_check(read(a, buf, 1) == 1 && buf[0] == 'q');

	/* select and pselect */
	{
		struct timeval tv = { .tv_sec = 5 };
		struct timespec ts = { .tv_sec = 5 };
		fd_set rs;

		pt_check(write(c, "r", 1) == 1);
		FD_ZERO(&rs);
		FD_SET(a, &rs);
		pt_check(select(a + 1, &rs, NULL, NULL, &tv) == 1);
		FD_ZERO(&rs);
		FD_SET(a, &rs);
		pt_check(pselect(a + 1, &rs, NULL, NULL, &ts, NULL) == 1);
		pt_check(read(a, buf, 1) == 1 && buf[0] == 'r');
	}

	/* epoll: every create/wait flavour */
	{
		struct epoll_event ev = { .events = EPOLLIN }, out;
		struct timespec ts = { .tv_sec = 5 };
		int e1, e2;

		e1 = epoll_create(1);
		e2 = epoll_create1(EPOLL_CLOEXEC);
		pt_check(e1 >= 0 && e2 >= 0);
		ev.data.fd = a;
		pt_check(epoll_ctl(e1, EPOLL_CTL_ADD, a, &ev) == 0);
		pt_check(write(c, "s", 1) == 1);
		pt_check(epoll_wait(e1, &out, 1, 5000) == 1 &&
			 out.data.fd == a);
		pt_check(epoll_pwait(e1, &out, 1, 5000, NULL) == 1);
		pt_check(epoll_pwait2(e1, &out, 1, &ts, NULL) == 1);
		pt_check(read(a, buf, 1) == 1 && buf[0] == 's');
		close(e2);
		close(e1);
	}

	/* fcntl, fcntl64, fstat, fstat64 */
	{
		struct stat st;
		struct stat64 st64;

		pt_check(fcntl(c, F_GETFL) == O_RDWR);
		pt_check(fcntl64(c, F_SETFD, FD_CLOEXEC) == 0);
		pt_check(fcntl64(c, F_GETFD) == FD_CLOEXEC);
		pt_check(fstat(c, &st) == 0 && S_ISSOCK(st.st_mode));
		pt_check(fstat64(c, &st64) == 0 && S_ISSOCK(st64.st_mode));
	}

	/* legacy __fxstat/__fxstat64: only a preloaded definition is found */
	{
		int (*fx)(int, int, struct stat *);
		int (*fx64)(int, int, struct stat64 *);
		struct stat64 st64;
		struct stat st;

		fx = (int (*)(int, int, struct stat *))
			dlsym(RTLD_DEFAULT, "__fxstat");
		fx64 = (int (*)(int, int, struct stat64 *))
			dlsym(RTLD_DEFAULT, "__fxstat64");
		pt_check(fx && fx64);
		pt_check(fx(1, c, &st) == 0 && S_ISSOCK(st.st_mode));
		pt_check(fx64(1, c, &st64) == 0 && S_ISSOCK(st64.st_mode));
	}

	/* sendfile, sendfile64 from a file; splice from the socket to a pipe */
	{
		char name[] = "/tmp/rsockx-allcalls.XXXXXX";
		off64_t off64 = 0;
		off_t off = 0;
		int f, p[2];

		f = mkstemp(name);
		pt_check(f >= 0);
		unlink(name);
		pt_write_all(f, "tuvw", 4);
		pt_check(sendfile(c, f, &off, 2) == 2);
		off64 = off;
		pt_check(sendfile64(c, f, &off64, 2) == 2);
		pt_check(recv(a, buf, 4, MSG_WAITALL) == 4 &&
			 !memcmp(buf, "tuvw", 4));
		close(f);

		pt_check(pipe(p) == 0);
		pt_check(write(c, "xy", 2) == 2);
		pt_check(splice(a, NULL, p[1], NULL, 2, 0) == 2);
		pt_check(read(p[0], buf, 2) == 2 && !memcmp(buf, "xy", 2));
		close(p[0]);
		close(p[1]);
	}

	/* dup, dup2, dup3: the copies carry the stream */
	{
		int d1, d2, d3;

		d1 = dup(c);
		pt_check(d1 >= 0);
		d2 = dup2(a, 200);
		pt_check(d2 == 200);
		d3 = dup3(d1, 201, O_CLOEXEC);
		pt_check(d3 == 201);
		ping(d3, d2, 'z');
		ping(d2, d1, 'Z');
		close(d1);
		close(d2);
		close(d3);
	}

	/* accept4, socketpair, shutdown */
	{
		int c2 = socket(AF_INET, SOCK_STREAM, 0);

		pt_check(connect(c2, (struct sockaddr *)&addr,
				 sizeof(addr)) == 0);
		a4 = accept4(l, NULL, NULL, SOCK_CLOEXEC);
		pt_check(a4 >= 0);
		ping(c2, a4, '4');
		pt_check(shutdown(c2, SHUT_WR) == 0);
		pt_check(read(a4, buf, 1) == 0);
		close(c2);
		close(a4);
	}
	pt_check(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
	ping(sp[0], sp[1], 'u');

	/* close_range and closefrom on high copies */
	pt_check(dup2(sp[0], 300) == 300 && dup2(sp[1], 301) == 301);
	pt_check(close_range(300, 300, 0) == 0);
	pt_check(fcntl(300, F_GETFD) < 0 && errno == EBADF);
	closefrom(301);
	pt_check(fcntl(301, F_GETFD) < 0 && errno == EBADF);
	ping(sp[0], sp[1], 'v');

	/* fclose of a stream that fdopen made of a socket closes the socket */
	{
		int d = dup(sp[0]);
		FILE *f = fdopen(d, "r+");

		pt_check(f && fclose(f) == 0);
		pt_check(fcntl(d, F_GETFD) < 0 && errno == EBADF);
	}
	ping(sp[0], sp[1], 'w');

	close(sp[0]);
	close(sp[1]);
	close(c);
	close(a);
	close(l);
}

/* fork, vfork, _Fork, daemon, the exec family, posix_spawn; the children talk on
 * an inherited TCP connection. */
static void processes(const char *self)
{
	char fdarg[16], ch;
	char *argv[] = { (char *)self, "child", fdarg, NULL };
	pid_t pid;
	int c, a, st[2];

	pt_tcp_pair(&c, &a);
	snprintf(fdarg, sizeof(fdarg), "%d", c);

	pid = fork();
	if (pid == 0) {
		pt_check(write(c, "f", 1) == 1);
		_exit(0);
	}
	wait_ok(pid);
	pt_check(read(a, &ch, 1) == 1 && ch == 'f');

	pid = vfork();
	if (pid == 0) {
		execve(self, argv, environ);
		_exit(127);
	}
	wait_ok(pid);
	pt_check(read(a, &ch, 1) == 1 && ch == 'x');

	pid = _Fork();
	if (pid == 0) {
		pt_check(write(c, "F", 1) == 1);
		_Exit(0);
	}
	wait_ok(pid);
	pt_check(read(a, &ch, 1) == 1 && ch == 'F');

	pt_check(posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0);
	wait_ok(pid);
	pt_check(read(a, &ch, 1) == 1 && ch == 'x');

	/* the rest of the exec family, each in a child of its own */
	for (int how = 0; how < 7; how++) {
		pid = fork();
		if (pid == 0) {
			int xfd;

			switch (how) {
			case 0: execv(self, argv); break;
			case 1: execvp(self, argv); break;
			case 2: execvpe(self, argv, environ); break;
			case 3:
				xfd = open(self, O_RDONLY | O_CLOEXEC);
				fexecve(xfd, argv, environ);
				break;
			case 4: execl(self, argv[0], argv[1], argv[2], (char *)NULL); break;
			case 5: execlp(self, argv[0], argv[1], argv[2], (char *)NULL); break;
			default:
				execle(self, argv[0], argv[1], argv[2], (char *)NULL,
				       environ);
			}
			_exit(127);
		}
		wait_ok(pid);
		pt_check(read(a, &ch, 1) == 1 && ch == 'x');
	}

	/* daemon() exits its caller: call it in a child; the daemonised
	 * grandchild reports back through the socketpair. */
	pt_check(socketpair(AF_UNIX, SOCK_STREAM, 0, st) == 0);
	pid = fork();
	if (pid == 0) {
		if (daemon(1, 1) < 0)
			_exit(1);
		pt_check(write(st[1], "d", 1) == 1);
		_exit(0);
	}
	wait_ok(pid);
	pt_check(read(st[0], &ch, 1) == 1 && ch == 'd');
	close(st[0]);
	close(st[1]);
	close(c);
	close(a);
}

/* The calls that set a signal's action: each reports the handler before
 * it, and the one it set runs.  The library wraps them (the program's
 * handlers go behind a trampoline once a connection is upgraded). */
static volatile sig_atomic_t sig_hits;

static void on_sig(int sig)
{
	(void)sig;
	sig_hits++;
}

static void on_sig2(int sig)
{
	(void)sig;
	sig_hits += 10;
}

typedef void (*handler_fn)(int);

static void set_and_raise(handler_fn (*set)(int, handler_fn), handler_fn h,
			  handler_fn before)
{
	int n = sig_hits;

	pt_check(set != NULL);
	pt_check(set(SIGUSR1, h) == before);
	pt_check(raise(SIGUSR1) == 0);
	pt_check(sig_hits == n + (h == on_sig ? 1 : 10));
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void signals(void)
{
	int (*dsigaction)(int, const struct sigaction *, struct sigaction *) =
		dlsym(RTLD_DEFAULT, "__sigaction");
	struct sigaction sa, old;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sig;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	pt_check(sigaction(SIGUSR1, &sa, &old) == 0);
	pt_check(old.sa_handler == SIG_DFL);
	pt_check(raise(SIGUSR1) == 0 && sig_hits == 1);
	sa.sa_handler = on_sig2;
	pt_check(dsigaction != NULL && dsigaction(SIGUSR1, &sa, &old) == 0);
	pt_check(old.sa_handler == on_sig && (old.sa_flags & SA_RESTART));
	set_and_raise(signal, on_sig, on_sig2);
	set_and_raise(dlsym(RTLD_DEFAULT, "bsd_signal"), on_sig2, on_sig);
	set_and_raise(dlsym(RTLD_DEFAULT, "ssignal"), on_sig, on_sig2);
	pt_check(siginterrupt(SIGUSR1, 1) == 0);
	pt_check(sigaction(SIGUSR1, NULL, &old) == 0);
	pt_check(old.sa_handler == on_sig && !(old.sa_flags & SA_RESTART));
	set_and_raise(sigset, on_sig2, on_sig);
	set_and_raise(sysv_signal, on_sig, on_sig2);
	/* System V's: one run, then the default again */
	pt_check(signal(SIGUSR1, SIG_IGN) == SIG_DFL);
	set_and_raise(dlsym(RTLD_DEFAULT, "__sysv_signal"), on_sig2, SIG_IGN);
	pt_check(signal(SIGUSR1, SIG_DFL) == SIG_DFL);
}
#pragma GCC diagnostic pop

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "child")) {
		pt_check(write(atoi(argv[2]), "x", 1) == 1);
		return 0;
	}
	sockets();
	signals();
	processes("/proc/self/exe");
	printf("allcalls: ok\n");
	return 0;
}
