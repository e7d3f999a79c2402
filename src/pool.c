// SPDX-License-Identifier: MIT
#include <errno.h>
#include <sys/mman.h>

#include "pool.h"

int rsx_pool_init(struct rsx_pool *p, size_t objsize, uint32_t max)
{
	size_t len;

	if (!max || !objsize)
		return -EINVAL;
	p->objsize = (objsize + 63) & ~(size_t)63;	/* no false sharing */
	p->max = max;
	len = p->objsize * max;
	p->base = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p->base == MAP_FAILED)
		goto err;
	p->next = mmap(NULL, sizeof(*p->next) * max, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p->next == MAP_FAILED)
		goto err_unmap_base;
	atomic_init(&p->bump, 0);
	atomic_init(&p->head, 0);
	atomic_init(&p->inuse, 0);
	return 0;

err_unmap_base:
	munmap(p->base, len);
err:
	p->base = NULL;
	p->next = NULL;
	return -ENOMEM;
}

/* Only for tests: the objects must not be referenced any more. */
void rsx_pool_destroy(struct rsx_pool *p)
{
	if (p->base)
		munmap(p->base, p->objsize * p->max);
	if (p->next)
		munmap(p->next, sizeof(*p->next) * p->max);
	p->base = NULL;
	p->next = NULL;
}

void *rsx_pool_get(struct rsx_pool *p)
{
	uint64_t head, nhead;
	uint32_t idx;

	head = atomic_load(&p->head);
	while ((uint32_t)head) {
		idx = (uint32_t)head - 1;
		nhead = ((head >> 32) + 1) << 32 | atomic_load(&p->next[idx]);
		if (atomic_compare_exchange_weak(&p->head, &head, nhead))
			goto got;
	}
	idx = atomic_fetch_add(&p->bump, 1);
	if (idx >= p->max) {
		atomic_fetch_sub(&p->bump, 1);
		return NULL;
	}
got:
	atomic_fetch_add_explicit(&p->inuse, 1, memory_order_relaxed);
	return p->base + (size_t)idx * p->objsize;
}

void rsx_pool_put(struct rsx_pool *p, void *obj)
{
	uint32_t idx = ((char *)obj - p->base) / p->objsize;
	uint64_t head, nhead;

	head = atomic_load(&p->head);
	do {
		atomic_store(&p->next[idx], (uint32_t)head);
		nhead = ((head >> 32) + 1) << 32 | (idx + 1);
	} while (!atomic_compare_exchange_weak(&p->head, &head, nhead));
	atomic_fetch_sub_explicit(&p->inuse, 1, memory_order_relaxed);
}
