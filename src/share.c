// SPDX-License-Identifier: MIT
/* Sockets that fork() shared before an upgrade, or after one (share.h). */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fdtab.h"
#include "share.h"
#include "stats.h"

enum {
	RSX_SHARE_FREE = 0,
	RSX_SHARE_USED,
};

#define RSX_SHARE(seq, st) ((uint32_t)(seq) << 8 | (st))

struct rsx_share_slot {
	_Atomic uint32_t word;
	_Atomic int32_t holders;	/* processes that hold the socket */
	_Atomic int32_t mover;		/* share.h */
};

/* Mapped by the first fork that shares a socket; the family inherits it. */
static struct rsx_share_slot *rsx_share_page;
static pid_t rsx_share_self;

/* s's slot, or NULL when it has none (or one that has moved on). */
static struct rsx_share_slot *rsx_share_slot(const struct rsx_sock *s)
{
	struct rsx_share_slot *sl;

	if (!rsx_share_page || s->share_slot < 0)
		return NULL;
	sl = &rsx_share_page[s->share_slot];
	if (atomic_load(&sl->word) != RSX_SHARE(s->share_seq, RSX_SHARE_USED))
		return NULL;
	return sl;
}

static void rsx_share_free(struct rsx_sock *s, struct rsx_share_slot *sl)
{
	atomic_store(&sl->word, RSX_SHARE(s->share_seq, RSX_SHARE_FREE));
	s->share_slot = -1;
}

/*
 * Right before fork(), under s->lock: the child will hold s too.  Returns
 * 0, or -errno when s has no slot (and stays TCP once shared).
 */
int rsx_share_fork(struct rsx_sock *s)
{
	struct rsx_share_slot *sl = rsx_share_slot(s);
	uint32_t w;
	void *m;
	int i;

	if (sl) {
		atomic_fetch_add(&sl->holders, 1);
		return 0;
	}
	if (s->shared)
		return -EBUSY;	/* shared before, without a slot */
	if (!rsx_share_page) {
		m = mmap(NULL, RSX_SHARE_SLOTS * sizeof(*sl),
			 PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			 -1, 0);
		if (m == MAP_FAILED)
			return -errno;
		rsx_share_page = m;
		rsx_share_self = getpid();
	}
	for (i = 0; i < RSX_SHARE_SLOTS; i++) {
		sl = &rsx_share_page[i];
		w = atomic_load(&sl->word);
		if ((w & 0xff) != RSX_SHARE_FREE ||
		    !atomic_compare_exchange_strong(&sl->word, &w,
				RSX_SHARE((w >> 8) + 1, RSX_SHARE_USED)))
			continue;
		atomic_store(&sl->holders, 2);
		atomic_store(&sl->mover, 0);
		s->share_slot = i;
		s->share_seq = (w >> 8) + 1;
		return 0;
	}
	return -ENOSPC;
}

/*
 * The fork that rsx_share_fork() prepared for failed: one holder less, and
 * s is this process's own again when that leaves it alone (a first fork).
 */
void rsx_share_unfork(struct rsx_sock *s)
{
	struct rsx_share_slot *sl = rsx_share_slot(s);
	int32_t m;

	if (!sl || atomic_fetch_sub(&sl->holders, 1) != 2)
		return;
	m = atomic_load(&sl->mover);
	if (!m || m == rsx_share_self) {
		rsx_share_free(s, sl);
		s->shared = 0;
	}
}

/*
 * Under s->lock, s->shared: this process moved bytes of s on TCP.  While
 * another process holds s too, its count of them is wrong from now on.
 */
void rsx_share_moved(struct rsx_sock *s)
{
	struct rsx_share_slot *sl = rsx_share_slot(s);
	int32_t m;

	if (!sl || atomic_load(&sl->holders) == 1)
		return;
	m = atomic_load(&sl->mover);
	if (m == rsx_share_self || m == -1)
		return;
	if (m || !atomic_compare_exchange_strong(&sl->mover, &m,
						 rsx_share_self))
		atomic_store(&sl->mover, -1);
}

/*
 * Under s->lock: this process stops counting s (it goes to plain TCP), so
 * bytes it may move from now on are nobody's to count: no holder's count
 * holds any more.
 */
void rsx_share_taint(struct rsx_sock *s)
{
	struct rsx_share_slot *sl = rsx_share_slot(s);

	if (sl)
		atomic_store(&sl->mover, -1);
}

/*
 * Under s->lock: is this process the only holder of s, its counts the
 * stream's?  Then s is its own again (1).  The holders only grow by a
 * fork of a holder, and the last other one dropped out after its last
 * move, so neither can change under the answer.
 */
int rsx_share_alone(struct rsx_sock *s)
{
	struct rsx_share_slot *sl = rsx_share_slot(s);
	int32_t m;

	if (!sl || atomic_load(&sl->holders) != 1)
		return 0;
	m = atomic_load(&sl->mover);
	if (m && m != rsx_share_self)
		return 0;
	rsx_share_free(s, sl);
	s->shared = 0;
	rsx_stat_inc(RSX_STAT_fork_alone);
	return 1;
}

/* This process lets go of s: its last descriptor closed, or exit. */
void rsx_share_drop(struct rsx_sock *s)
{
	struct rsx_share_slot *sl = rsx_share_slot(s);

	if (!sl)
		return;
	if (atomic_fetch_sub(&sl->holders, 1) == 1)
		rsx_share_free(s, sl);
	s->share_slot = -1;
}

void rsx_share_fork_child(void)
{
	if (rsx_share_page)
		rsx_share_self = getpid();
}

/*
 * exit(), _exit(): the process lets go of every socket it shares, though
 * it never closed them (a fork-per-connection parent that exits first).
 */
void rsx_share_exit(void)
{
	unsigned int fd, hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;

	if (!rsx_share_page)
		return;
	for (fd = 0; fd < hw; fd++) {
		s = rsx_fd_peek(fd);
		if (s && s->kind == RSX_SOCK_TCP && s->share_slot >= 0)
			rsx_share_drop(s);
	}
}
