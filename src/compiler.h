/* SPDX-License-Identifier: MIT */
#ifndef RSX_COMPILER_H
#define RSX_COMPILER_H

#define likely(x)	__builtin_expect(!!(x), 1)
#define unlikely(x)	__builtin_expect(!!(x), 0)

/* Everything is hidden (-fvisibility=hidden) except the libc entry points. */
#define RSX_EXPORT	__attribute__((visibility("default")))

/*
 * Thread-local variables of the library use the initial-exec model: no
 * __tls_get_addr call (which may allocate) on the paths of intercepted calls,
 * some of which run in signal handlers.
 */
#define RSX_TLS		__thread __attribute__((tls_model("initial-exec")))

#define RSX_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
