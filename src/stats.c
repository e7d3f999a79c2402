// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "libc.h"
#include "log.h"
#include "stats.h"

_Atomic uint64_t rsx_stats[RSX_STAT_COUNT];

static const char *const rsx_stat_names[] = {
#define RSX_STAT_NAME(name) #name,
	RSX_STATS(RSX_STAT_NAME)
#undef RSX_STAT_NAME
};

/* "key=value key=value ...", no newline; returns the length or -ENOSPC. */
int rsx_stats_format(char *buf, size_t len)
{
	size_t off = 0;
	int i, n;

	for (i = 0; i < RSX_STAT_COUNT; i++) {
		n = snprintf(buf + off, len - off, "%s%s=%llu", i ? " " : "",
			     rsx_stat_names[i],
			     (unsigned long long)rsx_stat_get(i));
		if (n < 0 || (size_t)n >= len - off)
			return -ENOSPC;
		off += n;
	}
	return off;
}

/* Appends "rsockx[PID]: stats: ..." to path (RSOCKX_STATS_FILE). */
int rsx_stats_dump(const char *path)
{
	char buf[2048];
	int fd, n, m, ret = 0;

	n = snprintf(buf, sizeof(buf), "rsockx[%d]: stats: ", (int)getpid());
	m = rsx_stats_format(buf + n, sizeof(buf) - n - 1);
	if (m < 0)
		return m;
	n += m;
	buf[n++] = '\n';
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (rsx_safe_write(fd, buf, n) != n)
		ret = -EIO;
	rsx_libc.close(fd);
	return ret;
}
