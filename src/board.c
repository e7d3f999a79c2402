// SPDX-License-Identifier: MIT
/* The family's board of out-of-band requests (board.h). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "board.h"
#include "libc.h"
#include "log.h"

enum {
	RSX_SLOT_FREE = 0,
	RSX_SLOT_FILL,		/* the poster writes it */
	RSX_SLOT_POSTED,
	RSX_SLOT_TAKEN,		/* a taker upgrades */
	RSX_SLOT_ANSWERED,
};

#define RSX_SLOT(seq, st) ((uint32_t)(seq) << 8 | (st))
#define RSX_TAKER_GRACE_MS 2000

struct rsx_board_slot {
	_Atomic uint32_t word;
	uint16_t peer_port;
	uint16_t local_port;
	uint8_t peer_addr[16];
	int64_t expires;
	struct rsx_hello h;
	uint8_t answer[RSX_WIRE_LEN];
	/* same host (local.h): the client's pid, the taker's descriptors */
	uint8_t shm;
	int32_t cpid;
	int32_t tpid;
	int32_t tfds[4];
	uint64_t tino;
};

struct rsx_board {
	_Atomic uint32_t posts;		/* news for takers */
	int bell;			/* the poster's eventfd, family-wide */
	struct rsx_board_slot slot[RSX_BOARD_SLOTS];
};

/* Mapped shared before the listener forked: its descendants inherit it. */
static struct rsx_board *rsx_board;

