/* SPDX-License-Identifier: MIT */
#ifndef RSX_DEV_H
#define RSX_DEV_H

#include <stdatomic.h>
#include <sys/socket.h>

#include "mempool.h"
#include "verbs.h"

/*
 * The RDMA port behind a local IP address: the device whose port has that
 * address as a RoCE v2 GID.  Devices are opened once per process and kept;
 * each connection has a protection domain of its own (conn.c).
 */
struct rsx_dev {
	struct ibv_context *ctx;
	uint8_t port;
	uint8_t mtu;		/* active MTU of the port (enum ibv_mtu) */
	int gid_index;
	union ibv_gid gid;
	char name[64];
	/*
	 * Memory of the device's connections (mempool.h), shared by all the
	 * entries of one device: staging buffers and receive rings, each
	 * registered by its connection (rsx_rdma_create(), rsx_conn_connect()).
	 */
	struct rsx_mempool *stage_pool;
	struct rsx_mempool *ring_pool;
	/* the port is down: from its state at open, then its async events */
	_Atomic int down;
	uint32_t watch_epoch;	/* async fd in that watcher's set (ready.c) */
	/* the completion channel of every CQ on the device (rsx_dev_chan) */
	_Atomic(struct ibv_comp_channel *) chan;
	_Atomic uint32_t chan_epoch;	/* chan in that watcher's set */
	_Atomic int async_dead;	/* its events cannot be read: not polled */
};

int rsx_dev_prepare(void);
int rsx_dev_find(const struct sockaddr *local, struct rsx_dev **out);
int rsx_dev_async_fd(const struct rsx_dev *dev);
struct ibv_comp_channel *rsx_dev_chan(struct rsx_dev *dev);
int rsx_dev_chan_all(uint64_t *keys, int max);
void rsx_dev_async_all(void);
void rsx_dev_unwatch(int epfd);
void rsx_dev_fork_child(void);
void rsx_addr_to_gid(const struct sockaddr *sa, uint8_t gid[16]);

#endif
