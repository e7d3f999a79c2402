// SPDX-License-Identifier: MIT
/*
 * The unit tests link the engine without the shim, which is what loads
 * libibverbs: here there are no RDMA libraries, as on a host without them
 * (the engine must then keep every connection on TCP).
 */
#include <errno.h>

#include "verbs.h"

struct rsx_ibv rsx_ibv;
struct rsx_rdma rsx_rdma;

int rsx_verbs_load(void)
{
	return -ENOSYS;
}
