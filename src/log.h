/* SPDX-License-Identifier: MIT */
#ifndef RSX_LOG_H
#define RSX_LOG_H

#include <sys/types.h>

#include "compiler.h"

/*
 * Logging is off unless RSOCKX_LOG asks for it: the library may sit in
 * /etc/ld.so.preload and must never print into other programs' output.
 */
enum rsx_log_level {
	RSX_LOG_OFF = 0,
	RSX_LOG_ERROR,
	RSX_LOG_WARN,
	RSX_LOG_INFO,
	RSX_LOG_DEBUG,
	RSX_LOG_TRACE,
	RSX_LOG_UNSET = 99,	/* the environment is not read yet */
};

extern int rsx_log_level;

int rsx_log_parse_level(const char *s);
int rsx_log_open(const char *path);
void rsx_log_emit(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void rsx_log_call(const char *name, int fd);
ssize_t rsx_safe_write(int fd, const void *buf, size_t len);

#define rsx_log(level, ...)						\
	do {								\
		if (unlikely((level) <= rsx_log_level))			\
			rsx_log_emit((level), __VA_ARGS__);		\
	} while (0)

#define rsx_err(...)	rsx_log(RSX_LOG_ERROR, __VA_ARGS__)
#define rsx_warn(...)	rsx_log(RSX_LOG_WARN, __VA_ARGS__)
#define rsx_info(...)	rsx_log(RSX_LOG_INFO, __VA_ARGS__)
#define rsx_dbg(...)	rsx_log(RSX_LOG_DEBUG, __VA_ARGS__)

/* Trace of every intercepted call: how tests prove a wrapper was reached. */
static inline void rsx_trace_call(const char *name, int fd)
{
	if (unlikely(rsx_log_level >= RSX_LOG_TRACE))
		rsx_log_call(name, fd);
}

/*
 * The same without reading the environment first: for calls that come
 * while the process starts, before it can be read.  ASan's runtime sets
 * its handlers through our sigaction() from its own constructor; reading
 * the environment there found none of it, which left the library off.
 */
static inline void rsx_trace_call_early(const char *name, int fd)
{
	if (unlikely(rsx_log_level >= RSX_LOG_TRACE &&
		     rsx_log_level != RSX_LOG_UNSET))
		rsx_log_call(name, fd);
}

#endif
