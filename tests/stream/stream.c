// SPDX-License-Identifier: MIT
/*
 * rsx-stream: a TCP (or Unix domain stream socket) test peer that checks
 * every byte.
 *
 * Both ends send a pseudo-random byte stream (xorshift, seeded per
 * direction) in random-sized pieces through a random choice of write, send,
 * writev and sendmsg, and read the other direction through read, recv,
 * readv, recvmsg, recv(MSG_WAITALL) and recv(MSG_PEEK)+read, comparing each
 * byte with the generator.  Sending and receiving run in two threads, on the
 * same socket, at once.
 *
 *   rsx-stream server -p PORT [-l ADDR] [-6] [options]
 *   rsx-stream client -c HOST -p PORT [-b BIND] [options]
 *   rsx-stream server|client -U PATH [options]
 *     -U PATH   a Unix domain stream socket at PATH instead of TCP (the
 *               kernel's own local path, without TCP; rsockx-ab's "Unix
 *               socket" column): the server removes PATH if it is there,
 *               binds and listens, the client connects to PATH; -c, -l,
 *               -p, -b and -6 are then ignored
 *   options (both ends must agree):
 *     -n BYTES  bytes each way (default 1M; 0: none that way, see -d)
 *     -d c2s|s2c|both   direction of the data (default both)
 *     -M MAX    largest piece (default 65536)
 *     -s SEED   seed of the piece sizes and operations
 *     -f        the server sends a 7-byte banner before anything else
 *               (a server that speaks first: no upgrade)
 *   Like most servers, the server sends only after the first byte came in
 *   (when the client sends at all); -f makes it speak first.
 *     -H        half-close: the sender ends with shutdown(SHUT_WR) and
 *               the reader must then see EOF (default: close at the end)
 *     -u        leave the last 100 bytes unread and close (tests close
 *               with unread data; only the sender's check counts)
 *     -P COUNT  ping-pong COUNT times 64 bytes, print latency percentiles
 *               (p50, p90, p99, p99.9) and the mean round trip, timed
 *               with the time-stamp counter like ib_write_lat (x86-64)
 *     -T BYTES  throughput: the client writes BYTES in 1 MiB writes
 *     -r COUNT  that many connections, one after another (default 1)
 *     -w MS     the server waits MS ms after accept() before it reads or
 *               writes (so the client's first bytes go out before any
 *               answer to its HELLO can come back)
 *     -B BYTES  SO_SNDBUF and SO_RCVBUF of the socket (the server's
 *               listener, inherited by the accepted one): small buffers
 *               keep a writer from handing all its bytes to TCP before
 *               the answer to its HELLO can come back (loopback's
 *               autotuning grows them to megabytes)
 *     -D USEC   pause USEC microseconds after each piece sent, so that a
 *               stream lasts long enough to move onto a queue pair in
 *               its middle (out-of-band upgrade tests)
 *     -C        (client, with -r) time each connection from socket() to
 *               the end of close(), and print the connections per second
 *               and the percentiles of that time
 *     -k        tolerate the stream ending early (fault tests): the
 *               bytes that came must still be the right ones; then print
 *               "rsx-stream: cut ..." with the bytes sent and received
 *               intact and how each direction ended (EOF or the errno
 *               name), and exit 3.  SIGPIPE is ignored.
 *
 * Prints "rsx-stream: ok ..." and exits 0, or says what went wrong and
 * exits 1 (wrong data) or 2 (error), or 3 (cut short, with -k).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

static uint64_t nbytes = 1 << 20, tput_bytes;
static unsigned int maxpiece = 65536, seed = 1, pingpong, pace_us;
static int server_first, halfclose, unread, dir_c2s = 1, dir_s2c = 1;
static int is_server, repeat = 1, accept_wait_ms, keepgoing, sockbuf;

struct gen {
	uint64_t s;
};

static uint8_t gen_byte(struct gen *g)
{
	g->s ^= g->s << 13;
	g->s ^= g->s >> 7;
	g->s ^= g->s << 17;
	return g->s >> 24;
}

static unsigned int rnd(unsigned int *st, unsigned int n)
{
	*st = *st * 1103515245 + 12345;
	return (*st >> 8) % n;
}

static void die(const char *what)
{
	fprintf(stderr, "rsx-stream: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/*
 * The clock of each round trip: the CPU's time-stamp counter where there
 * is one, scaled to ns by the run's own CLOCK_MONOTONIC time afterwards,
 * as perftest's ib_write_lat (the raw-verbs column) does it.  Where the
 * kernel has no stable TSC (the emulated test VM, on its HPET),
 * clock_gettime is a system call of 2 to 5 us, and one of them fell into
 * every round trip measured.
 */
