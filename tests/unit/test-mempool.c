// SPDX-License-Identifier: MIT
/*
 * The chunk allocator of src/mempool.c, without a device: hooks count the
 * mappings and discards.  Only the carving logic is tested here; the
 * connections' registrations run in the VM (tests/rdma/load.sh, evil.sh).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "mempool.h"
#include "stats.h"
#include "tap.h"

static int n_map, n_unmap, n_discard, fail_map;
static size_t last_map_len;

/* the library's own mapping: what fork does with it is under test */
static void *f_map(size_t len)
{
	void *p = fail_map ? NULL : rsx_mempool_map(len);

	if (!p)
		return NULL;
	n_map++;
	last_map_len = len;
	return p;
}

/*
 * In /proc/self/smaps: 0 when no mapping holds addr, 1 when one does, 2
 * when it is also kept out of fork children (VmFlags "dc").
 */
static int map_state(const void *addr)
{
	unsigned long lo, hi, a = (unsigned long)addr;
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0, ret = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			in = a >= lo && a < hi;
			if (in)
				ret = 1;
		} else if (in && !strncmp(line, "VmFlags:", 8)) {
			if (strstr(line, " dc"))
				ret = 2;
			break;
		}
	}
	fclose(f);
	return ret;
}

static void f_unmap(void *addr, size_t len)
{
	n_unmap++;
	munmap(addr, len);
}

static void f_discard(void *addr, size_t len)
{
	n_discard++;
	madvise(addr, len, MADV_DONTNEED);
}

static const struct rsx_mp_ops fake = {
	.map = f_map, .unmap = f_unmap, .discard = f_discard,
};

#define RING (256u * 1024 + 64)		/* a default ring and its control */
#define NB 40

static int overlap(const struct rsx_mp_block *a, const struct rsx_mp_block *b)
{
	return a->addr < b->addr + b->len && b->addr < a->addr + a->len;
}

struct thr {
	struct rsx_mempool *mp;
	int id;
	int bad;
};

static void *worker(void *arg)
{
	struct thr *t = arg;
	struct rsx_mp_block b[8];
	int i, k;

	for (i = 0; i < 200; i++) {
		for (k = 0; k < 8; k++) {
			if (rsx_mempool_alloc(t->mp, 4096 * (1 + k % 3), &b[k])) {
				t->bad++;
				return NULL;
			}
			memset(b[k].addr, t->id, 64);
		}
		for (k = 0; k < 8; k++) {
			if (b[k].addr[63] != t->id)
				t->bad++;	/* another thread got the same block */
			rsx_mempool_free(t->mp, &b[k]);
		}
	}
	return NULL;
}

