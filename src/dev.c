// SPDX-License-Identifier: MIT
/*
 * Finding the device, port and GID index for a TCP connection's local
 * address.  The GID table is searched for the address (IPv4 addresses appear
 * as ::ffff:a.b.c.d) with type "RoCE v2": read whole where libibverbs and
 * the kernel can, else index by index with the type from sysfs, which works
 * with every libibverbs version.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn.h"
#include "dev.h"
#include "fdtab.h"
#include "guard.h"
#include "libc.h"
#include "log.h"
#include "rdma.h"

#define RSX_DEV_MAX 16
#define RSX_ADDR_CACHE 64

static pthread_mutex_t rsx_dev_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_dev rsx_devs[RSX_DEV_MAX];
static int rsx_ndevs;
static _Atomic int rsx_devs_opened;	/* rsx_devs[] is final once set */

static struct {
	uint8_t gid[16];
	struct rsx_dev *dev;	/* NULL: known to have no device */
} rsx_addr_cache[RSX_ADDR_CACHE];
static int rsx_naddr;

void rsx_addr_to_gid(const struct sockaddr *sa, uint8_t gid[16])
{
	const struct sockaddr_in *s4 = (const void *)sa;
	const struct sockaddr_in6 *s6 = (const void *)sa;

	memset(gid, 0, 16);
	if (sa->sa_family == AF_INET) {
		gid[10] = 0xff;
		gid[11] = 0xff;
		memcpy(gid + 12, &s4->sin_addr, 4);
	} else {
		memcpy(gid, &s6->sin6_addr, 16);
	}
}

static int rsx_gid_is_rocev2(const char *dev, int port, int idx)
{
	char path[160], buf[32];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path),
		 "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d",
		 dev, port, idx);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = rsx_libc.read(fd, buf, sizeof(buf) - 1);
	rsx_libc.close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return !strncmp(buf, "RoCE v2", 7);
}

/* What verbs.h's ibv_query_port() macro does, with the loaded symbol. */
static int rsx_query_port(struct ibv_context *ctx, int port,
			  struct ibv_port_attr *pa)
{
	struct verbs_context *vctx = verbs_get_ctx_op(ctx, query_port);

	memset(pa, 0, sizeof(*pa));
	if (vctx)
		return vctx->query_port(ctx, port, pa, sizeof(*pa));
	return rsx_ibv.query_port(ctx, port, (void *)pa);
}

static int rsx_port_active(struct ibv_context *ctx, int port)
{
	struct ibv_port_attr pa;

	return !rsx_query_port(ctx, port, &pa) && pa.state == IBV_PORT_ACTIVE;
}

/* One more rsx_dev for (ctx, port, GID index g); 1 if there was room. */
static int rsx_dev_add(struct ibv_context *ctx, struct rsx_mempool *pools, const char *name, int port,
		       const struct ibv_port_attr *pa, int g,
		       const union ibv_gid *gid)
{
	if (rsx_ndevs == RSX_DEV_MAX)
		return 0;
	rsx_devs[rsx_ndevs] = (struct rsx_dev){
		.ctx = ctx, .port = port, .mtu = pa->active_mtu,
		.gid_index = g, .gid = *gid,
		.stage_pool = &pools[0], .ring_pool = &pools[1],
		.down = pa->state != IBV_PORT_ACTIVE,
	};
	snprintf(rsx_devs[rsx_ndevs].name, sizeof(rsx_devs[0].name), "%s",
		 name);
	rsx_dbg("device %s port %d gid %d mtu %d%s", name, port, g,
		128 << pa->active_mtu,
		pa->state != IBV_PORT_ACTIVE ? " (down)" : "");
	rsx_ndevs++;
	return 1;
}

/*
 * The valid GID entries of every port of ctx in one call (the kernel's
 * GID table method, Linux 5.10 and later), in *tab (to free); -errno where
 * libibverbs or the kernel cannot.  Scanning index by index instead costs
 * a failed system call per empty index: 2 x 1024 of them on the test
 * VM's two rxe ports, in front of each process's first connection.
 */
