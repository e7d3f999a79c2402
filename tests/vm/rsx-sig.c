// SPDX-License-Identifier: MIT
/*
 * rsx-sig: a signal handler that writes to the socket its thread is
 * sending on (issue 20).  The writer's main thread sends a pattern in
 * blocking send()s while SIGALRM (setitimer) comes every few hundred
 * microseconds; the handler write()s a tagged record to the same socket.
 * The reader checks that every byte of both came, in one of the orders the
 * kernel's TCP allows: the pattern in sequence, each record whole and in
 * turn.  Under a library that takes the socket's lock again in the
 * handler, the writer hangs instead.
 *
 *   rsx-sig pair [-n BYTES] [-k CHUNK] [-i USEC] [-r]
 *       both ends in one process, over loopback (the reader a thread)
 *   rsx-sig server -p PORT [-b ADDR] [-n BYTES] [-k CHUNK] [-i USEC] [-r]
 *       accept one connection, read one byte, then write as above
 *   rsx-sig client -c HOST -p PORT [-b ADDR]
 *       connect, send one byte, read and check until EOF
 *
 * -r: the handler has SA_RESTART (else a send may end with EINTR or short,
 * and goes on with the rest).  The writer prints "writer: sent N records R
 * eintr E short S", the reader "reader: pattern N records R bad B"; the
 * pair mode checks that they agree.  Exit 0 on success, 1 on wrong data,
 * 2 on any error.
 */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define REC_LEN 8	/* '#', six digits, '$' */

static int wfd = -1;
static volatile sig_atomic_t records, rec_failed, stop;

static void die(const char *what)
{
	fprintf(stderr, "rsx-sig: %s: %s\n", what, strerror(errno));
	exit(2);
}

static char pattern(unsigned long long i)
{
	return 'a' + i % 26;
}

static void on_alarm(int sig)
{
	char rec[REC_LEN];
	unsigned int n = records, i;
	int err = errno;
	ssize_t k;
	size_t off = 0;

	(void)sig;
	if (stop || rec_failed || n > 999999)
		return;
	rec[0] = '#';
	for (i = 6; i > 0; i--, n /= 10)
		rec[i] = '0' + n % 10;
	rec[7] = '$';
	while (off < REC_LEN) {
		k = write(wfd, rec + off, REC_LEN - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rec_failed = 1;
			break;
		}
		off += k;
	}
	if (!rec_failed)
		records++;
	errno = err;
}

struct wres {
	unsigned long long sent;
	unsigned long eintr, shorts;
};

static void writer(int fd, unsigned long long total, size_t chunk, long usec,
		   int restart, struct wres *r)
{
	struct itimerval it = { { 0, usec }, { 0, usec } }, off = { 0 };
	struct sigaction sa;
	char *buf;
	size_t i, n;
	ssize_t k;
	sigset_t al;

	buf = malloc(chunk + 26);
	if (!buf)
		die("malloc");
	for (i = 0; i < chunk + 26; i++)
		buf[i] = pattern(i);
	wfd = fd;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = restart ? SA_RESTART : 0;
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		die("sigaction");
	if (setitimer(ITIMER_REAL, &it, NULL))
		die("setitimer");
	memset(r, 0, sizeof(*r));
	while (r->sent < total) {
		n = total - r->sent < chunk ? total - r->sent : chunk;
		k = send(fd, buf + r->sent % 26, n, 0);
		if (k < 0 && errno == EINTR) {
			r->eintr++;
			continue;
		}
		if (k <= 0)
			die("send");
		if ((size_t)k < n)
			r->shorts++;
		r->sent += k;
	}
	/* no record after the last byte counted */
	stop = 1;
	setitimer(ITIMER_REAL, &off, NULL);
	sigemptyset(&al);
	sigaddset(&al, SIGALRM);
	pthread_sigmask(SIG_BLOCK, &al, NULL);
	free(buf);
	printf("writer: sent %llu records %d eintr %lu short %lu\n", r->sent,
	       (int)records, r->eintr, r->shorts);
	if (rec_failed) {
		fprintf(stderr, "rsx-sig: a handler's write failed\n");
		exit(2);
	}
}

struct rres {
	int fd;
	unsigned long long pattern;
	unsigned long records, bad;
};

