// SPDX-License-Identifier: MIT
/*
 * Resolving the real libc functions.
 *
 * In the constructor, so that no wrapper has to call dlsym() later: dlsym()
 * may allocate, which must not happen inside close() or read() called from a
 * signal handler.  And lazily from any wrapper, because calls can come before
 * our constructor ran: from another library's constructor (ld.so does not
 * order preloaded libraries' constructors first), or from a program whose
 * very first call is send() on a socketpair.
 */

#include <dlfcn.h>
#include <errno.h>

#include "init.h"
#include "libc.h"
#include "shim.h"

struct rsx_libc rsx_libc;

static const struct {
	const char *name;
	const char *version;
	size_t off;
} rsx_real_syms[] = {
#define RSX_REAL_SYM(n, v) { #n, v, offsetof(struct rsx_libc, n) },
	RSX_LIBC_FUNCS(RSX_REAL_SYM)
#undef RSX_REAL_SYM
};

/* What a wrapper calls if libc lacks the function: fail like the kernel. */
static long rsx_enosys(void)
{
	errno = ENOSYS;
	return -1;
}

void rsx_libc_resolve(void)
{
	unsigned int i;
	void **slot;
	void *f;

	for (i = 0; i < RSX_ARRAY_SIZE(rsx_real_syms); i++) {
		slot = (void **)((char *)&rsx_libc + rsx_real_syms[i].off);
		if (*slot)
			continue;
		if (rsx_real_syms[i].version)
			f = dlvsym(RTLD_NEXT, rsx_real_syms[i].name,
				   rsx_real_syms[i].version);
		else
			f = dlsym(RTLD_NEXT, rsx_real_syms[i].name);
		__atomic_store_n(slot, f ? f : (void *)rsx_enosys,
				 __ATOMIC_RELEASE);
	}
}

void *rsx_real_lazy(size_t off)
{
	int saved = errno;

	rsx_libc_resolve();
	errno = saved;
	return *(void **)((char *)&rsx_libc + off);
}

__attribute__((constructor)) static void rsx_preload_init(void)
{
	int saved = errno;

	rsx_libc_resolve();
	rsx_init_once();
	errno = saved;
}

__attribute__((destructor)) static void rsx_preload_fini(void)
{
	int saved = errno;

	rsx_fini();
	errno = saved;
}