static ssize_t rsx_gid_table(struct ibv_context *ctx, int nports,
			     struct ibv_gid_entry **tab)
{
	struct ibv_port_attr pa;
	size_t max = 0;
	ssize_t n;
	int p;

	*tab = NULL;
	if (!rsx_ibv.query_gid_table)
		return -ENOSYS;
	for (p = 1; p <= nports; p++)
		if (!rsx_query_port(ctx, p, &pa))
			max += pa.gid_tbl_len;
	if (!max)
		return -ENODATA;
	*tab = calloc(max, sizeof(**tab));
	if (!*tab)
		return -ENOMEM;
	n = rsx_ibv.query_gid_table(ctx, *tab, max, 0, sizeof(**tab));
	if (n < 0) {
		n = -errno;
		free(*tab);
		*tab = NULL;
	}
	return n;
}

/* The RoCE v2 GIDs of ctx's Ethernet port p; how many were added. */
static int rsx_port_gids(struct ibv_context *ctx,
			 struct rsx_mempool *pools, const char *name, int p,
			 const struct ibv_port_attr *pa,
			 const struct ibv_gid_entry *tab, ssize_t ntab)
{
	union ibv_gid gid;
	int g, added = 0;
	ssize_t k;

	if (ntab >= 0) {
		for (k = 0; k < ntab; k++)
			if (tab[k].port_num == (uint32_t)p &&
			    tab[k].gid_type == IBV_GID_TYPE_ROCE_V2 &&
			    tab[k].gid.global.interface_id)
				added += rsx_dev_add(ctx, pools, name, p,
						     pa, tab[k].gid_index,
						     &tab[k].gid);
		return added;
	}
	for (g = 0; g < pa->gid_tbl_len && rsx_ndevs < RSX_DEV_MAX; g++) {
		if (rsx_ibv.query_gid(ctx, p, g, &gid) ||
		    !gid.global.interface_id || !rsx_gid_is_rocev2(name, p, g))
			continue;
		added += rsx_dev_add(ctx, pools, name, p, pa, g, &gid);
	}
	return added;
}

/*
 * One rsx_dev per (device, port, GID index) that carries a RoCE v2 GID:
 * all of them found at once, the first time any is needed.
 */
/*
 * fork() and registered memory.  Before Linux 5.13 a fork child shared the
 * pinned pages of its parent copy-on-write, so the parent's next write to
 * one moved it away from the page the device reads or writes: a stream
 * corrupted without a sign.  The rings and staging buffers are kept out of
 * fork children (mempool.c, MADV_DONTFORK); the queue buffers that a
 * provider keeps in user memory (mlx5's, not rxe's) only libibverbs knows,
 * and ibv_fork_init() has it do the same for them.  Where the kernel
 * copies pinned pages at fork it reports that it is not needed and does
 * nothing.  It must come before the first registration: here.
 */
static void rsx_fork_safety(void)
{
	int ret;

	if (!rsx_ibv.fork_init || (rsx_ibv.is_fork_initialized &&
	    rsx_ibv.is_fork_initialized() != IBV_FORK_DISABLED))
		return;
	ret = rsx_ibv.fork_init();
	if (ret)
		rsx_info("ibv_fork_init: %s: a fork child of a provider that "
			 "keeps queues in user memory may corrupt them",
			 strerror(ret));
	else
		rsx_dbg("ibv_fork_init: the kernel does not copy pinned pages "
			"at fork");
}

