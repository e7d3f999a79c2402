// SPDX-License-Identifier: MIT
/*
 * The fd table, the object pool and descriptor lifetime tracking, on real
 * descriptors (the engine calls libc directly in these tests).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdtab.h"
#include "pool.h"
#include "stats.h"
#include "tap.h"
#include "track.h"

static void test_pool(void)
{
	struct rsx_pool p;
	void *a, *b, *c;

	is_int(rsx_pool_init(&p, 24, 2), 0, "pool of two");
	is_int(p.objsize, 64, "objects padded to a cache line");
	a = rsx_pool_get(&p);
	b = rsx_pool_get(&p);
	ok(a && b && a != b, "two distinct objects");
	ok(rsx_pool_get(&p) == NULL, "third get fails: pool full");
	rsx_pool_put(&p, a);
	c = rsx_pool_get(&p);
	ok(c == a, "freed object is recycled (type-stable)");
	rsx_pool_put(&p, b);
	rsx_pool_put(&p, c);
	is_int(p.inuse, 0, "nothing in use");
	rsx_pool_destroy(&p);
}

static int tcp_socket(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	rsx_on_socket(fd, AF_INET, SOCK_STREAM, 0);
	return fd;
}

static void test_track(void)
{
	struct rsx_sock *s, *old;
	struct rlimit rl;
	int fd, fd2, u, big;

	fd = tcp_socket();
	s = rsx_fd_peek(fd);
	ok(s && s->kind == RSX_SOCK_TCP && s->family == AF_INET,
	   "TCP socket tracked");
	getrlimit(RLIMIT_NOFILE, &rl);
	ok(rsx_fdtab.size >= rl.rlim_max || rsx_fdtab.size >= (1u << 24),
	   "table sized from the hard limit (%u)", rsx_fdtab.size);

	u = socket(AF_INET, SOCK_DGRAM, 0);
	rsx_on_socket(u, AF_INET, SOCK_DGRAM, 0);
	ok(!rsx_fd_peek(u), "UDP not tracked");
	close(u);
	u = socket(AF_INET6, SOCK_STREAM, IPPROTO_SCTP);
	if (u >= 0) {
		rsx_on_socket(u, AF_INET6, SOCK_STREAM, IPPROTO_SCTP);
		ok(!rsx_fd_peek(u), "SCTP stream not tracked");
		close(u);
	} else {
		ok(1, "# SKIP no SCTP");
	}

	fd2 = dup(fd);
	rsx_on_dup(fd, fd2);
	ok(rsx_fd_peek(fd2) == s, "dup shares the object");
	is_int(s->ref, 2, "two references");

	ok(rsx_close_begin(fd, &old) == 0 && old == s, "close takes the slot");
	ok(!rsx_fd_peek(fd), "slot empty before the real close");
	close(fd);
	rsx_close_end(old);
	is_int(s->ref, 1, "alias keeps the object");
	ok(rsx_fd_peek(fd2) == s, "alias still tracked");

	/* a number reused behind our back: creating it clears the stale slot */
	fd = open("/dev/null", O_RDONLY);
	ok(fd >= 0, "reuse a descriptor number");
	if (rsx_fd_peek(fd))
		ok(0, "stale");
	close(fd2);	/* closed behind our back: no rsx_close_* */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ok(fd == fd2, "kernel reused the number");
	rsx_on_untracked(fd);
	ok(!rsx_fd_peek(fd), "stale entry cleared by a new untracked fd");
	close(fd);

	/* dup2 onto a tracked fd replaces it */
	fd = tcp_socket();
	fd2 = tcp_socket();
	s = rsx_fd_peek(fd);
	ok(rsx_dup2_begin(fd2, &old) == 0 && old, "dup2 takes the target");
	ok(dup2(fd, fd2) == fd2, "real dup2");
	rsx_dup2_end(fd, fd2, 1, old);
	ok(rsx_fd_peek(fd2) == s, "target now aliases the source");
	ok(rsx_dup2_begin(fd2, &old) == 0, "failed dup2...");
	rsx_dup2_end(-1, fd2, 0, old);
	ok(rsx_fd_peek(fd2) == s, "...restores the target");

	/* above 65535 */
	big = 70000;
	if (rl.rlim_cur <= (rlim_t)big) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (dup2(fd, big) == big) {
		rsx_on_dup(fd, big);
		ok(rsx_fd_peek(big) == s, "fd 70000 tracked");
		ok(rsx_close_begin(big, &old) == 0 && old == s, "and closed");
		close(big);
		rsx_close_end(old);
	} else {
		ok(1, "# SKIP RLIMIT_NOFILE too low for fd 70000");
		ok(1, "# SKIP");
	}

	/* close_range forgets everything in the range */
	is_int(rsx_close_range(fd, fd2, 0), 0, "close_range");
	ok(!rsx_fd_peek(fd) && !rsx_fd_peek(fd2), "range forgotten");
	ok(fcntl(fd, F_GETFD) < 0 && errno == EBADF, "range really closed");
}

