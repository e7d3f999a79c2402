/* SPDX-License-Identifier: MIT */
/*
 * Small helpers for the passthrough test programs: fail loudly with the
 * line, and make a connected TCP pair on loopback.
 */
#ifndef PT_H
#define PT_H

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define pt_die(what) do {						\
	fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__,		\
		(what), strerror(errno));				\
	exit(1);							\
} while (0)

#define pt_check(cond) do {						\
	if (!(cond)) {							\
		fprintf(stderr, "%s:%d: check failed: %s\n",		\
			__FILE__, __LINE__, #cond);			\
		exit(1);						\
	}								\
} while (0)

/* Hide a constant from the optimiser, so fortified calls take the _chk path. */
static inline size_t pt_opaque(size_t n)
{
	__asm__ volatile("" : "+r"(n));
	return n;
}

/*
 * A listening socket on 127.0.0.1 with a kernel-chosen port; *addr gets its
 * address.
 */
static inline int pt_listener(struct sockaddr_in *addr)
{
	socklen_t len = sizeof(*addr);
	int l;

	l = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0)
		pt_die("socket");
	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (struct sockaddr *)addr, sizeof(*addr)) < 0)
		pt_die("bind");
	if (listen(l, 16) < 0)
		pt_die("listen");
	if (getsockname(l, (struct sockaddr *)addr, &len) < 0)
		pt_die("getsockname");
	return l;
}

/* A connected TCP pair on loopback: *c the connecting end, *a the accepted. */
static inline void pt_tcp_pair(int *c, int *a)
{
	struct sockaddr_in addr;
	int l;

	l = pt_listener(&addr);
	*c = socket(AF_INET, SOCK_STREAM, 0);
	if (*c < 0)
		pt_die("socket");
	if (connect(*c, (struct sockaddr *)&addr, sizeof(addr)) < 0)
		pt_die("connect");
	*a = accept(l, NULL, NULL);
	if (*a < 0)
		pt_die("accept");
	close(l);
}

/* Write all of buf, or die. */
static inline void pt_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			pt_die("write");
		p += n;
		len -= n;
	}
}

/* Read exactly len bytes, or die. */
static inline void pt_read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			pt_die(n ? "read" : "read: early EOF");
		p += n;
		len -= n;
	}
}

/*
 * Which loaded object defines the function at fn: "librsockx" if it is the
 * library under test ($RSOCKX_LIB, the same file), else the object's base
 * name.  Define PT_WANT_OBJECT_NAME and include <dlfcn.h>, <limits.h> and
 * <libgen.h> first.
 */
#ifdef PT_WANT_OBJECT_NAME
static inline const char *pt_object_name(void *fn)
{
	static char a[PATH_MAX], b[PATH_MAX];
	const char *lib = getenv("RSOCKX_LIB");
	Dl_info info;

	if (!fn)
		return "unresolved";
	if (!dladdr(fn, &info) || !info.dli_fname)
		return "unknown";
	if (lib && realpath(lib, a) && realpath(info.dli_fname, b) &&
	    !strcmp(a, b))
		return "librsockx";
	return basename((char *)info.dli_fname);
}
#endif

#endif
