// SPDX-License-Identifier: MIT
/*
 * The very first wrapped call of the program is send() on a socketpair
 * (made with the raw syscall, so socketpair() is not called first): a
 * preload library that sets up its function table only in socket() crashes
 * here.  Then recv(), poll() and close() as first calls on fds the library
 * never saw created.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <poll.h>
#include <sys/syscall.h>
#include "pt.h"

int main(void)
{
	struct pollfd p;
	char buf[8];
	int sv[2];

	if (syscall(SYS_socketpair, AF_UNIX, SOCK_STREAM, 0, sv) < 0)
		pt_die("socketpair");
	pt_check(send(sv[0], "first", 5, 0) == 5);
	p.fd = sv[1];
	p.events = POLLIN;
	pt_check(poll(&p, 1, 5000) == 1);
	pt_check(recv(sv[1], buf, sizeof(buf), 0) == 5);
	pt_check(!memcmp(buf, "first", 5));
	pt_check(close(sv[0]) == 0 && close(sv[1]) == 0);
	printf("firstsend: ok\n");
	return 0;
}