#if defined(__x86_64__)
static uint64_t ticks(void)
{
	return __rdtsc();
}
#else
static uint64_t ticks(void)
{
	return now_ns();
}
#endif

static void write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t n;

	while (len) {
		n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("write");
		p += n;
		len -= n;
	}
}

static void read_all(int fd, void *buf, size_t len)
{
	char *p = buf;
	ssize_t n;

	while (len) {
		n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0) {
			fprintf(stderr, "rsx-stream: early EOF\n");
			exit(1);
		}
		if (n < 0)
			die("read");
		p += n;
		len -= n;
	}
}

struct side {
	int fd;
	uint64_t bytes;
	unsigned int st;
	struct gen g;
	uint64_t hash;
	const char *err;
	uint64_t done;		/* bytes sent, or received intact */
	int end_errno;		/* how it ended early: 0 EOF, else errno */
};

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	while (n--)
		h = (h ^ *p++) * 0x100000001b3ull;
	return h;
}

/* One piece through a randomly chosen call; returns bytes sent. */
static ssize_t send_piece(int fd, uint8_t *buf, size_t n, unsigned int *st)
{
	struct iovec iov[3];
	struct msghdr mh = { .msg_iov = iov };
	size_t a, b;

	switch (rnd(st, 4)) {
	case 0:
		return write(fd, buf, n);
	case 1:
		return send(fd, buf, n, MSG_NOSIGNAL);
	case 2:
		a = n / 3;
		b = n / 2;
		iov[0] = (struct iovec){ buf, a };
		iov[1] = (struct iovec){ buf + a, b - a };
		iov[2] = (struct iovec){ buf + b, n - b };
		return writev(fd, iov, 3);
	default:
		iov[0] = (struct iovec){ buf, n };
		mh.msg_iovlen = 1;
		return sendmsg(fd, &mh, MSG_NOSIGNAL);
	}
}

static pthread_mutex_t first_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t first_cond = PTHREAD_COND_INITIALIZER;
static int first_seen;

static void first_byte_seen(void)
{
	pthread_mutex_lock(&first_lock);
	first_seen = 1;
	pthread_cond_broadcast(&first_cond);
	pthread_mutex_unlock(&first_lock);
}

static void *sender(void *arg)
{
	struct side *sd = arg;
	uint8_t *buf = malloc(maxpiece);
	uint64_t left = sd->bytes;
	size_t n, i, off;
	ssize_t k;

	sd->hash = 0xcbf29ce484222325ull;
	if (is_server && dir_c2s && !server_first) {
		pthread_mutex_lock(&first_lock);
		while (!first_seen)
			pthread_cond_wait(&first_cond, &first_lock);
		pthread_mutex_unlock(&first_lock);
	}
	while (left) {
		n = 1 + rnd(&sd->st, maxpiece);
		if (n > left)
			n = left;
		for (i = 0; i < n; i++)
			buf[i] = gen_byte(&sd->g);
		sd->hash = fnv(sd->hash, buf, n);
		for (off = 0; off < n; off += k) {
			k = send_piece(sd->fd, buf + off, n - off, &sd->st);
			if (k < 0 && errno == EINTR) {
				k = 0;
				continue;
			}
			if (k > 0)
				sd->done += k;
			if (k <= 0) {
				sd->end_errno = k < 0 ? errno : 0;
				sd->err = "send failed";
				free(buf);
				return NULL;
			}
		}
		left -= n;
		if (pace_us && left)
			usleep(pace_us);
	}
	if (halfclose && shutdown(sd->fd, SHUT_WR))
		sd->err = "shutdown", sd->end_errno = errno;
	free(buf);
	return NULL;
}

