// SPDX-License-Identifier: MIT
/*
 * Built three times (-O0, fortified, large-file): reads, polls, stats and
 * sendfile()s on a loopback TCP pair so that, depending on the build, the
 * plain, the __*_chk or the *64 entry points are called.  fortify.test
 * checks with nm which ones each build really calls and that the trace
 * shows every one of them.
 */
#ifdef PT_O0
#pragma GCC optimize("O0")
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <poll.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include "pt.h"

int main(void)
{
	static const char msg[] = "0123456789abcdef";
	char file[] = "/tmp/rsockx-chk.XXXXXX";
	struct timespec ts = { .tv_sec = 5 };
	struct pollfd pfd;
	struct stat st;
	char buf[64];
	off_t off = 0;
	int c, a, f;

	pt_tcp_pair(&c, &a);

	/* read() with a known buffer and an unknown length: __read_chk */
	pt_write_all(c, msg, 4);
	pt_check(read(a, buf, pt_opaque(4)) == 4);
	pt_check(!memcmp(buf, msg, 4));

	/* recv(): __recv_chk */
	pt_write_all(c, msg + 4, 4);
	pfd.fd = a;
	pfd.events = POLLIN;
	/* poll() with an unknown count: __poll_chk */
	pt_check(poll(&pfd, pt_opaque(1), 5000) == 1);
	pt_check(recv(a, buf, pt_opaque(4), MSG_WAITALL) == 4);
	pt_check(!memcmp(buf, msg + 4, 4));

	/* recvfrom(): __recvfrom_chk, after ppoll(): __ppoll_chk */
	pt_write_all(c, msg + 8, 4);
	pt_check(ppoll(&pfd, pt_opaque(1), &ts, NULL) == 1);
	pt_check(recvfrom(a, buf, pt_opaque(4), MSG_WAITALL, NULL, NULL) == 4);
	pt_check(!memcmp(buf, msg + 8, 4));

	/* fcntl and fstat: fcntl64 and fstat64 in the large-file build */
	pt_check(fcntl(a, F_GETFL) == O_RDWR);
	pt_check(fstat(a, &st) == 0 && S_ISSOCK(st.st_mode));

	/* sendfile from a file: sendfile64 in the large-file build */
	f = mkstemp(file);
	if (f < 0)
		pt_die("mkstemp");
	unlink(file);
	pt_write_all(f, msg, sizeof(msg));
	pt_check(sendfile(c, f, &off, sizeof(msg)) == sizeof(msg));
	pt_read_all(a, buf, sizeof(msg));
	pt_check(!memcmp(buf, msg, sizeof(msg)));

	close(f);
	close(c);
	close(a);
	return 0;
}
