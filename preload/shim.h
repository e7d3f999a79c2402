/* SPDX-License-Identifier: MIT */
#ifndef RSX_SHIM_H
#define RSX_SHIM_H

/*
 * The ABI shim: one thin wrapper per libc entry point.  A wrapper traces the
 * call (RSOCKX_LOG=trace), calls the real function, and reports descriptor
 * events to the engine.  It decides nothing; src/ does.
 *
 * Engine functions return -errno; this is the only place that turns that
 * into -1 and errno.  Engine work after a successful real call must not
 * change errno (some programs read it even on success).
 */
#include <errno.h>
#include <stddef.h>

#include "compiler.h"
#include "fdtab.h"
#include "guard.h"
#include "libc.h"
#include "log.h"

void *rsx_real_lazy(size_t off);

/*
 * The real function, resolved by the constructor; a call that arrives before
 * it ran (another library's constructor, a program whose first call is
 * send()) resolves the whole table on the spot.
 */
#define RSX_REAL(name)							\
	(likely(rsx_libc.name != NULL) ? rsx_libc.name :		\
	 (__typeof__(rsx_libc.name))rsx_real_lazy(			\
		offsetof(struct rsx_libc, name)))

#define RSX_KEEP_ERRNO(expr)						\
	do {								\
		int rsx_saved_errno_ = errno;				\
		expr;							\
		errno = rsx_saved_errno_;				\
	} while (0)

static inline long rsx_ret(long ret)
{
	if (ret < 0) {
		errno = -ret;
		return -1;
	}
	return ret;
}

/*
 * The whole fast path of the hot wrappers (io.c): nothing to trace, and the
 * descriptor is not in the engine's hands.  Everything else goes to a cold,
 * out-of-line function, so that the fast path needs no stack frame and ends
 * in a tail jump to libc.
 */
static inline int rsx_slow(int fd)
{
	struct rsx_sock *s;

	if (unlikely(rsx_log_level >= RSX_LOG_TRACE))
		return 1;
	s = rsx_fd_peek(fd);
	return s && atomic_load_explicit(&s->mode, memory_order_relaxed);
}

/*
 * Does this call belong to the engine?  Only for sockets that are being
 * negotiated or are upgraded; everything else (other descriptors, plain TCP
 * connections) costs one bounds check, one load and one test.
 */
static inline int rsx_engine(int fd)
{
	struct rsx_sock *s = rsx_fd_peek(fd);

	if (likely(!s || !atomic_load_explicit(&s->mode,
					       memory_order_relaxed)))
		return 0;
	return !rsx_guarded();
}

#endif