static ssize_t recv_piece(int fd, uint8_t *buf, size_t n, unsigned int *st)
{
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov };
	ssize_t k;

	switch (rnd(st, 6)) {
	case 0:
		return read(fd, buf, n);
	case 1:
		return recv(fd, buf, n, 0);
	case 2:
		iov[0] = (struct iovec){ buf, n / 2 };
		iov[1] = (struct iovec){ buf + n / 2, n - n / 2 };
		return readv(fd, iov, 2);
	case 3:
		iov[0] = (struct iovec){ buf, n };
		mh.msg_iovlen = 1;
		return recvmsg(fd, &mh, 0);
	case 4:
		return recv(fd, buf, n, MSG_WAITALL);
	default:
		/* peeked bytes must be the bytes then read */
		k = recv(fd, buf, n, MSG_PEEK);
		if (k <= 0)
			return k;
		{
			uint8_t *again = malloc(k);
			ssize_t r = read(fd, again, k);

			if (r > 0 && memcmp(again, buf, r)) {
				fprintf(stderr, "rsx-stream: MSG_PEEK saw "
					"other bytes than read\n");
				exit(1);
			}
			free(again);
			return r;
		}
	}
}

static void *receiver(void *arg)
{
	struct side *sd = arg;
	uint8_t *buf = malloc(maxpiece);
	uint64_t got = 0, stop = sd->bytes;
	ssize_t k, i;

	sd->hash = 0xcbf29ce484222325ull;
	if (unread && stop > 100)
		stop -= 100;
	while (got < stop) {
		k = 1 + rnd(&sd->st, maxpiece);
		if ((uint64_t)k > stop - got)
			k = stop - got;
		k = recv_piece(sd->fd, buf, k, &sd->st);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			sd->end_errno = errno;
			sd->err = "receive failed";
			goto out;
		}
		if (k == 0) {
			fprintf(stderr, "rsx-stream: EOF after %llu of %llu "
				"bytes\n", (unsigned long long)got,
				(unsigned long long)sd->bytes);
			sd->err = "early EOF";
			goto out;
		}
		for (i = 0; i < k; i++) {
			if (buf[i] != gen_byte(&sd->g)) {
				fprintf(stderr, "rsx-stream: wrong byte at "
					"offset %llu\n",
					(unsigned long long)(got + i));
				exit(1);
			}
		}
		sd->hash = fnv(sd->hash, buf, k);
		if (!got)
			first_byte_seen();
		got += k;
		sd->done = got;
	}
	first_byte_seen();
	if (halfclose && !unread) {
		k = read(sd->fd, buf, 1);
		if (k != 0) {
			fprintf(stderr, "rsx-stream: no EOF after the data "
				"(%zd)\n", k);
			sd->err = "no EOF";
		}
	}
