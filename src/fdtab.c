// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fdtab.h"
#include "libc.h"
#include "stats.h"

struct rsx_fdtab rsx_fdtab;

/* 0: none, 1: being created, 2: ready, 3: creation failed for good */
static _Atomic int rsx_fdtab_state;

static struct rsx_sock rsx_private_sock = { .kind = RSX_SOCK_PRIVATE };

/*
 * rsockx's own descriptors are marked in the table itself (the private
 * sentinel), as many as there are, for as long as they are open.  The few
 * that can move when the program dup2()s onto their number (the log's)
 * have an owner here, updated when it moves; the rest cannot.
 */
#define RSX_PRIVATE_OWNERS 4
static struct {
	_Atomic int fd;		/* -1 (0 before the first use): free */
	int *owner;
} rsx_private_owner[RSX_PRIVATE_OWNERS];
static pthread_mutex_t rsx_private_lock = PTHREAD_MUTEX_INITIALIZER;

#define RSX_FDTAB_LIMIT (1u << 24)

static unsigned int rsx_fdtab_wanted(void)
{
	unsigned long nr_open = 1048576;
	struct rlimit rl;
	char buf[32];
	ssize_t n;
	int fd;

	fd = open("/proc/sys/fs/nr_open", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = rsx_libc.read(fd, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = 0;
			nr_open = strtoul(buf, NULL, 10);
		}
		rsx_libc.close(fd);
	}
	if (getrlimit(RLIMIT_NOFILE, &rl))
		return 1024;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > nr_open)
		rl.rlim_max = nr_open;
	if (rl.rlim_max < rl.rlim_cur)
		rl.rlim_max = rl.rlim_cur;
	if (rl.rlim_max > RSX_FDTAB_LIMIT)
		rl.rlim_max = RSX_FDTAB_LIMIT;
	return rl.rlim_max ? rl.rlim_max : 1024;
}

/*
 * Creates the table once.  A second caller while the first is still at it
 * (another thread, or a signal handler on the same thread) does not wait: it
 * gets -EAGAIN and leaves its socket untracked, which is always safe.
 */
int rsx_fdtab_init(void)
{
	int expect = 0;
	unsigned int n;
	void *slot;
	int ret;

	if (!atomic_compare_exchange_strong(&rsx_fdtab_state, &expect, 1))
		return expect == 2 ? 0 : expect == 1 ? -EAGAIN : -ENOMEM;
	n = rsx_fdtab_wanted();
	slot = mmap(NULL, (size_t)n * sizeof(*rsx_fdtab.slot),
		    PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (slot == MAP_FAILED)
		goto err;
	ret = rsx_sock_pool_init(n);
	if (ret)
		goto err_unmap;
	rsx_fdtab.slot = slot;
	atomic_store_explicit(&rsx_fdtab.size, n, memory_order_release);
	atomic_store(&rsx_fdtab_state, 2);
	return 0;

err_unmap:
	munmap(slot, (size_t)n * sizeof(*rsx_fdtab.slot));
err:
	atomic_store(&rsx_fdtab_state, 3);
	return -ENOMEM;
}

int rsx_fdtab_ready(void)
{
	if (likely(atomic_load_explicit(&rsx_fdtab_state,
					memory_order_acquire) == 2))
		return 0;
	return rsx_fdtab_init();
}

unsigned int rsx_fdtab_hiwater(void)
{
	return atomic_load_explicit(&rsx_fdtab.hiwater, memory_order_acquire);
}

static void rsx_fd_note_hiwater(int fd)
{
	unsigned int hw = atomic_load(&rsx_fdtab.hiwater);

	while (hw < (unsigned int)fd + 1 &&
	       !atomic_compare_exchange_weak(&rsx_fdtab.hiwater, &hw, fd + 1))
		;
}

static void rsx_fd_drop(struct rsx_sock *old, int stale)
{
	if (!old)
		return;
	if (stale)
		rsx_stat_inc(RSX_STAT_stale_cleared);
	rsx_sock_put(old);
}

/*
 * Puts s (whose reference the caller hands over) at fd.  Whatever the slot
 * held belonged to a descriptor that was closed behind our back (fclose() of
 * an fdopen()ed socket, a raw syscall): that is dropped.
 */
int rsx_fd_install(int fd, struct rsx_sock *s)
{
	struct rsx_sock *old;

	if ((unsigned int)fd >= atomic_load(&rsx_fdtab.size)) {
		rsx_sock_put(s);
		rsx_stat_inc(RSX_STAT_untracked_full);
		return -EMFILE;
	}
	rsx_fd_note_hiwater(fd);
	old = atomic_exchange(&rsx_fdtab.slot[fd], s);
	rsx_stat_inc(RSX_STAT_fds_tracked);
	rsx_fd_drop(old, 1);
	return 0;
}

/* Empties fd's slot and hands its reference to the caller. */
struct rsx_sock *rsx_fd_take(int fd)
{
	if ((unsigned int)fd >= atomic_load(&rsx_fdtab.size))
		return NULL;
	return atomic_exchange(&rsx_fdtab.slot[fd], NULL);
}

/* Puts back what rsx_fd_take() removed, unless the slot was reused since. */
int rsx_fd_restore(int fd, struct rsx_sock *s)
{
	struct rsx_sock *expect = NULL;

	if (!s)
		return 0;
	if (atomic_compare_exchange_strong(&rsx_fdtab.slot[fd], &expect, s))
		return 0;
	rsx_sock_put(s);
	return -EBUSY;
}

/* A descriptor we do not track was created: forget any stale entry. */
void rsx_fd_clear(int fd)
{
	struct rsx_sock *old = rsx_fd_peek(fd);

	if (likely(!old))
		return;
	rsx_fd_drop(rsx_fd_take(fd), 1);
}

/* The object behind fd with a reference held, or NULL. */
struct rsx_sock *rsx_fd_get(int fd)
{
	struct rsx_sock *s;

	for (;;) {
		s = rsx_fd_peek(fd);
		if (!s || s->kind == RSX_SOCK_PRIVATE)
			return NULL;
		if (!rsx_sock_tryget(s))
			continue;
		if (rsx_fd_peek(fd) == s)
			return s;
		rsx_sock_put(s);
	}
}

/*
 * Private descriptors go near the top of the soft limit, so that they never
 * take the low numbers a program expects (and select()'s FD_SETSIZE).
 */
int rsx_fd_private_base(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY ||
	    rl.rlim_cur > 65536)
		return 65536 - 64;
	return rl.rlim_cur > 256 ? (int)rl.rlim_cur - 64 : 3;
}

