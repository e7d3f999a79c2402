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
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fdtab.h"
#include "init.h"
#include "libc.h"
#include "log.h"

/* Until the environment is read, every call takes the slow path, which
 * reads it (a call can come before our constructor ran). */
int rsx_log_level = RSX_LOG_UNSET;
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

/*
 * write() that cannot kill the process: a file size limit (sshd's sandbox
 * sets RLIMIT_FSIZE to 0) makes the kernel send SIGXFSZ, whose default
 * action ends the process.  SIGXFSZ is blocked around the write; if the
 * write hit the limit, the signal is pending and stays blocked in this
 * thread (taking it back would need a syscall that sandboxes such as
 * sshd's seccomp filter forbid), and logging stops for good.
 */
ssize_t rsx_safe_write(int fd, const void *buf, size_t len)
{
	sigset_t xfsz, old;
	ssize_t n;

	sigemptyset(&xfsz);
	sigaddset(&xfsz, SIGXFSZ);
	pthread_sigmask(SIG_BLOCK, &xfsz, &old);
	n = rsx_libc.write(fd, buf, len);
	if (n < 0 && errno == EFBIG) {
		rsx_log_level = RSX_LOG_OFF;
		return n;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return n;
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
		rsx_safe_write(rsx_log_fd, buf, n);
	errno = saved;
}

/* Before the environment is read: read it, then decide. */
static int rsx_log_wanted(int level)
{
	if (rsx_log_level == RSX_LOG_UNSET && rsx_init_once())
		return 0;	/* being read right now (recursion) */
	return rsx_log_level != RSX_LOG_UNSET && level <= rsx_log_level;
}

void rsx_log_emit(int level, const char *fmt, ...)
{
	va_list ap;

	if (!rsx_log_wanted(level))
		return;
	va_start(ap, fmt);
	rsx_log_vemit(level, fmt, ap);
	va_end(ap);
}

void rsx_log_call(const char *name, int fd)
{
	if (rsx_log_wanted(RSX_LOG_TRACE))
		rsx_log_emit(RSX_LOG_TRACE, "call %s fd=%d", name, fd);
}
