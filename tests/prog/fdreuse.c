// SPDX-License-Identifier: MIT
/*
 * A socket's fd number vanishes behind the library's back and is reused by
 * a file; reads on the new fd must give the file's bytes, not be treated
 * as the old socket.  The ways an fd disappears without close():
 *   fclose  fdopen()ed socket closed by stdio (libc-internal close)
 *   dup2    a file dup2()ed onto the socket's number
 *   range   close_range() over the socket
 *   from    closefrom() over the socket
 * Usage: fdreuse FILE; prints what each read gave.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sys/stat.h>
#include "pt.h"

static void show(const char *how, int fd, int want)
{
	char buf[256];
	struct stat st;
	ssize_t n;

	pt_check(fd == want);
	pt_check(fstat(fd, &st) == 0 && S_ISREG(st.st_mode));
	n = read(fd, buf, sizeof(buf) - 1);
	pt_check(n >= 0);
	buf[n] = 0;
	printf("%s: fd %d read %zd bytes: %s", how, fd, n, buf);
	close(fd);
}

/*
 * A TCP pair whose accepted end *a is the only free number below the next
 * open(): holes (the listener's fd) are plugged with /dev/null, so a file
 * opened after *a disappears gets *a's number.
 */
static void pair(int *c, int *a)
{
	int fd;

	pt_tcp_pair(c, a);
	while ((fd = open("/dev/null", O_RDONLY)) < *a)
		pt_check(fd >= 0);
	close(fd);
	pt_check(*c < *a);
}

int main(int argc, char **argv)
{
	const char *file = argc > 1 ? argv[1] : "/etc/hostname";
	int c, a, fd;
	FILE *f;

	/* fdopen + fclose */
	pair(&c, &a);
	f = fdopen(a, "r+");
	pt_check(f);
	fprintf(f, "through stdio\n");
	fflush(f);
	fclose(f);
	fd = open(file, O_RDONLY);
	show("fclose", fd, a);
	close(c);

	/* dup2 of a file onto the socket */
	pair(&c, &a);
	fd = open(file, O_RDONLY);
	pt_check(dup2(fd, a) == a);
	close(fd);
	show("dup2", a, a);
	close(c);

	/* close_range */
	pair(&c, &a);
	pt_check(close_range(a, a, 0) == 0);
	fd = open(file, O_RDONLY);
	show("close_range", fd, a);
	close(c);

	/* closefrom: the socket is the highest fd */
	pair(&c, &a);
	closefrom(a);
	fd = open(file, O_RDONLY);
	show("closefrom", fd, a);
	close(c);
	return 0;
}
