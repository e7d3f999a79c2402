/*
 * xfer: a deliberately plain blocking TCP echo pair for the VM tests, so the
 * same program can run natively, under librsockx and under rdma-core's
 * librspreload (which intercepts accept but not accept4, poll but not epoll:
 * hence socket/bind/listen/accept/read/write only).
 *
 *   xfer server -p PORT [-b ADDR] [-r READYFILE]
 *       accept one connection, echo it until EOF, close.
 *   xfer client -c HOST -p PORT [-b ADDR] [-n BYTES] [-k CHUNK]
 *       send BYTES of a pseudo-random pattern in CHUNK pieces, read each
 *       piece back and compare; then half-close and expect a clean EOF.
 *
 * Both print one result line and "preloaded: ..." (the rsockx/rspreload
 * libraries mapped into the process, so a test can see the preload took).
 * Exit 0 on success, 1 on wrong data, 2 on any error.
 */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "xfer: %s: %s\n", what, strerror(errno));
	exit(2);
}

static struct addrinfo *resolve(const char *host, const char *port, int passive)
{
	struct addrinfo hints, *ai;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "xfer: %s: %s\n", host ? host : "*", gai_strerror(rc));
		exit(2);
	}
	return ai;
}

static void report_preload(const char *who)
{
	char line[4096], seen[1024] = "";
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f)) {
		char *path = strchr(line, '/'), *base;

		if (!path)
			continue;
		path[strcspn(path, "\n")] = 0;
		base = strrchr(path, '/') + 1;
		/* shared objects only: rsockx's statistics region
		 * (/dev/shm/rsockx.PID) is mapped too */
		if (strstr(base, ".so") &&
		    (strstr(base, "rsockx") || strstr(base, "rspreload")) &&
		    !strstr(seen, base) && strlen(seen) + strlen(base) + 2 < sizeof(seen)) {
			strcat(seen, " ");
			strcat(seen, base);
		}
	}
	if (f)
		fclose(f);
	printf("%s preloaded:%s\n", who, seen[0] ? seen : " none");
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			die("write");
		p += w;
		n -= (size_t)w;
	}
}

/* Read exactly n bytes; returns the count read before EOF. */
static size_t read_full(int fd, char *p, size_t n)
{
	size_t got = 0;

	while (got < n) {
		ssize_t r = read(fd, p + got, n - got);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read");
		if (r == 0)
			break;
		got += (size_t)r;
	}
	return got;
}

static int server(const char *bind_addr, const char *port, const char *ready)
{
	struct addrinfo *ai = resolve(bind_addr, port, 1);
	int one = 1, lfd, fd;
	unsigned long long total = 0;
	char buf[65536];
	ssize_t r;

	lfd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("bind");
	if (listen(lfd, 4) < 0)
		die("listen");
	freeaddrinfo(ai);
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (!f || fclose(f))
			die(ready);
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	while ((r = read(fd, buf, sizeof(buf))) != 0) {
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			die("read");
		write_all(fd, buf, (size_t)r);
		total += (unsigned long long)r;
	}
	close(fd);
	close(lfd);
	printf("server: echoed %llu bytes\n", total);
	report_preload("server");
	return 0;
}

static int client(const char *host, const char *bind_addr, const char *port,
		  unsigned long long bytes, size_t chunk)
{
	struct addrinfo *ai = resolve(host, port, 0);
	char *out = malloc(chunk), *in = malloc(chunk), extra;
	unsigned long long done = 0;
	unsigned int x = 2463534242u;
	int fd, bad = 0;

	if (!out || !in)
		die("malloc");
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (bind_addr) {
		struct addrinfo *b = resolve(bind_addr, "0", 1);

		if (bind(fd, b->ai_addr, b->ai_addrlen) < 0)
			die("bind");
		freeaddrinfo(b);
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0)
		die("connect");
	freeaddrinfo(ai);
	while (done < bytes) {
		size_t n = bytes - done < chunk ? (size_t)(bytes - done) : chunk, i;

		for (i = 0; i < n; i++) { /* xorshift32: cheap, not periodic in a chunk */
			x ^= x << 13;
			x ^= x >> 17;
			x ^= x << 5;
			out[i] = (char)x;
		}
		write_all(fd, out, n);
		if (read_full(fd, in, n) != n) {
			fprintf(stderr, "xfer: early EOF after %llu bytes\n", done);
			return 1;
		}
		if (memcmp(in, out, n)) {
			fprintf(stderr, "xfer: wrong data in bytes %llu..%llu\n", done, done + n);
			bad = 1;
		}
		done += n;
	}
	if (shutdown(fd, SHUT_WR) < 0)
		die("shutdown");
	if (read_full(fd, &extra, 1) != 0) {
		fprintf(stderr, "xfer: bytes after the echo\n");
		bad = 1;
	}
	close(fd);
	printf("client: %llu bytes %s\n", done, bad ? "CORRUPTED" : "echoed intact");
	report_preload("client");
	free(in);
	free(out);
	return bad;
}

int main(int argc, char **argv)
{
	const char *host = NULL, *bind_addr = NULL, *port = NULL, *ready = NULL;
	unsigned long long bytes = 1 << 20;
	size_t chunk = 65536;
	int c;

	if (argc < 2)
		goto usage;
	while ((c = getopt(argc - 1, argv + 1, "c:b:p:r:n:k:")) != -1) {
		switch (c) {
		case 'c': host = optarg; break;
		case 'b': bind_addr = optarg; break;
		case 'p': port = optarg; break;
		case 'r': ready = optarg; break;
		case 'n': bytes = strtoull(optarg, NULL, 0); break;
		case 'k': chunk = strtoul(optarg, NULL, 0); break;
		default: goto usage;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!port || chunk == 0)
		goto usage;
	if (!strcmp(argv[1], "server"))
		return server(bind_addr, port, ready);
	if (!strcmp(argv[1], "client") && host)
		return client(host, bind_addr, port, bytes, chunk);
usage:
	fprintf(stderr, "usage: xfer server -p PORT [-b ADDR] [-r READYFILE]\n"
			"       xfer client -c HOST -p PORT [-b ADDR] [-n BYTES] [-k CHUNK]\n");
	return 2;
}
