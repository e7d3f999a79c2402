// SPDX-License-Identifier: MIT
/*
 * Log lines: "rsockx[PID]: LEVEL: message\n", written with one write() so
 * that lines of concurrent threads and processes do not interleave.
 *
 * Only vsnprintf() with integer and string conversions and write() are used,
 * so rsx_log_emit() may run inside a signal handler.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fdtab.h"
#include "libc.h"
#include "log.h"

int rsx_log_level;
static int rsx_log_fd = STDERR_FILENO;

static const char *const rsx_level_names[] = {
	"off", "error", "warn", "info", "debug", "trace",
};

int rsx_log_parse_level(const char *s)
{
	unsigned int i;

	for (i = 0; i < RSX_ARRAY_SIZE(rsx_level_names); i++)
		if (!strcmp(s, rsx_level_names[i]))
			return i;
	if (s[0] >= '0' && s[0] <= '5' && !s[1])
		return s[0] - '0';
	return -EINVAL;
}

/*
 * The log file gets a descriptor far above the ones programs use, marked
 * close-on-exec and registered as ours, so that a program that closes or
 * dup2()s over "all" its descriptors does not close it under us.
 */
int rsx_log_open(const char *path)
{
	int fd, hi;

	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	hi = rsx_libc.fcntl(fd, F_DUPFD_CLOEXEC, rsx_fd_private_base());
	if (hi >= 0) {
		rsx_libc.close(fd);
		fd = hi;
	}
	rsx_fd_set_private(fd, &rsx_log_fd);
	rsx_log_fd = fd;
	return 0;
}

static void rsx_log_vemit(int level, const char *fmt, va_list ap)
{
	char buf[1024];
	int saved = errno;
	int n, m;

	n = snprintf(buf, sizeof(buf), "rsockx[%d]: %s: ", (int)getpid(),
		     rsx_level_names[level]);
	m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(buf) - 1)
		n = sizeof(buf) - 1;
	buf[n++] = '\n';
	if (rsx_libc.write)
		rsx_libc.write(rsx_log_fd, buf, n);
	errno = saved;
}

void rsx_log_emit(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rsx_log_vemit(level, fmt, ap);
	va_end(ap);
}

void rsx_log_call(const char *name, int fd)
{
	rsx_log_emit(RSX_LOG_TRACE, "call %s fd=%d", name, fd);
}
