// SPDX-License-Identifier: MIT
/*
 * Large fd numbers.  Prints the fd numbers it gets, so that bigfd.test can
 * require the same output with and without librsockx (the library must not
 * take low fds a program expects to get):
 *  - select()/pselect() with nfds > 1024 on a program-allocated bitmap is
 *    legal on Linux; a wrapper using a fixed fd_set or FD_ISSET (which
 *    aborts through __fdelt_chk when fortified) breaks it;
 *  - fds above 65535 (dup2 of a TCP connection to 70000) carry data; where
 *    the hard RLIMIT_NOFILE cannot be raised that far (no CAP_SYS_RESOURCE)
 *    the highest fds allowed are used instead, and the line says so;
 *  - with fds 0..1017 taken, the next sockets are 1018..1021 and usable
 *    with a plain fd_set.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include "pt.h"

#define BITS (8 * sizeof(unsigned long))

int main(void)
{
	struct rlimit rl = { .rlim_cur = 80000, .rlim_max = 80000 };
	unsigned long set[2048 / BITS];
	struct timeval tv = { .tv_sec = 5 };
	struct timespec ts = { .tv_sec = 5 };
	struct pollfd pf;
	char buf[8];
	int c, a, fd, hi, s, big = 70000;

	if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
		pt_check(getrlimit(RLIMIT_NOFILE, &rl) == 0);
		rl.rlim_cur = rl.rlim_max;
		pt_check(setrlimit(RLIMIT_NOFILE, &rl) == 0);
		big = rl.rlim_max > 70002 ? 70000 : (int)rl.rlim_max - 2;
	}
	pt_check(big > 1501);

	pt_tcp_pair(&c, &a);
	printf("pair: %d %d\n", c, a);

	/* select/pselect with nfds 1501 */
	pt_check(dup2(a, 1500) == 1500);
	pt_check(write(c, "s", 1) == 1);
	memset(set, 0, sizeof(set));
	set[1500 / BITS] |= 1UL << (1500 % BITS);
	pt_check(select(1501, (fd_set *)set, NULL, NULL, &tv) == 1);
	pt_check(set[1500 / BITS] & (1UL << (1500 % BITS)));
	memset(set, 0, sizeof(set));
	set[1500 / BITS] |= 1UL << (1500 % BITS);
	pt_check(pselect(1501, (fd_set *)set, NULL, NULL, &ts, NULL) == 1);
	pt_check(read(1500, buf, 1) == 1 && buf[0] == 's');
	close(1500);
	printf("select nfds 1501: ok\n");

	/* fds 70000/70001 (or the highest allowed) */
	pt_check(dup2(c, big) == big && dup2(a, big + 1) == big + 1);
	pt_check(send(big, "big", 3, 0) == 3);
	pf.fd = big + 1;
	pf.events = POLLIN;
	pt_check(poll(&pf, 1, 5000) == 1);
	pt_check(recv(big + 1, buf, 3, MSG_WAITALL) == 3 &&
		 !memcmp(buf, "big", 3));
	pt_check(send(big + 1, "BIG", 3, 0) == 3);
	pt_check(recv(big, buf, 3, MSG_WAITALL) == 3 &&
		 !memcmp(buf, "BIG", 3));
	pt_check(close(big) == 0 && close(big + 1) == 0);
	printf("fd %d: ok\n", big);
	close(c);
	close(a);

	/* take every fd up to 1020; the next sockets land at 1021.. */
	for (hi = -1; hi < 1017; ) {
		hi = open("/dev/null", O_RDONLY);
		if (hi < 0)
			pt_die("open");
	}
	s = socket(AF_INET, SOCK_STREAM, 0);
	pt_tcp_pair(&c, &a);
	printf("after filling to %d: socket %d pair %d %d\n", hi, s, c, a);
	pt_check(c < FD_SETSIZE && a < FD_SETSIZE);
	{
		fd_set rs;

		pt_check(write(c, "t", 1) == 1);
		FD_ZERO(&rs);
		FD_SET(a, &rs);
		pt_check(select(a + 1, &rs, NULL, NULL, &tv) == 1);
		pt_check(FD_ISSET(a, &rs));
	}
	printf("select below 1024 after filling: ok\n");
	for (fd = 3; fd <= hi; fd++)
		close(fd);
	return 0;
}
