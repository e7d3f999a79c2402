// SPDX-License-Identifier: MIT
/*
 * A library whose constructor uses sockets before main() and, depending on
 * the load order, before librsockx's own constructor has run: the first
 * wrapped call it makes is send() on a socketpair made with the raw
 * syscall.  It reports on stdout with the raw write syscall so that the
 * report itself does not depend on the library under test.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sys/syscall.h>
#include "pt.h"

static int ctor_result = -1;

static void say(const char *s)
{
	syscall(SYS_write, 1, s, strlen(s));
}

__attribute__((constructor)) static void ctorlib_init(void)
{
	char buf[8] = "";
	int sv[2];

	if (syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		say("ctorlib: socketpair failed\n");
		return;
	}
	/* the first wrapped calls of the process */
	if (send(sv[0], "ctor", 4, 0) != 4 ||
	    recv(sv[1], buf, sizeof(buf), MSG_DONTWAIT) != 4 ||
	    memcmp(buf, "ctor", 4)) {
		say("ctorlib: send/recv failed\n");
		return;
	}
	close(sv[0]);
	close(sv[1]);
	/* and a TCP socket, which the library must track */
	{
		int c, a;

		pt_tcp_pair(&c, &a);
		pt_write_all(c, "tcp", 3);
		pt_read_all(a, buf, 3);
		close(c);
		close(a);
	}
	ctor_result = 0;
	say("ctorlib: constructor socket calls ok\n");
}

/* Called by ctorprog so that it really links against this library. */
__attribute__((visibility("default"))) int ctorlib_status(void);
int ctorlib_status(void)
{
	return ctor_result;
}