out:
	free(buf);
	return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void run_pingpong(int fd)
{
	uint64_t *lat, t, t0, c0;
	uint8_t buf[64] = { 0 };
	double ns_per_tick, sum = 0;
	unsigned int i;

	if (is_server) {
		for (i = 0; i < pingpong; i++) {
			read_all(fd, buf, sizeof(buf));
			write_all(fd, buf, sizeof(buf));
		}
		return;
	}
	lat = calloc(pingpong, sizeof(*lat));
	if (!lat)
		die("calloc");
	t0 = now_ns();
	c0 = ticks();
	for (i = 0; i < pingpong; i++) {
		t = ticks();
		buf[0] = i;
		write_all(fd, buf, sizeof(buf));
		read_all(fd, buf, sizeof(buf));
		lat[i] = ticks() - t;
		if (buf[0] != (uint8_t)i) {
			fprintf(stderr, "rsx-stream: ping-pong out of step\n");
			exit(1);
		}
	}
	t = ticks();
	if (t <= c0) {
		fprintf(stderr, "rsx-stream: the time-stamp counter stood still\n");
		exit(1);
	}
	ns_per_tick = (double)(now_ns() - t0) / (t - c0);
	qsort(lat, pingpong, sizeof(*lat), cmp_u64);
	for (i = 0; i < pingpong; i++)
		sum += lat[i];
	printf("rsx-stream: ok pingpong n=%u p50_us=%.1f p90_us=%.1f "
	       "p99_us=%.1f p999_us=%.1f avg_us=%.1f\n", pingpong,
	       lat[pingpong / 2] * ns_per_tick / 1e3,
	       lat[pingpong * 9 / 10] * ns_per_tick / 1e3,
	       lat[pingpong * 99 / 100] * ns_per_tick / 1e3,
	       lat[(uint64_t)pingpong * 999 / 1000] * ns_per_tick / 1e3,
	       sum * ns_per_tick / 1e3 / pingpong);
	free(lat);
}

/* -C: each connection's time from socket() to the end of close(). */
static void print_conn_stats(uint64_t *ns, unsigned int n, uint64_t all)
{
	uint64_t sum = 0;
	unsigned int i;

	qsort(ns, n, sizeof(*ns), cmp_u64);
	for (i = 0; i < n; i++)
		sum += ns[i];
	printf("rsx-stream: ok connect conns=%u conns_per_s=%.1f p50_us=%.1f "
	       "p90_us=%.1f p99_us=%.1f avg_us=%.1f\n", n, n * 1e9 / all,
	       ns[n / 2] / 1e3, ns[n * 9 / 10] / 1e3, ns[n * 99 / 100] / 1e3,
	       sum / 1e3 / n);
	free(ns);
}

static void run_tput(int fd)
{
	size_t sz = 1 << 20;
	uint8_t *buf = malloc(sz);
	uint64_t left = tput_bytes, t = now_ns();
	ssize_t n;

	memset(buf, 0x5a, sz);
	if (is_server) {
		while ((n = read(fd, buf, sz)) > 0)
			left -= n < (ssize_t)left ? (uint64_t)n : left;
		if (left)
			fprintf(stderr, "rsx-stream: %llu bytes missing\n",
				(unsigned long long)left);
		else
			printf("rsx-stream: ok throughput server bytes=%llu\n",
			       (unsigned long long)tput_bytes);
		write_all(fd, "k", 1);
		free(buf);
		return;
	}
	while (left) {
		n = left < sz ? left : sz;
		write_all(fd, buf, n);
		left -= n;
	}
	shutdown(fd, SHUT_WR);
	read_all(fd, buf, 1);
	t = now_ns() - t;
	printf("rsx-stream: ok throughput bytes=%llu MBps=%.1f\n",
	       (unsigned long long)tput_bytes, tput_bytes / (t / 1e3));
	free(buf);
}

/* How one direction ended (for -k): ok, EOF or the errno's name. */
static const char *end_name(const struct side *sd)
{
	if (!sd->err)
		return "ok";
	if (!sd->end_errno)
		return "EOF";
	switch (sd->end_errno) {
	case ECONNRESET: return "ECONNRESET";
	case EPIPE: return "EPIPE";
	case EIO: return "EIO";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECONNABORTED: return "ECONNABORTED";
	default: return strerror(sd->end_errno);
	}
}

