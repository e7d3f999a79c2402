// SPDX-License-Identifier: MIT
/* Upgraded connections that fork() shared (handoff.h). */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "clock.h"
#include "fdtab.h"
#include "handoff.h"
#include "libc.h"
#include "log.h"

enum {
	RSX_HO_FREE = 0,
	RSX_HO_SHARED,		/* on the parent's QP; children leave it */
	RSX_HO_ASKED,		/* a child wants to use it */
	RSX_HO_TCP,		/* the parent took it back to TCP */
	RSX_HO_LOST,		/* ... could not, and shut it down */
};

#define RSX_HO(seq, st) ((uint32_t)(seq) << 8 | (st))

struct rsx_ho_slot {
	_Atomic uint32_t word;
	int fd;			/* the parent's descriptor at the fork */
	struct rsx_sock *s;	/* the parent's socket (type-stable, sock.h) */
	_Atomic uint32_t cseq;	/* n is the downgrade's of seq cseq (handoff.h) */
	struct rsx_ho_counts n;
};

struct rsx_handoff {
	_Atomic uint32_t asked;	/* slots in ASKED: the parent has work */
	int bell;		/* the parent's CM bell (an eventfd) */
	pid_t owner;
	struct rsx_ho_slot slot[RSX_HANDOFF_SLOTS];
};

/* This process's page, for the connections it shares with its children. */
static struct rsx_handoff *rsx_ho;

static int rsx_ho_mine(const struct rsx_sock *s)
{
	return rsx_ho && s->ho_page == rsx_ho && s->ho_slot >= 0 &&
	       (atomic_load(&rsx_ho->slot[s->ho_slot].word) >> 8) == s->ho_seq;
}

static uint32_t rsx_ho_state(const struct rsx_sock *s)
{
	return atomic_load(&rsx_ho->slot[s->ho_slot].word) & 0xff;
}

/*
 * Right before fork(), under s->lock: s is upgraded and the child will hold
 * it too.  A slot of its own, kept across later forks.  Returns 0, or
 * -errno when the child will find no slot (and get EIO on the socket).
 */
