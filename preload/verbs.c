// SPDX-License-Identifier: MIT
/*
 * Loading libibverbs and librdmacm when the first connection may be
 * upgraded (see src/verbs.h).  Failure is not an error for the program: the
 * connection simply stays TCP.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "guard.h"
#include "log.h"
#include "verbs.h"

struct rsx_ibv rsx_ibv;
struct rsx_rdma rsx_rdma;

static pthread_mutex_t rsx_verbs_lock = PTHREAD_MUTEX_INITIALIZER;
static int rsx_verbs_state;	/* 0 not tried, 1 loaded, <0 -errno */

static int rsx_verbs_open(void)
{
	void *ibv, *cm;

	ibv = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!ibv) {
		rsx_info("cannot load libibverbs: %s", dlerror());
		return -ENOENT;
	}
	cm = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cm) {
		rsx_info("cannot load librdmacm: %s", dlerror());
		dlclose(ibv);
		return -ENOENT;
	}
#define RSX_IBV_SYM(n)							\
	rsx_ibv.n = dlsym(ibv, "ibv_" #n);				\
	if (!rsx_ibv.n) {						\
		rsx_info("libibverbs lacks ibv_%s", #n);		\
		return -ENOSYS;						\
	}
	RSX_IBV_FUNCS(RSX_IBV_SYM)
#undef RSX_IBV_SYM
	rsx_ibv.query_gid_table = dlsym(ibv, "_ibv_query_gid_table");
	rsx_ibv.fork_init = dlsym(ibv, "ibv_fork_init");
	rsx_ibv.is_fork_initialized = dlsym(ibv, "ibv_is_fork_initialized");
#define RSX_RDMA_SYM(n)							\
	rsx_rdma.n = dlsym(cm, "rdma_" #n);				\
	if (!rsx_rdma.n) {						\
		rsx_info("librdmacm lacks rdma_%s", #n);		\
		return -ENOSYS;						\
	}
	RSX_RDMA_FUNCS(RSX_RDMA_SYM)
#undef RSX_RDMA_SYM
	return 1;
}

int rsx_verbs_load(void)
{
	int state;

	pthread_mutex_lock(&rsx_verbs_lock);
	if (!rsx_verbs_state) {
		/* their constructors and calls must not re-enter the engine */
		rsx_guard_enter();
		rsx_verbs_state = rsx_verbs_open();
		rsx_guard_leave();
	}
	state = rsx_verbs_state;
	pthread_mutex_unlock(&rsx_verbs_lock);
	return state == 1 ? 0 : state;
}