static void run(int fd)
{
	struct side tx = { .fd = fd }, rx = { .fd = fd };
	pthread_t tt, rt;
	int sends = is_server ? dir_s2c : dir_c2s;
	int recvs = is_server ? dir_c2s : dir_s2c;
	char banner[8];

	if (server_first) {
		if (is_server)
			write_all(fd, "banner\n", 7);
		else {
			read_all(fd, banner, 7);
			if (memcmp(banner, "banner\n", 7)) {
				fprintf(stderr, "rsx-stream: bad banner\n");
				exit(1);
			}
		}
	}
	if (pingpong) {
		run_pingpong(fd);
		return;
	}
	if (tput_bytes) {
		run_tput(fd);
		return;
	}
	tx.bytes = sends ? nbytes : 0;
	rx.bytes = recvs ? nbytes : 0;
	tx.g.s = 0x9e3779b97f4a7c15ull ^ (is_server ? 2 : 1);
	rx.g.s = 0x9e3779b97f4a7c15ull ^ (is_server ? 1 : 2);
	tx.st = seed * 2 + is_server;
	rx.st = seed * 3 + !is_server;
	pthread_create(&tt, NULL, sender, &tx);
	pthread_create(&rt, NULL, receiver, &rx);
	pthread_join(tt, NULL);
	pthread_join(rt, NULL);
	if (keepgoing && (tx.err || rx.err)) {
		printf("rsx-stream: cut %s sent=%llu received=%llu tx_end=%s "
		       "rx_end=%s\n", is_server ? "server" : "client",
		       (unsigned long long)tx.done,
		       (unsigned long long)rx.done, end_name(&tx),
		       end_name(&rx));
		fflush(stdout);
		exit(3);
	}
	if (tx.err || rx.err) {
		struct side *bad = tx.err ? &tx : &rx;

		fprintf(stderr, "rsx-stream: %s (%s) after %llu bytes\n",
			bad->err, end_name(bad), (unsigned long long)bad->done);
		exit(1);
	}
	printf("rsx-stream: ok %s sent=%llu received=%llu tx=%016llx "
	       "rx=%016llx\n", is_server ? "server" : "client",
	       (unsigned long long)tx.bytes, (unsigned long long)rx.bytes,
	       (unsigned long long)tx.hash, (unsigned long long)rx.hash);
}

static int tcp_socket(const char *host, const char *port, int passive,
		      int family, struct addrinfo **res)
{
	struct addrinfo hints = {
		.ai_family = family, .ai_socktype = SOCK_STREAM,
		.ai_flags = passive ? AI_PASSIVE : 0,
	};
	int err = getaddrinfo(host, port, &hints, res);

	if (err) {
		fprintf(stderr, "rsx-stream: %s: %s\n", host ? host : "*",
			gai_strerror(err));
		exit(2);
	}
	return socket((*res)->ai_family, SOCK_STREAM, 0);
}

/* -U: a Unix domain stream socket and the address of PATH */
static int unix_socket(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		fprintf(stderr, "rsx-stream: %s: socket path too long (at most "
			"%zu bytes)\n", path, sizeof(sa->sun_path) - 1);
		exit(2);
	}
	strcpy(sa->sun_path, path);
	return socket(AF_UNIX, SOCK_STREAM, 0);
}

/* -U server: a socket file left at PATH (an earlier run) goes */
static void unlink_socket(const char *path)
{
	struct stat st;

	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && unlink(path))
		die("unlink");
}

/* -B: before listen() or connect(), so that the window scale fits */
static void set_bufs(int fd)
{
	if (sockbuf &&
	    (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sockbuf, sizeof(sockbuf)) ||
	     setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sockbuf, sizeof(sockbuf))))
		die("setsockopt SO_SNDBUF/SO_RCVBUF");
}