static void test_private(void)
{
	static int owner;
	struct rsx_sock *old;
	int p, lo, a;

	lo = open("/dev/null", O_RDONLY);
	p = fcntl(lo, F_DUPFD_CLOEXEC, rsx_fd_private_base());
	ok(p >= rsx_fd_private_base(), "private fd high (%d)", p);
	owner = p;
	rsx_fd_set_private(p, &owner);
	ok(rsx_fd_is_private(p), "marked private");
	is_int(rsx_close_begin(p, &old), 1, "close of a private fd refused");
	ok(fcntl(p, F_GETFD) >= 0, "private fd still open");

	a = open("/dev/null", O_RDONLY);
	is_int(rsx_closefrom(lo), 0, "closefrom below our private fd");
	ok(fcntl(a, F_GETFD) < 0, "program's fds closed");
	ok(fcntl(p, F_GETFD) >= 0, "private fd survived closefrom");

	lo = open("/dev/null", O_RDONLY);
	is_int(rsx_dup2_begin(p, &old), 0, "dup2 onto a private fd");
	ok(owner != p && rsx_fd_is_private(owner), "private fd moved to %d",
	   owner);
	ok(dup2(lo, p) == p, "program gets the number it asked for");
	rsx_dup2_end(lo, p, 1, old);
	ok(!rsx_fd_is_private(p), "old number no longer private");
	close(p);
	close(lo);
}

/*
 * Any number of private descriptors, each private for as long as it is
 * open: one that rsockx closed is the program's again (closefrom() closes
 * whatever the program put at that number, close() is not refused).
 */
#define NPRIV 40
static void test_private_many(void)
{
	int fd[NPRIV], i, n, next, lo, mine, gone;
	struct rsx_sock *old;

	lo = open("/dev/null", O_RDONLY);
	for (i = 0; i < NPRIV; i++) {
		fd[i] = fcntl(lo, F_DUPFD_CLOEXEC, lo + 1);
		rsx_fd_set_private(fd[i], NULL);
	}
	for (n = 0, next = rsx_fd_private_next(lo); next >= 0;
	     next = rsx_fd_private_next(next + 1))
		n += next >= fd[0] && next <= fd[NPRIV - 1];
	is_int(n, NPRIV, "all %d private descriptors found for close_range",
	       NPRIV);
	gone = fd[NPRIV / 2];
	rsx_fd_private_close(gone);
	ok(!rsx_fd_is_private(gone), "one that rsockx closed is not private");
	mine = dup2(lo, gone);
	ok(mine == gone, "the program takes its number (%d)", mine);
	is_int(rsx_close_begin(mine, &old), 0, "... and may close it");
	rsx_close_end(old);
	ok(fcntl(mine, F_GETFD) >= 0, "(still open: close_begin only asks)");
	is_int(rsx_closefrom(lo + 1), 0, "closefrom");
	ok(fcntl(mine, F_GETFD) < 0, "closefrom closed the program's fd at "
	   "the recycled number");
	for (n = 0, i = 0; i < NPRIV; i++)
		n += i != NPRIV / 2 && fcntl(fd[i], F_GETFD) >= 0;
	is_int(n, NPRIV - 1, "the private ones survived closefrom");
	for (i = 0; i < NPRIV; i++)
		if (i != NPRIV / 2)
			rsx_fd_private_close(fd[i]);
	for (n = 0, next = rsx_fd_private_next(lo); next >= 0;
	     next = rsx_fd_private_next(next + 1))
		n += next >= fd[0] && next <= fd[NPRIV - 1];
	is_int(n, 0, "none of them left once all are closed");
	close(lo);
}

#define NTHREADS 4
#define ROUNDS 20000

/*
 * Threads dup, close and look up the same few descriptors: references must
 * balance, no object may be freed while a lookup holds it.
 */
static int shared_fd[4];

static void *hammer(void *arg)
{
	unsigned int seed = (unsigned long)arg;
	struct rsx_sock *s, *old;
	int i, fd;

	for (i = 0; i < ROUNDS; i++) {
		s = rsx_fd_get(shared_fd[rand_r(&seed) % 4]);
		if (s) {
			if (s->kind != RSX_SOCK_TCP || s->ref < 1)
				return (void *)1;
			rsx_sock_put(s);
		}
		fd = dup(shared_fd[rand_r(&seed) % 4]);
		if (fd < 0)
			continue;
		rsx_on_dup(shared_fd[0], fd);
		rsx_close_begin(fd, &old);
		close(fd);
		rsx_close_end(old);
	}
	return NULL;
}

static void test_threads(void)
{
	struct rsx_sock *old;
	pthread_t t[NTHREADS];
	uint32_t before;
	void *res;
	int i, bad = 0;

	for (i = 0; i < 4; i++)
		shared_fd[i] = tcp_socket();
	before = rsx_sock_inuse();
	for (i = 0; i < NTHREADS; i++)
		pthread_create(&t[i], NULL, hammer, (void *)(long)i);
	for (i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], &res);
		bad |= res != NULL;
	}
	ok(!bad, "lookups never saw a dead object");
	is_int(rsx_sock_inuse(), before, "references balance");
	for (i = 0; i < 4; i++) {
		rsx_close_begin(shared_fd[i], &old);
		close(shared_fd[i]);
		rsx_close_end(old);
	}
	is_int(rsx_sock_inuse(), before - 4, "all freed");
}

int main(void)
{
	test_pool();
	test_track();
	test_private();
	test_private_many();
	test_threads();
	return done_testing();
}