int rsx_handoff_share(struct rsx_sock *s, int fd, int bell)
{
	struct rsx_ho_slot *sl;
	uint32_t w;
	void *m;
	int i;

	if (rsx_ho_mine(s))
		return 0;
	if (!rsx_ho) {
		m = mmap(NULL, sizeof(*rsx_ho), PROT_READ | PROT_WRITE,
			 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return -errno;
		rsx_ho = m;
		rsx_ho->bell = bell;
		rsx_ho->owner = getpid();
	}
	for (i = 0; i < RSX_HANDOFF_SLOTS; i++) {
		sl = &rsx_ho->slot[i];
		w = atomic_load(&sl->word);
		if ((w & 0xff) != RSX_HO_FREE)
			continue;
		atomic_store(&sl->cseq, 0);
		sl->fd = fd;
		sl->s = s;
		s->ho_page = rsx_ho;
		s->ho_slot = i;
		s->ho_seq = (w >> 8) + 1;
		atomic_store(&sl->word, RSX_HO(s->ho_seq, RSX_HO_SHARED));
		return 0;
	}
	return -ENOSPC;
}

/* The parent: do its children rely on it to downgrade s? */
int rsx_handoff_live(const struct rsx_sock *s)
{
	uint32_t st;

	if (!rsx_ho_mine(s))
		return 0;
	st = rsx_ho_state(s);
	return st == RSX_HO_SHARED || st == RSX_HO_ASKED;
}

/* The parent, right before rsx_handoff_done(s, 1): where the stream stands. */
void rsx_handoff_counts(struct rsx_sock *s, const struct rsx_ho_counts *n)
{
	struct rsx_ho_slot *sl;

	if (!rsx_handoff_live(s))
		return;
	sl = &rsx_ho->slot[s->ho_slot];
	sl->n = *n;
	atomic_store(&sl->cseq, s->ho_seq);
}

/*
 * The parent left its QP: the children may use TCP (ok), or find the
 * socket shut down.  Whatever way s went back to TCP, the children learn
 * it here; only a downgrade (ours or the peer's) says ok.
 */
void rsx_handoff_done(struct rsx_sock *s, int ok)
{
	struct rsx_ho_slot *sl;
	uint32_t w;

	if (!rsx_handoff_live(s))
		return;
	sl = &rsx_ho->slot[s->ho_slot];
	w = atomic_load(&sl->word);
	if ((w & 0xff) == RSX_HO_ASKED)
		atomic_fetch_sub(&rsx_ho->asked, 1);
	atomic_store(&sl->word,
		     RSX_HO(s->ho_seq, ok ? RSX_HO_TCP : RSX_HO_LOST));
	rsx_dbg("fork hand-off of slot %d: %s", s->ho_slot,
		ok ? "TCP" : "lost");
}

/* The parent closes s for good: its slot is free again. */
void rsx_handoff_release(struct rsx_sock *s)
{
	if (!rsx_ho_mine(s))
		return;
	rsx_handoff_done(s, 0);	/* a live one is done by now; see above */
	atomic_store(&rsx_ho->slot[s->ho_slot].word,
		     RSX_HO(s->ho_seq, RSX_HO_FREE));
	s->ho_page = NULL;
	s->ho_slot = -1;
}

/* Has this process shared a connection with a fork child? */
int rsx_handoff_have(void)
{
	return rsx_ho != NULL;
}

/*
 * The parent's CM thread: the next socket from *slot on that a child asked
 * for, with a reference and the descriptor to use (*fd); NULL at the end.
 * A slot whose socket is gone (closed since: its close answered) is
 * answered "lost".
 */
struct rsx_sock *rsx_handoff_next(int *slot, int *fd)
{
	struct rsx_ho_slot *sl;
	struct rsx_sock *s;
	unsigned int i, hw;
	uint32_t w;

	if (!rsx_ho || !atomic_load(&rsx_ho->asked))
		return NULL;
	for (; *slot < RSX_HANDOFF_SLOTS; (*slot)++) {
		sl = &rsx_ho->slot[*slot];
		w = atomic_load(&sl->word);
		if ((w & 0xff) != RSX_HO_ASKED)
			continue;
		s = sl->s;
		if (!rsx_sock_tryget(s))
			goto stale;
		if (s->ho_page != rsx_ho || s->ho_slot != *slot ||
		    s->ho_seq != w >> 8) {
			rsx_sock_put(s);
			goto stale;
		}
		*fd = sl->fd;
		if (rsx_fd_peek(*fd) != s) {
			hw = rsx_fdtab_hiwater();
			for (i = 0; i < hw && rsx_fd_peek(i) != s; i++)
				;
			*fd = i < hw ? (int)i : s->orphan_fd;
		}
		(*slot)++;
		return s;
stale:
		if (atomic_compare_exchange_strong(&sl->word, &w,
				RSX_HO(w >> 8, RSX_HO_LOST)))
			atomic_fetch_sub(&rsx_ho->asked, 1);
	}
	return NULL;
}

static int rsx_ho_owner_gone(const struct rsx_handoff *ho)
{
	return kill(ho->owner, 0) && errno == ESRCH;
}

/*
 * A child is about to use s, which its parent (or an ancestor) holds on a
 * QP: ask for TCP and wait for the answer, at most wait_ms.  Returns 0
 * when s is plain TCP now, -EIO when it cannot be used (no slot, the
 * parent gone or lost it).
 */
int rsx_handoff_ask(struct rsx_sock *s, int wait_ms)
{
	struct rsx_handoff *ho = s->ho_page;
	int64_t deadline = rsx_now_ms() + wait_ms;
	struct rsx_ho_slot *sl;
	uint64_t one = 1;
	uint32_t w;

	if (!ho || s->ho_slot < 0)
		return -EIO;
	sl = &ho->slot[s->ho_slot];
	for (;;) {
		w = atomic_load(&sl->word);
		if (w >> 8 != s->ho_seq)
			return 0;	/* closed by the parent long ago */
		switch (w & 0xff) {
		case RSX_HO_FREE:	/* the parent closed it (release) */
		case RSX_HO_TCP:
			return 0;
		case RSX_HO_LOST:
			return -EIO;
		case RSX_HO_SHARED:
			if (!atomic_compare_exchange_strong(&sl->word, &w,
					RSX_HO(s->ho_seq, RSX_HO_ASKED)))
				continue;
			atomic_fetch_add(&ho->asked, 1);
			if (rsx_libc.write(ho->bell, &one, sizeof(one)) < 0)
				rsx_dbg("fork hand-off bell: %s",
					strerror(errno));
			break;
		}
		if (rsx_now_ms() > deadline || rsx_ho_owner_gone(ho)) {
			rsx_warn("a connection of the parent process was not "
				 "handed over (%s)", rsx_now_ms() > deadline ?
				 "no answer" : "the parent is gone");
			return -EIO;
		}
		usleep(500);
	}
}

/*
 * A child, once rsx_handoff_ask() said TCP: where the parent's downgrade
 * left the stream.  -ENOENT when it did not say, or the slot moved on to
 * another socket meanwhile (the copy is then not trusted).
 */
int rsx_handoff_recount(const struct rsx_sock *s, struct rsx_ho_counts *n)
{
	struct rsx_handoff *ho = s->ho_page;
	struct rsx_ho_slot *sl;

	if (!ho || s->ho_slot < 0)
		return -ENOENT;
	sl = &ho->slot[s->ho_slot];
	if (atomic_load(&sl->cseq) != s->ho_seq)
		return -ENOENT;
	*n = sl->n;
	if (atomic_load(&sl->cseq) != s->ho_seq ||
	    atomic_load(&sl->word) >> 8 != s->ho_seq)
		return -ENOENT;
	return 0;
}

/* The parent's page is the parent's: a child makes its own when it forks. */
void rsx_handoff_fork_child(void)
{
	rsx_ho = NULL;
}