int main(int argc, char **argv)
{
	const char *host = NULL, *port = NULL, *bindaddr = NULL;
	const char *unix_path = NULL;
	struct addrinfo *ai, *bi;
	struct sockaddr_un sa_un;
	int opt, fd, lfd = -1, one = 1, family = AF_UNSPEC, conn_stats = 0;
	uint64_t *conn_ns = NULL, t_all = 0, t_conn;
	unsigned int nconn;

	if (argc < 2 || (strcmp(argv[1], "server") && strcmp(argv[1], "client"))) {
		fprintf(stderr, "usage: rsx-stream server|client [options]\n");
		return 2;
	}
	is_server = !strcmp(argv[1], "server");
	optind = 2;
	while ((opt = getopt(argc, argv, "c:l:p:b:n:d:M:s:fHuP:T:6r:w:kB:D:CU:")) != -1) {
		switch (opt) {
		case 'c': host = optarg; break;
		case 'l': host = optarg; break;
		case 'p': port = optarg; break;
		case 'b': bindaddr = optarg; break;
		case 'n': nbytes = strtoull(optarg, NULL, 0); break;
		case 'd':
			dir_c2s = strcmp(optarg, "s2c") != 0;
			dir_s2c = strcmp(optarg, "c2s") != 0;
			break;
		case 'M': maxpiece = strtoul(optarg, NULL, 0); break;
		case 's': seed = strtoul(optarg, NULL, 0); break;
		case 'f': server_first = 1; break;
		case 'H': halfclose = 1; break;
		case 'u': unread = 1; break;
		case 'P': pingpong = strtoul(optarg, NULL, 0); break;
		case 'T': tput_bytes = strtoull(optarg, NULL, 0); break;
		case '6': family = AF_INET6; break;
		case 'r': repeat = atoi(optarg); break;
		case 'w': accept_wait_ms = atoi(optarg); break;
		case 'k': keepgoing = 1; break;
		case 'B': sockbuf = atoi(optarg); break;
		case 'D': pace_us = strtoul(optarg, NULL, 0); break;
		case 'C': conn_stats = 1; break;
		case 'U': unix_path = optarg; break;
		default: return 2;
		}
	}
	if (!maxpiece || (!unix_path && (!port || (!is_server && !host)))) {
		fprintf(stderr, "rsx-stream: -p (and -c for a client), or -U, "
			"needed\n");
		return 2;
	}
	if (keepgoing)
		signal(SIGPIPE, SIG_IGN);
	if (is_server && unix_path) {
		lfd = unix_socket(unix_path, &sa_un);
		if (lfd < 0)
			die("socket");
		unlink_socket(unix_path);
		set_bufs(lfd);
		if (bind(lfd, (struct sockaddr *)&sa_un, sizeof(sa_un)) ||
		    listen(lfd, 16))
			die("bind/listen");
		printf("rsx-stream: listening\n");
		fflush(stdout);
	} else if (is_server) {
		lfd = tcp_socket(host, port, 1, family, &ai);
		if (lfd < 0)
			die("socket");
		setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		set_bufs(lfd);
		if (bind(lfd, ai->ai_addr, ai->ai_addrlen) || listen(lfd, 16))
			die("bind/listen");
		printf("rsx-stream: listening\n");
		fflush(stdout);
	}
	nconn = repeat;
	if (conn_stats && !is_server && nconn > 0) {
		conn_ns = calloc(nconn, sizeof(*conn_ns));
		if (!conn_ns)
			die("calloc");
		t_all = now_ns();
	}
	for (; repeat > 0; repeat--) {
		first_seen = 0;
		t_conn = now_ns();
		if (is_server) {
			fd = accept(lfd, NULL, NULL);
			if (fd < 0)
				die("accept");
			if (accept_wait_ms)
				usleep(accept_wait_ms * 1000);
		} else if (unix_path) {
			fd = unix_socket(unix_path, &sa_un);
			if (fd < 0)
				die("socket");
			set_bufs(fd);
			if (connect(fd, (struct sockaddr *)&sa_un,
				    sizeof(sa_un)))
				die("connect");
		} else {
			fd = tcp_socket(host, port, 0, family, &ai);
			if (fd < 0)
				die("socket");
			set_bufs(fd);
			if (bindaddr) {
				tcp_socket(bindaddr, "0", 1, ai->ai_family, &bi);
				if (bind(fd, bi->ai_addr, bi->ai_addrlen))
					die("bind");
			}
			if (connect(fd, ai->ai_addr, ai->ai_addrlen))
				die("connect");
		}
		run(fd);
		if (close(fd))
			die("close");
		if (conn_ns)
			conn_ns[nconn - repeat] = now_ns() - t_conn;
		fflush(stdout);
	}
	if (conn_ns)
		print_conn_stats(conn_ns, nconn, now_ns() - t_all);
	return 0;
}