static void rsx_devs_open(void)
{
	struct ibv_device **list;
	struct ibv_gid_entry *tab;
	struct ibv_device_attr da;
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	struct rsx_mempool *pools;
	int n, i, p, used;
	const char *name;
	ssize_t ntab;

	rsx_fork_safety();
	list = rsx_ibv.get_device_list(&n);
	if (!list) {
		rsx_info("no RDMA devices: %s", strerror(errno));
		return;
	}
	for (i = 0; i < n && rsx_ndevs < RSX_DEV_MAX; i++) {
		name = rsx_ibv.get_device_name(list[i]);
		ctx = rsx_ibv.open_device(list[i]);
		if (!ctx)
			continue;
		pools = NULL;
		tab = NULL;
		used = 0;
		if (rsx_ibv.query_device(ctx, &da))
			goto next;
		pools = calloc(2, sizeof(*pools));
		if (!pools)
			goto next;
		rsx_mempool_init(&pools[0], "staging", NULL);
		rsx_mempool_init(&pools[1], "ring", NULL);
		ntab = rsx_gid_table(ctx, da.phys_port_cnt, &tab);
		if (ntab < 0)
			rsx_dbg("device %s: GID table by index (%s)", name,
				strerror((int)-ntab));
		for (p = 1; p <= da.phys_port_cnt; p++) {
			if (rsx_query_port(ctx, p, &pa) ||
			    pa.link_layer != IBV_LINK_LAYER_ETHERNET)
				continue;
			used += rsx_port_gids(ctx, pools, name, p, &pa,
					      tab, ntab);
		}
		/* drained without blocking, by whichever thread wakes for it */
		if (used)
			rsx_libc.fcntl(ctx->async_fd, F_SETFL,
				       rsx_libc.fcntl(ctx->async_fd, F_GETFL) |
				       O_NONBLOCK);
next:
		free(tab);
		if (!used) {
			if (pools) {
				rsx_mempool_destroy(&pools[0]);
				rsx_mempool_destroy(&pools[1]);
				free(pools);
			}
			rsx_ibv.close_device(ctx);
		}
	}
	rsx_ibv.free_device_list(list);
}

/* Loads the libraries and opens the devices ahead of time, so that the
 * first connection's HELLO is not late (see rsx_on_connect_prepare()). */
int rsx_dev_prepare(void)
{
	int ret = rsx_verbs_load();

	if (ret)
		return ret;
	pthread_mutex_lock(&rsx_dev_lock);
	if (!rsx_devs_opened) {
		rsx_guard_enter();
		rsx_devs_open();
		rsx_guard_leave();
		rsx_devs_opened = 1;
	}
	pthread_mutex_unlock(&rsx_dev_lock);
	return rsx_ndevs ? 0 : -ENODEV;
}

int rsx_dev_find(const struct sockaddr *local, struct rsx_dev **out)
{
	struct rsx_dev *found = NULL;
	uint8_t gid[16];
	int i, ret;

	ret = rsx_verbs_load();
	if (ret)
		return ret;
	rsx_addr_to_gid(local, gid);
	pthread_mutex_lock(&rsx_dev_lock);
	for (i = 0; i < rsx_naddr; i++) {
		if (!memcmp(rsx_addr_cache[i].gid, gid, 16)) {
			found = rsx_addr_cache[i].dev;
			goto out;
		}
	}
	if (!rsx_devs_opened) {
		rsx_guard_enter();
		rsx_devs_open();
		rsx_guard_leave();
		rsx_devs_opened = 1;
	}
	for (i = 0; i < rsx_ndevs; i++)
		if (!memcmp(rsx_devs[i].gid.raw, gid, 16))
			found = &rsx_devs[i];
	if (rsx_naddr < RSX_ADDR_CACHE) {
		memcpy(rsx_addr_cache[rsx_naddr].gid, gid, 16);
		rsx_addr_cache[rsx_naddr++].dev = found;
	}
out:
	pthread_mutex_unlock(&rsx_dev_lock);
	*out = found;
	if (!found)
		return -ENODEV;
	/*
	 * The port's events first, whichever way they go: nobody may have
	 * been listening when it came back, or since it went down (a
	 * connection made right after a port went down, its PORT_ERR not yet
	 * read, took a queue pair on it).  One read per device, next to the
	 * milliseconds a queue pair costs.
	 */
	rsx_dev_async_all();
	if (atomic_load(&found->down)) {
		rsx_dbg("device %s port %d is down", found->name, found->port);
		return -ENETDOWN;
	}
	return 0;
}