/*
 * Moves one of our descriptors up among rsockx's own, out of the numbers a
 * program expects (and out of select()'s reach).  Returns the new number,
 * or fd itself when it cannot move, or fd < 0 unchanged.
 */
int rsx_fd_move_high(int fd)
{
	int hi;

	if (fd < 0)
		return fd;
	hi = rsx_libc.fcntl(fd, F_DUPFD_CLOEXEC, rsx_fd_private_base());
	if (hi < 0)
		return fd;
	rsx_libc.close(fd);
	return hi;
}

/* One of ours from now on: up among rsockx's own, and private. */
int rsx_fd_hide(int fd)
{
	fd = rsx_fd_move_high(fd);
	rsx_fd_set_private(fd, NULL);
	return fd;
}

void rsx_fd_set_private(int fd, int *owner)
{
	int i;

	if (fd < 0 || rsx_fdtab_ready())
		return;
	if (owner) {
		pthread_mutex_lock(&rsx_private_lock);
		for (i = 0; i < RSX_PRIVATE_OWNERS; i++) {
			if (rsx_private_owner[i].owner)
				continue;
			rsx_private_owner[i].owner = owner;
			atomic_store(&rsx_private_owner[i].fd, fd);
			break;
		}
		pthread_mutex_unlock(&rsx_private_lock);
	}
	rsx_fd_install(fd, &rsx_private_sock);
}

/* One of ours is about to be closed: its number is the program's again. */
void rsx_fd_private_drop(int fd)
{
	int i;

	if (fd < 0)
		return;
	if (rsx_fd_is_private(fd))
		rsx_fd_take(fd);
	pthread_mutex_lock(&rsx_private_lock);
	for (i = 0; i < RSX_PRIVATE_OWNERS; i++) {
		if (rsx_private_owner[i].owner &&
		    atomic_load(&rsx_private_owner[i].fd) == fd) {
			rsx_private_owner[i].owner = NULL;
			atomic_store(&rsx_private_owner[i].fd, -1);
		}
	}
	pthread_mutex_unlock(&rsx_private_lock);
}

void rsx_fd_private_close(int fd)
{
	if (fd < 0)
		return;
	rsx_fd_private_drop(fd);
	rsx_libc.close(fd);
}

int rsx_fd_is_private(int fd)
{
	struct rsx_sock *s = rsx_fd_peek(fd);

	return s && s->kind == RSX_SOCK_PRIVATE;
}

/* Smallest private fd >= from, or -1. */
int rsx_fd_private_next(int from)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();

	for (fd = from < 0 ? 0 : from; fd < hw; fd++)
		if (rsx_fd_is_private(fd))
			return fd;
	return -1;
}

/*
 * The program wants fd (dup2() onto it): move our descriptor out of the way
 * if its owner can follow, else refuse with -EBUSY (what dup2() itself says
 * when it loses a race for the number).
 */
int rsx_fd_private_relocate(int fd)
{
	int i, nfd, ret = -EBUSY;

	pthread_mutex_lock(&rsx_private_lock);
	for (i = 0; i < RSX_PRIVATE_OWNERS; i++) {
		if (!rsx_private_owner[i].owner ||
		    atomic_load(&rsx_private_owner[i].fd) != fd)
			continue;
		nfd = rsx_libc.fcntl(fd, F_DUPFD_CLOEXEC, rsx_fd_private_base());
		if (nfd < 0 || nfd == fd)
			break;
		rsx_fd_install(nfd, &rsx_private_sock);
		*rsx_private_owner[i].owner = nfd;
		atomic_store(&rsx_private_owner[i].fd, nfd);
		rsx_fd_take(fd);
		rsx_libc.close(fd);
		ret = 0;
		break;
	}
	pthread_mutex_unlock(&rsx_private_lock);
	return ret;
}
