/* SPDX-License-Identifier: MIT */
#ifndef RSX_VERBS_H
#define RSX_VERBS_H

/*
 * libibverbs and librdmacm, loaded on demand.
 *
 * librsockx.so links neither: most processes that load it (it may be in
 * /etc/ld.so.preload) never upgrade a connection and must not pay for them,
 * nor fail when they are not installed.  The first connection that may be
 * upgraded calls rsx_verbs_load(), which the shim implements with
 * dlopen()/dlsym() (src/ resolves no symbols itself).  The functions that
 * verbs.h defines inline (ibv_post_send, ibv_poll_cq, ...) call through the
 * device context and need no entry here.
 */
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#define RSX_IBV_FUNCS(X)						\
	X(get_device_list) X(free_device_list) X(get_device_name)	\
	X(open_device) X(close_device) X(query_device) X(query_port)	\
	X(query_gid) X(alloc_pd) X(dealloc_pd) X(reg_mr) X(dereg_mr)	\
	X(create_comp_channel) X(destroy_comp_channel)			\
	X(create_cq) X(destroy_cq) X(get_cq_event) X(ack_cq_events)	\
	X(create_qp) X(modify_qp) X(query_qp) X(destroy_qp)		\
	X(get_async_event) X(ack_async_event) X(wc_status_str)

#define RSX_RDMA_FUNCS(X)						\
	X(create_event_channel) X(destroy_event_channel)		\
	X(create_id) X(destroy_id) X(bind_addr) X(listen)		\
	X(resolve_addr) X(resolve_route) X(connect) X(reject)		\
	X(get_cm_event) X(ack_cm_event)

struct rsx_ibv {
#define RSX_IBV_FIELD(n) __typeof__(ibv_##n) *n;
	RSX_IBV_FUNCS(RSX_IBV_FIELD)
#undef RSX_IBV_FIELD
	/* optional (rdma-core 32 and later), NULL where absent: the whole
	 * GID table in one call, where ibv_query_gid() takes one system
	 * call per index, valid or not (1024 per rxe port) */
	__typeof__(_ibv_query_gid_table) *query_gid_table;
	/* optional: fork safety of registered memory (dev.c) */
	__typeof__(ibv_fork_init) *fork_init;
	__typeof__(ibv_is_fork_initialized) *is_fork_initialized;
};

struct rsx_rdma {
#define RSX_RDMA_FIELD(n) __typeof__(rdma_##n) *n;
	RSX_RDMA_FUNCS(RSX_RDMA_FIELD)
#undef RSX_RDMA_FIELD
};

extern struct rsx_ibv rsx_ibv;
extern struct rsx_rdma rsx_rdma;

/* 0 once both tables are filled; -errno (and a log line) otherwise.
 * Implemented in preload/verbs.c. */
int rsx_verbs_load(void);

#endif