int main(void)
{
	struct rsx_mempool mp, rp;
	struct rsx_mp_block b[NB], x;
	long pg = sysconf(_SC_PAGESIZE);
	int i, j, per, good, st;
	struct thr t[4];
	pthread_t th[4];
	pid_t pid;

	rsx_mempool_init(&mp, "test", &fake);

	/* --- carving --- */
	ok(!rsx_mempool_alloc(&mp, RING, &b[0]), "a ring-sized block");
	is_int(b[0].len, (RING + pg - 1) / pg * pg, "rounded up to whole pages");
	ok((uintptr_t)b[0].addr % pg == 0, "page-aligned");
	is_int(n_map, 1, "one mapping for the chunk");
	is_int(last_map_len, b[0].len, "the first chunk is one block: the"
	       " first connection maps no more than a buffer of its own");
	for (i = 1; i < NB; i++)
		if (rsx_mempool_alloc(&mp, RING, &b[i]))
			break;
	is_int(i, NB, "%d blocks", NB);
	/* chunks of 1, 1, 2, 4, 8, 15 (4 MiB at most), 15 blocks */
	per = RSX_MP_CHUNK / b[0].len;
	is_int(per, 15, "a 4 MiB chunk holds 15 rings of 256 KiB");
	is_int(n_map, 7, "7 mappings for %d blocks", NB);
	is_int(last_map_len, per * b[0].len, "chunks grow to 4 MiB in whole"
	       " blocks");
	good = 1;
	for (i = 0; i < NB; i++) {
		if (b[i].addr < b[i].chunk->base ||
		    b[i].addr + b[i].len > b[i].chunk->base + b[i].chunk->len)
			good = 0;
		for (j = 0; j < i; j++)
			if (overlap(&b[i], &b[j]))
				good = 0;
	}
	ok(good, "each block lies in its chunk, none overlapping");
	is_int(rsx_stat_get(RSX_STAT_pool_chunks), 7, "pool_chunks counts them");
	is_int(rsx_stat_get(RSX_STAT_pool_bytes), 46ull * b[0].len,
	       "pool_bytes is the level");

	/* --- release policy: empty chunks go at once --- */
	x = b[NB - 1];
	rsx_mempool_free(&mp, &b[NB - 1]);
	ok(!b[NB - 1].addr && !b[NB - 1].chunk,
	   "a freed block descriptor is cleared");
	ok(!rsx_mempool_alloc(&mp, RING, &b[NB - 1]) &&
	   b[NB - 1].addr == x.addr, "the freed block is taken again");
	for (i = 0; i < NB; i++)
		rsx_mempool_free(&mp, &b[i]);
	is_int(n_unmap, 7, "every emptied chunk unmapped");
	is_int(rsx_stat_get(RSX_STAT_pool_chunks_freed), 7,
	       "pool_chunks_freed");
	is_int(rsx_stat_get(RSX_STAT_pool_bytes), 0,
	       "pool_bytes back to 0: an idle process pins nothing");
	is_int(n_discard, NB + 1, "every freed block discarded (zeros for "
	       "the next user, no resident pages)");

	/* --- a pool that keeps an empty chunk re-carves it --- */
	mp.keep = 1;
	ok(!rsx_mempool_alloc(&mp, RING, &b[0]), "keep 1: a block");
	rsx_mempool_free(&mp, &b[0]);
	is_int(n_unmap, 7, "its emptied chunk is kept");
	i = n_map;
	ok(!rsx_mempool_alloc(&mp, 16384 + 64, &b[0]), "a small block");
	is_int(b[0].len, (16384 + 64 + pg - 1) / pg * pg, "its size");
	ok(!rsx_mempool_alloc(&mp, 16384 + 64, &b[1]) && !overlap(&b[0], &b[1]),
	   "a second one beside it");
	is_int(n_map, i, "both carved from the kept chunk, no mapping");
	rsx_mempool_free(&mp, &b[0]);
	rsx_mempool_free(&mp, &b[1]);
	mp.keep = 0;
	ok(!rsx_mempool_alloc(&mp, RING, &b[0]), "keep 0 again: the kept"
	   " chunk serves a ring");
	rsx_mempool_free(&mp, &b[0]);
	is_int(n_map, n_unmap, "... and goes when it empties");

	/* --- larger than a chunk: exactly one block --- */
	ok(!rsx_mempool_alloc(&mp, 6u << 20, &b[0]), "a 6 MiB block");
	is_int(last_map_len, 6u << 20, "its chunk is its own size, no more"
	       " pinned");
	rsx_mempool_free(&mp, &b[0]);
	rsx_mempool_free(&mp, &b[0]);	/* a cleared descriptor: nothing */
	is_int(n_map, n_unmap, "nothing left mapped");

	/* --- failures --- */
	fail_map = 1;
	is_int(rsx_mempool_alloc(&mp, RING, &b[1]), -ENOMEM,
	       "a failed mapping: -ENOMEM");
	is_int(n_map, n_unmap, "... and nothing is left mapped");
	fail_map = 0;
	is_int(rsx_mempool_alloc(&mp, 0, &b[0]), -EINVAL, "0 bytes: -EINVAL");

	/* --- RSOCKX_PIN_MAX below a grown chunk: chunks of one block --- */
	for (i = 0; i < 16; i++)
		rsx_mempool_alloc(&mp, RING, &b[i]);
	rsx_config.pin_max = rsx_stat_get(RSX_STAT_pool_bytes) + (1u << 20);
	j = n_map;
	ok(!rsx_mempool_alloc(&mp, RING, &b[16]), "4 MiB more would pass the"
	   " cap: a ring-sized block all the same");
	is_int(last_map_len, b[16].len, "... in a chunk of its own size");
	is_int(n_map, j + 1, "... mapped once");
	is_int(rsx_mempool_alloc(&mp, 2u << 20, &b[17]), -ENOSR,
	       "a block beyond the cap: -ENOSR");
	for (i = 0; i < 17; i++)
		rsx_mempool_free(&mp, &b[i]);
	rsx_config.pin_max = 0;

	/* --- a second pool (rings): freed blocks read as zeros --- */
	rsx_mempool_init(&rp, "ring", &fake);
	n_discard = 0;
	ok(!rsx_mempool_alloc(&rp, RING, &b[0]), "a ring from the ring pool");
	memset(b[0].addr, 0xa5, b[0].len);
	ok(!rsx_mempool_alloc(&rp, RING, &b[1]), "a second ring");
	x = b[0];
	rsx_mempool_free(&rp, &b[0]);
	is_int(n_discard, 1, "the freed ring is discarded");
	ok(!rsx_mempool_alloc(&rp, RING, &b[0]) && b[0].addr == x.addr,
	   "the next ring takes the same block");
	good = 1;
	for (i = 0; i < (int)b[0].len; i++)
		if (b[0].addr[i])
			good = 0;
	ok(good, "... and sees no byte of the old one (control area"
	   " included)");
	rsx_mempool_free(&rp, &b[0]);
	rsx_mempool_free(&rp, &b[1]);

	/* --- threads --- */
	for (i = 0; i < 4; i++) {
		t[i] = (struct thr){ .mp = &rp, .id = i + 1 };
		pthread_create(&th[i], NULL, worker, &t[i]);
	}
	good = 0;
	for (i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		good += t[i].bad;
	}
	is_int(good, 0, "4 threads allocating and freeing: no block shared");

	/* --- fork: the child never reuses the parent's chunks --- */
	ok(!rsx_mempool_alloc(&mp, RING, &b[0]), "a block before fork");
	is_int(map_state(b[0].addr), 2, "its chunk is kept out of fork "
	       "children (MADV_DONTFORK: smaps VmFlags dc)");
	fflush(stdout);
	pid = fork();
	if (pid == 0)
		_exit(map_state(b[0].addr));
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "a fork child has no copy of it (a write of the parent's can "
	   "never move a page away from the device)");
	pid = fork();
	if (pid == 0) {
		i = n_map;
		if (rsx_mempool_alloc(&mp, RING, &b[1]))
			_exit(2);
		_exit(n_map == i + 1 && b[1].chunk != b[0].chunk ? 0 : 1);
	}
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "a fork child maps a chunk of its own");
	rsx_mempool_free(&mp, &b[0]);

	rsx_mempool_destroy(&rp);
	rsx_mempool_destroy(&mp);
	is_int(n_map, n_unmap, "every chunk unmapped at the end");
	is_int(rsx_stat_get(RSX_STAT_pool_bytes), 0, "pool_bytes 0");
	return done_testing();
}
