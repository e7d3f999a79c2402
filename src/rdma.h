/* SPDX-License-Identifier: MIT */
#ifndef RSX_RDMA_H
#define RSX_RDMA_H

#include <stdint.h>

#include "conn.h"
#include "dev.h"

/*
 * The RDMA transport (transport.h): a connection with its queue pair,
 * protection domain and registered ring on dev; the peer's half comes
 * with rsx_conn_connect().  evented: the program waits for it through
 * readiness (a non-blocking socket), so its completions go to the
 * device's channel rather than to one of its own.
 */
int rsx_rdma_create(struct rsx_dev *dev, uint32_t ring_size, int evented,
		    struct rsx_conn **out);

/* Takes a device channel's events for its connections (rdma.c). */
int rsx_rdma_chan_drain(struct ibv_comp_channel *chan, uint64_t *keys,
			int max);

/* Every queue pair on port (0: any) of ctx breaks: the port went down. */
int rsx_rdma_port_down(struct ibv_context *ctx, int port);

/* In a fork child: the parent's queue pairs are not ours to count. */
void rsx_rdma_fork_child(void);

#endif