int rsx_board_create(int bell)
{
	void *m;

	if (rsx_board)
		return 0;
	m = mmap(NULL, sizeof(*rsx_board), PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return -errno;
	rsx_board = m;
	rsx_board->bell = bell;
	return 0;
}

/*
 * The next rsx_board_create() makes a board of our own, for the family
 * forked from then on: the one we inherited stays mapped (a thread may be
 * looking at it), unused.
 */
void rsx_board_drop(void)
{
	rsx_board = NULL;
}

int rsx_board_have(void)
{
	return rsx_board != NULL;
}

/* The CM thread: p's request goes up for the family. */
int rsx_board_post(struct rsx_oob_pend *p)
{
	struct rsx_board_slot *sl;
	uint32_t w;
	int i;

	if (!rsx_board)
		return -ENOENT;
	for (i = 0; i < RSX_BOARD_SLOTS; i++) {
		sl = &rsx_board->slot[i];
		w = atomic_load(&sl->word);
		if ((w & 0xff) != RSX_SLOT_FREE ||
		    !atomic_compare_exchange_strong(&sl->word, &w,
				RSX_SLOT((w >> 8) + 1, RSX_SLOT_FILL)))
			continue;
		p->slot = i;
		p->seq = (w >> 8) + 1;
		sl->peer_port = p->peer_port;
		sl->local_port = p->local_port;
		memcpy(sl->peer_addr, p->peer_addr, 16);
		sl->expires = p->expires;
		sl->h = p->h;
		sl->shm = p->shm;
		sl->cpid = p->pid;
		atomic_store_explicit(&sl->word,
				      RSX_SLOT(p->seq, RSX_SLOT_POSTED),
				      memory_order_release);
		atomic_fetch_add(&rsx_board->posts, 1);
		return 0;
	}
	return -ENOSPC;
}

/*
 * The CM thread, for a request it posted: 1 when answered (p->answer
 * holds it), -1 when nobody answers (refuse it), 0 while it may still be.
 * p->slot < 0 afterwards when 1 or -1.
 */
int rsx_board_collect(struct rsx_oob_pend *p, int64_t now)
{
	struct rsx_board_slot *sl = &rsx_board->slot[p->slot];
	uint32_t w = atomic_load_explicit(&sl->word, memory_order_acquire);

	if (w == RSX_SLOT(p->seq, RSX_SLOT_ANSWERED)) {
		memcpy(p->answer, sl->answer, sizeof(p->answer));
		p->tpid = sl->tpid;
		memcpy(p->tfds, sl->tfds, sizeof(p->tfds));
		p->tino = sl->tino;
		atomic_store(&sl->word, RSX_SLOT(p->seq, RSX_SLOT_FREE));
		p->slot = -1;
		return 1;
	}
	if (now < p->expires)
		return 0;
	if (w == RSX_SLOT(p->seq, RSX_SLOT_POSTED) &&
	    atomic_compare_exchange_strong(&sl->word, &w,
				RSX_SLOT(p->seq, RSX_SLOT_FREE))) {
		p->slot = -1;
		return -1;
	}
	if (w == RSX_SLOT(p->seq, RSX_SLOT_TAKEN) &&
	    now < p->expires + RSX_TAKER_GRACE_MS)
		return 0;
	if (w == RSX_SLOT(p->seq, RSX_SLOT_ANSWERED))
		return rsx_board_collect(p, now);
	/* taken and never answered: its answer, should it come, is dropped */
	atomic_compare_exchange_strong(&sl->word, &w,
				       RSX_SLOT(p->seq, RSX_SLOT_FREE));
	p->slot = -1;
	return -1;
}

/* The poster takes its request back (its own process accepted it). */
int rsx_board_unpost(struct rsx_oob_pend *p)
{
	struct rsx_board_slot *sl = &rsx_board->slot[p->slot];
	uint32_t w = RSX_SLOT(p->seq, RSX_SLOT_POSTED);

	if (!atomic_compare_exchange_strong(&sl->word, &w,
				RSX_SLOT(p->seq, RSX_SLOT_FREE)))
		return -EBUSY;
	p->slot = -1;
	return 0;
}

/* Any process of the family: a posted request that names s, taken. */
struct rsx_oob_pend *rsx_board_take(const struct rsx_sock *s)
{
	struct rsx_board_slot *sl, copy;
	struct rsx_oob_pend *p;
	uint32_t w;
	int i;

	if (!rsx_board)
		return NULL;
	for (i = 0; i < RSX_BOARD_SLOTS; i++) {
		sl = &rsx_board->slot[i];
		w = atomic_load_explicit(&sl->word, memory_order_acquire);
		if ((w & 0xff) != RSX_SLOT_POSTED)
			continue;
		memcpy(&copy, sl, sizeof(copy));
		if (!rsx_oob_names(s, copy.peer_addr, copy.peer_port,
				   copy.local_port))
			continue;
		p = rsx_oob_pend_new();
		if (!p)
			return NULL;
		/* a copy torn by a repost fails here: its word moved on */
		if (!atomic_compare_exchange_strong(&sl->word, &w,
				RSX_SLOT(w >> 8, RSX_SLOT_TAKEN))) {
			free(p);
			continue;
		}
		p->type = RSX_MSG_HELLO;
		p->h = copy.h;
		p->shm = copy.shm;
		p->pid = copy.cpid;
		p->expires = copy.expires;
		p->slot = i;
		p->seq = w >> 8;
		return p;
	}
	return NULL;
}

/* Has anything been posted since *seen?  One shared load when not. */
int rsx_board_news(uint32_t *seen)
{
	uint32_t v;

	if (!rsx_board)
		return 0;
	v = atomic_load_explicit(&rsx_board->posts, memory_order_relaxed);
	if (v == *seen)
		return 0;
	*seen = v;
	return 1;
}

/* The taker's answer (in p->answer) goes to the poster. */
void rsx_board_answer(struct rsx_oob_pend *p)
{
	struct rsx_board_slot *sl = &rsx_board->slot[p->slot];
	uint32_t w = RSX_SLOT(p->seq, RSX_SLOT_TAKEN);
	uint64_t one = 1;

	memcpy(sl->answer, p->answer, sizeof(sl->answer));
	sl->tpid = p->tpid;
	memcpy(sl->tfds, p->tfds, sizeof(sl->tfds));
	sl->tino = p->tino;
	if (!atomic_compare_exchange_strong(&sl->word, &w,
				RSX_SLOT(p->seq, RSX_SLOT_ANSWERED)))
		return;		/* too late: the poster refused it */
	if (rsx_libc.write(rsx_board->bell, &one, sizeof(one)) < 0)
		rsx_dbg("board bell: %s", strerror(errno));
}
