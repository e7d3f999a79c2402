// SPDX-License-Identifier: MIT
/*
 * A client that talks through stdio, like busybox wget: fdopen() on its
 * TCP socket, then fwrite()/fread(), whose bytes libc moves by its own
 * internal write() and read(), past any LD_PRELOAD shim.
 *
 *   stdioc ADDR PORT BYTES MS
 *
 * Connects, waits MS milliseconds (so that an out-of-band upgrade of the
 * connection lands before fdopen(); 0: fdopen() at once, while one is
 * still under way), fdopen()s the socket, writes BYTES pseudo-random
 * bytes, half-closes, and reads the peer's echo to EOF.  Prints
 * "stdioc: ok BYTES" and exits 0 when every byte came back, else says
 * what went wrong and exits 1.
 */
#include <arpa/inet.h>
#include <time.h>
#include "pt.h"

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct timespec ts;
	size_t n, got = 0, i;
	unsigned char *out, *in;
	uint32_t x = 2463534242u;
	FILE *f;
	long ms;
	int fd;

	if (argc != 5) {
		fprintf(stderr, "usage: stdioc ADDR PORT BYTES MS\n");
		return 2;
	}
	n = strtoul(argv[3], NULL, 0);
	ms = strtol(argv[4], NULL, 0);
	out = malloc(n + 1);
	in = malloc(n + 1);
	pt_check(out && in);
	for (i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		out[i] = (unsigned char)x;
	}
	pt_check(inet_pton(AF_INET, argv[1], &sa.sin_addr) == 1);
	sa.sin_port = htons((uint16_t)atoi(argv[2]));
	fd = socket(AF_INET, SOCK_STREAM, 0);
	pt_check(fd >= 0);
	pt_check(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	ts.tv_sec = ms / 1000;
	ts.tv_nsec = ms % 1000 * 1000000;
	nanosleep(&ts, NULL);
	f = fdopen(fd, "r+");
	pt_check(f != NULL);
	pt_check(fwrite(out, 1, n, f) == n);
	pt_check(fflush(f) == 0);
	pt_check(shutdown(fd, SHUT_WR) == 0);
	/* past the half-close: reads only now */
	while (got <= n) {
		size_t k = fread(in + got, 1, n + 1 - got, f);

		if (!k)
			break;
		got += k;
	}
	if (got != n || memcmp(in, out, n)) {
		for (i = 0; i < got && i < n && in[i] == out[i]; i++)
			;
		printf("stdioc: got %zu of %zu bytes back, first wrong at %zu%s\n",
		       got, n, i, ferror(f) ? " (read error)" : "");
		return 1;
	}
	pt_check(fclose(f) == 0);
	printf("stdioc: ok %zu\n", n);
	return 0;
}