static void *reader(void *arg)
{
	struct rres *r = arg;
	char buf[65536], rec[REC_LEN];
	int inrec = 0, i;
	unsigned long want;
	ssize_t k, j;

	for (;;) {
		k = recv(r->fd, buf, sizeof(buf), 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			die("recv");
		if (!k)
			break;
		for (j = 0; j < k; j++) {
			if (inrec) {
				rec[inrec++] = buf[j];
				if (inrec < REC_LEN)
					continue;
				inrec = 0;
				for (want = 0, i = 1; i < 7; i++)
					want = want * 10 + (rec[i] - '0');
				if (rec[7] != '$' || want != r->records) {
					if (r->bad++ < 5)
						fprintf(stderr, "rsx-sig: record "
							"%lu: %.8s\n",
							r->records, rec);
				}
				r->records++;
			} else if (buf[j] == '#') {
				rec[inrec++] = '#';
			} else if (buf[j] != pattern(r->pattern++)) {
				if (r->bad++ < 5)
					fprintf(stderr, "rsx-sig: byte %llu: "
						"%c\n", r->pattern - 1, buf[j]);
			}
		}
	}
	if (inrec)
		r->bad++;
	printf("reader: pattern %llu records %lu bad %lu\n", r->pattern,
	       r->records, r->bad);
	return NULL;
}

static struct addrinfo *resolve(const char *host, const char *port,
				int passive)
{
	struct addrinfo hints, *ai;
	int rc;

	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	rc = getaddrinfo(host, port, &hints, &ai);
	if (rc) {
		fprintf(stderr, "rsx-sig: %s: %s\n", host ? host : "*",
			gai_strerror(rc));
		exit(2);
	}
	return ai;
}

static int listener(const char *addr, const char *port)
{
	struct addrinfo *ai = resolve(addr, port, 1);
	int one = 1, l;

	l = socket(ai->ai_family, SOCK_STREAM, 0);
	if (l < 0)
		die("socket");
	setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l, ai->ai_addr, ai->ai_addrlen) || listen(l, 4))
		die("bind/listen");
	freeaddrinfo(ai);
	return l;
}

static int connector(const char *host, const char *port, const char *src)
{
	struct addrinfo *ai = resolve(host, port, 0), *b;
	int fd;

	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd < 0)
		die("socket");
	if (src) {
		b = resolve(src, "0", 1);
		if (bind(fd, b->ai_addr, b->ai_addrlen))
			die("bind");
		freeaddrinfo(b);
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen))
		die("connect");
	freeaddrinfo(ai);
	return fd;
}

int main(int argc, char **argv)
{
	const char *host = NULL, *port = NULL, *bind_addr = NULL;
	unsigned long long total = 8 << 20;
	size_t chunk = 64;
	long usec = 200;
	int restart = 0, opt, l, fd, c;
	struct rres rr = { 0 };
	struct wres wr;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	sigset_t al, old;
	pthread_t t;
	char byte;

	if (argc < 2)
		goto usage;
	optind = 2;
	while ((opt = getopt(argc, argv, "c:p:b:n:k:i:r")) != -1) {
		switch (opt) {
		case 'c': host = optarg; break;
		case 'p': port = optarg; break;
		case 'b': bind_addr = optarg; break;
		case 'n': total = strtoull(optarg, NULL, 0); break;
		case 'k': chunk = strtoul(optarg, NULL, 0); break;
		case 'i': usec = strtol(optarg, NULL, 0); break;
		case 'r': restart = 1; break;
		default: goto usage;
		}
	}
	if (!chunk || usec <= 0 || usec >= 1000000)
		goto usage;
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "pair")) {
		l = listener("127.0.0.1", "0");
		if (getsockname(l, (struct sockaddr *)&ss, &len))
			die("getsockname");
		c = socket(ss.ss_family, SOCK_STREAM, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&ss, len))
			die("connect");
		fd = accept(l, NULL, NULL);
		if (fd < 0)
			die("accept");
		close(l);
		/* the reader thread never takes SIGALRM */
		sigemptyset(&al);
		sigaddset(&al, SIGALRM);
		pthread_sigmask(SIG_BLOCK, &al, &old);
		rr.fd = c;
		if (pthread_create(&t, NULL, reader, &rr))
			die("pthread_create");
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		writer(fd, total, chunk, usec, restart, &wr);
		if (close(fd))
			die("close");
		pthread_join(t, NULL);
		if (rr.bad || rr.pattern != wr.sent ||
		    rr.records != (unsigned long)records) {
			fprintf(stderr, "rsx-sig: the reader's count differs\n");
			return 1;
		}
		return 0;
	}
	if (!strcmp(argv[1], "server") && port) {
		l = listener(bind_addr, port);
		fd = accept(l, NULL, NULL);
		if (fd < 0)
			die("accept");
		close(l);
		/* the peer's first: a HELLO of its library comes before it */
		if (recv(fd, &byte, 1, MSG_WAITALL) != 1)
			die("recv");
		writer(fd, total, chunk, usec, restart, &wr);
		if (close(fd))
			die("close");
		return 0;
	}
	if (!strcmp(argv[1], "client") && host && port) {
		rr.fd = connector(host, port, bind_addr);
		byte = 'g';
		if (send(rr.fd, &byte, 1, 0) != 1)
			die("send");
		reader(&rr);
		close(rr.fd);
		return rr.bad ? 1 : 0;
	}
usage:
	fprintf(stderr, "usage: rsx-sig pair|server|client [-c HOST] [-p PORT] "
		"[-b ADDR] [-n BYTES] [-k CHUNK] [-i USEC] [-r]\n");
	return 2;
}