/* -1 (which poll skips) once the device's events cannot be read */
int rsx_dev_async_fd(const struct rsx_dev *dev)
{
	return atomic_load(&dev->async_dead) ? -1 : dev->ctx->async_fd;
}

/*
 * The completion channel of dev's device, made with the first queue pair
 * that reports there: those of non-blocking sockets (rsx_rdma_create()).
 * A channel each was a descriptor and an epoll registration of the
 * watcher per connection (issue 20, item 7); this one is drained by the
 * watcher for all of them (rsx_dev_chan_all()).  NULL when none can be
 * made.
 */
struct ibv_comp_channel *rsx_dev_chan(struct rsx_dev *dev)
{
	struct ibv_comp_channel *ch = atomic_load(&dev->chan);
	int i;

	if (likely(ch))
		return ch;
	pthread_mutex_lock(&rsx_dev_lock);
	ch = atomic_load(&dev->chan);
	if (ch)
		goto out;
	rsx_guard_enter();
	ch = rsx_ibv.create_comp_channel(dev->ctx);
	rsx_guard_leave();
	if (ch) {
		ch->fd = rsx_fd_hide(ch->fd);
		/* drained without blocking, as the async events are */
		rsx_libc.fcntl(ch->fd, F_SETFL,
			       rsx_libc.fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
		for (i = 0; i < rsx_ndevs; i++)
			if (rsx_devs[i].ctx == dev->ctx)
				atomic_store(&rsx_devs[i].chan, ch);
	}
out:
	pthread_mutex_unlock(&rsx_dev_lock);
	return ch;
}

/*
 * Takes every completion event off the devices' channels: each wakes its
 * connection's sleeper (rsx_rdma_chan_drain()).  Fills keys with those of
 * the readiness watcher's connections that had one, up to max (the rest
 * stay for the next round: the channel stays readable).  Returns how
 * many.
 */
int rsx_dev_chan_all(uint64_t *keys, int max)
{
	struct ibv_comp_channel *ch;
	int i, n = 0;

	if (!atomic_load(&rsx_devs_opened))
		return 0;
	for (i = 0; i < rsx_ndevs && n < max; i++) {
		ch = atomic_load(&rsx_devs[i].chan);
		if (ch && (!i || ch != atomic_load(&rsx_devs[i - 1].chan)))
			n += rsx_rdma_chan_drain(ch, keys + n, max - n);
	}
	return n;
}

/* Takes the descriptors of devices whose events cannot be read out of an
 * epoll set (level-triggered, they would wake it for ever). */
void rsx_dev_unwatch(int epfd)
{
	int i;

	for (i = 0; i < rsx_ndevs; i++)
		if (atomic_load(&rsx_devs[i].async_dead))
			rsx_libc.epoll_ctl(epfd, EPOLL_CTL_DEL,
					   rsx_devs[i].ctx->async_fd, NULL);
}

/* A port of ctx (0: all of them) changed state. */
static void rsx_dev_port(struct ibv_context *ctx, int port, int down)
{
	const char *name = NULL;
	int i, n;

	for (i = 0; i < rsx_ndevs; i++) {
		if (rsx_devs[i].ctx != ctx ||
		    (port && rsx_devs[i].port != port))
			continue;
		atomic_store(&rsx_devs[i].down, down);
		name = rsx_devs[i].name;
	}
	if (!name)
		return;
	if (!down) {
		rsx_info("device %s port %d is up again", name, port);
		return;
	}
	n = rsx_rdma_port_down(ctx, port);
	rsx_info("device %s port %d went down: %d connection%s broken", name,
		 port, n, n == 1 ? "" : "s");
}

/*
 * In a fork child: the devices the parent opened are not the child's.
 * Soft-RoCE's verbs are write() commands on the device's descriptor, which
 * the kernel refuses (EACCES) from a process with other credentials than
 * the opener's, and a fork child has its own: its connections would fail
 * their first post and stay TCP.  And the parent's event descriptors would
 * be shared, so that a port's event, or a completion event on the device's
 * channel, went to one of the two only.  The
 * child closes its copies of the descriptors (the parent's stay open) and
 * forgets the devices; it opens its own when it first needs one.  The
 * parent's memory, pools and connections remain in the child's copy of
 * memory, never used or freed there: they are registered to the parent.
 */
void rsx_dev_fork_child(void)
{
	struct ibv_comp_channel *chan;
	struct ibv_context *ctx;
	int i;

	pthread_mutex_init(&rsx_dev_lock, NULL);
	if (!atomic_load(&rsx_devs_opened))
		return;
	for (i = 0; i < rsx_ndevs; i++) {
		ctx = rsx_devs[i].ctx;
		if (i && ctx == rsx_devs[i - 1].ctx)
			continue;
		rsx_libc.close(ctx->async_fd);
		rsx_libc.close(ctx->cmd_fd);
		chan = atomic_load(&rsx_devs[i].chan);
		if (chan)
			rsx_fd_private_close(chan->fd);
	}
	memset(rsx_devs, 0, sizeof(rsx_devs));
	rsx_ndevs = 0;
	rsx_naddr = 0;
	atomic_store(&rsx_devs_opened, 0);
}

/* A device whose events cannot be read (removed): stop waiting for them. */
static void rsx_dev_async_dead(struct ibv_context *ctx)
{
	int i, err = errno;

	for (i = 0; i < rsx_ndevs; i++)
		if (rsx_devs[i].ctx == ctx)
			atomic_store(&rsx_devs[i].async_dead, 1);
	rsx_info("device %s: its events cannot be read (%s): a port going "
		 "down will not be seen", ctx->device->name, strerror(err));
}

/*
 * Takes in the asynchronous events of every device (their descriptors are
 * non-blocking).  A port that goes down breaks the connections on it at
 * once (rsx_rdma_port_down()): Soft-RoCE would otherwise retry their
 * requests for as long as the port stays down, and never complete them.
 * Sleepers (rsx_sleep in upgrade.c) and the readiness watcher wait on
 * these descriptors too.
 */
void rsx_dev_async_all(void)
{
	struct ibv_async_event ev;
	int i;

	if (!atomic_load(&rsx_devs_opened))
		return;
	rsx_guard_enter();
	for (i = 0; i < rsx_ndevs; i++) {
		if ((i && rsx_devs[i].ctx == rsx_devs[i - 1].ctx) ||
		    atomic_load(&rsx_devs[i].async_dead))
			continue;
		while (!rsx_ibv.get_async_event(rsx_devs[i].ctx, &ev)) {
			switch (ev.event_type) {
			case IBV_EVENT_PORT_ERR:
				/* read late, after the port came back: the
				 * connections made since are sound */
				if (rsx_port_active(rsx_devs[i].ctx,
						    ev.element.port_num))
					rsx_dbg("device %s port %d went down "
						"and is up again",
						rsx_devs[i].name,
						ev.element.port_num);
				else
					rsx_dev_port(rsx_devs[i].ctx,
						     ev.element.port_num, 1);
				break;
			case IBV_EVENT_PORT_ACTIVE:
				rsx_dev_port(rsx_devs[i].ctx,
					     ev.element.port_num, 0);
				break;
			case IBV_EVENT_DEVICE_FATAL:
				rsx_dev_port(rsx_devs[i].ctx, 0, 1);
				break;
			default:
				break;	/* a QP's own: its completions tell */
			}
			rsx_ibv.ack_async_event(&ev);
		}
		if (errno != EAGAIN && errno != EINTR)
			rsx_dev_async_dead(rsx_devs[i].ctx);
	}
	rsx_guard_leave();
}
