// SPDX-License-Identifier: MIT
/*
 * rsx-load: many concurrent TCP connections multiplexed with epoll, for the
 * load and soak tests (tests/rdma/load.sh, tools/soak.sh).
 *
 *   rsx-load server -l ADDR -p PORT [-r READYFILE]
 *       accept forever, echo every connection (non-blocking, epoll, with
 *       back-pressure); SIGUSR1 prints the counts, SIGTERM prints them
 *       and exits 0.
 *   rsx-load hold -c ADDR -p PORT [-b BIND] [-n N] [-P ROUNDS] [-M MAX]
 *                 [-B BULK] [-e EVERY] [-d DIR] [-T SECONDS]
 *       open N connections one after the other (each: connect, one byte
 *       echoed: the negotiation), timing each; then run a mixed workload
 *       on all of them at once: every EVERY-th connection sends BULK bytes,
 *       the others ROUNDS ping-pongs of 1..MAX bytes; every byte echoed is
 *       checked.  Then close them all.
 *       -S SECS (a benchmark of how many it can hold, tools/many-conns.sh):
 *       stop opening after SECS seconds or at the first connection that
 *       fails, hold the ones open, print progress every 500.
 *   rsx-load soak -c ADDR -p PORT [-b BIND] [-t SECONDS] [-C CONC] [-w WARM]
 *                 [-d DIR] ...
 *       WARM connections first, then for SECONDS keep CONC connections
 *       running, each a short workload (registered with epoll before its
 *       first byte, so it is upgraded while in the set), closed when done
 *       and replaced by a new one.
 *
 * With -d DIR the client stops at named points ("one", "setup", "done" for
 * hold; "warm", "end" for soak): it writes DIR/NAME (its pid) and waits
 * for DIR/NAME.go, so a test can look at both live processes there.
 * Prints "rsx-load: ok ..." and exits 0 when every byte was right; 1 on
 * wrong data, 2 on errors.
 */
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ 65536

static void die(const char *what)
{
	fprintf(stderr, "rsx-load: %s: %s\n", what, strerror(errno));
	exit(2);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void addr_of(struct sockaddr_in *sa, const char *host, int port)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons(port);
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
		fprintf(stderr, "rsx-load: bad IPv4 address %s\n", host);
		exit(2);
	}
}

static void nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl");
}

/* --- server --------------------------------------------------------------- */

struct echo {
	int fd;
	size_t len, off;	/* bytes in buf, bytes of them written */
	char buf[BUFSZ];
};

static volatile sig_atomic_t got_usr1, got_term;
static void on_sig(int sig)
{
	if (sig == SIGUSR1)
		got_usr1 = 1;
	else
		got_term = 1;
}

static int server(const char *host, int port, const char *ready)
{
	unsigned long accepted = 0, closed = 0, errors = 0;
	unsigned long long bytes = 0;
	struct epoll_event ev, evs[64];
	struct sockaddr_in sa;
	struct sigaction act;
	int lfd, ep, one = 1, i, n;

	memset(&act, 0, sizeof(act));
	act.sa_handler = on_sig;
	sigaction(SIGUSR1, &act, NULL);
	sigaction(SIGTERM, &act, NULL);
	addr_of(&sa, host, port);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	if (listen(lfd, 4096) < 0)
		die("listen");
	nonblock(lfd);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) < 0)
		die("epoll_ctl listener");
	if (ready) {
		FILE *f = fopen(ready, "w");

		if (!f)
			die(ready);
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	for (;;) {
		if (got_usr1 || got_term) {
			printf("server: accepted=%lu open=%lu closed=%lu errors=%lu bytes=%llu\n",
			       accepted, accepted - closed, closed, errors, bytes);
			fflush(stdout);
			got_usr1 = 0;
			if (got_term)
				return 0;
		}
		n = epoll_wait(ep, evs, 64, 100);
		if (n < 0 && errno != EINTR)
			die("epoll_wait");
		for (i = 0; i < n; i++) {
			struct echo *c = evs[i].data.ptr;
			ssize_t r;

			if (!c) {
				int fd;

				while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
					c = malloc(sizeof(*c));
					if (!c)
						die("malloc");
					c->fd = fd;
					c->len = c->off = 0;
					ev.events = EPOLLIN | EPOLLRDHUP;
					ev.data.ptr = c;
					if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
						die("epoll_ctl add");
					accepted++;
				}
				if (errno != EAGAIN && errno != EINTR &&
				    errno != ECONNABORTED)
					die("accept4");
				continue;
			}
			for (;;) {
				if (c->off < c->len) {
					r = write(c->fd, c->buf + c->off, c->len - c->off);
					if (r < 0 && errno == EAGAIN)
						break;
					if (r < 0)
						goto drop;
					c->off += r;
					bytes += r;
					continue;
				}
				c->len = c->off = 0;
				r = read(c->fd, c->buf, BUFSZ);
				if (r < 0 && errno == EAGAIN)
					break;
				if (r <= 0)
					goto drop;
				c->len = r;
			}
			/* waiting for room: stop reading (back-pressure) */
			ev.events = c->off < c->len ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
			ev.data.ptr = c;
			if (epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev) < 0)
				die("epoll_ctl mod");
			continue;
drop:
			if (r < 0)
				errors++;
			epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			free(c);
			closed++;
		}
	}
}

/* --- clients -------------------------------------------------------------- */

/* Byte k of connection seed's stream. */
static inline uint8_t pat(uint64_t seed, uint64_t k)
{
	uint64_t x = (seed ^ (k >> 3)) * 0x9e3779b97f4a7c15ULL;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 32;
	return (uint8_t)(x >> ((k & 7) * 8));
}

static uint32_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return (uint32_t)(*s >> 16);
}

struct conn {
	int fd;
	int bulk;
	uint64_t seed, rng;
	uint64_t tx, rx;	/* bytes sent, bytes echoed and checked */
	uint64_t goal;		/* this round (ping-pong) or everything (bulk) */
	uint64_t total;		/* everything */
	int rounds;		/* ping-pong rounds still to start */
	uint32_t events;
};

static struct {
	const char *host, *bind, *dir;
	int port, n, rounds, maxmsg, every, conc, warm, secs, timeout;
	int setup_secs;		/* -S: setup budget, soft failures */
	uint64_t bulk;
} opt = {
	.n = 100, .rounds = 20, .maxmsg = 2000, .every = 4, .bulk = 262144,
	.conc = 16, .warm = 20, .secs = 60, .timeout = 600,
};

static int ep;
static unsigned long bad, done_conns, opened, bulk_conns, ping_conns;
static unsigned long long moved;

static void pause_at(const char *name)
{
	char path[4096], go[4200];
	struct stat st;
	FILE *f;
	int i;

	if (!opt.dir)
		return;
	snprintf(path, sizeof(path), "%s/%s", opt.dir, name);
	snprintf(go, sizeof(go), "%s.go", path);
	fflush(stdout);
	f = fopen(path, "w");
	if (!f)
		die(path);
	fprintf(f, "%d\n", (int)getpid());
	fclose(f);
	for (i = 0; stat(go, &st) < 0; i++) {
		if (i > 20 * 600) {
			fprintf(stderr, "rsx-load: nobody touched %s\n", go);
			exit(2);
		}
		usleep(50000);
	}
}

/* A connection to the server; with -S, -1 and a message on failure. */
static int dial(void)
{
	struct sockaddr_in sa, ba;
	int fd, one = 1;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		goto fail;
	if (opt.bind) {
		addr_of(&ba, opt.bind, 0);
		if (bind(fd, (struct sockaddr *)&ba, sizeof(ba)) < 0)
			goto fail;
	}
	addr_of(&sa, opt.host, opt.port);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
fail:
	if (!opt.setup_secs)
		die(fd < 0 ? "socket" : "connect");
	printf("setup: connection failed: %s\n", strerror(errno));
	if (fd >= 0)
		close(fd);
	return -1;
}

static void plan(struct conn *c, int fd, uint64_t seed, int bulk,
		 uint64_t bulkbytes, int rounds)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	c->seed = seed;
	c->rng = seed * 2 + 1;
	c->bulk = bulk;
	if (bulk) {
		c->total = c->goal = bulkbytes;
	} else {
		c->rounds = rounds;
		c->total = 0;
	}
	opened++;
	if (bulk)
		bulk_conns++;
	else
		ping_conns++;
}

/* The next ping-pong round, once the last one came back whole. */
static void next_round(struct conn *c)
{
	if (!c->bulk && c->rx == c->goal && c->rounds > 0) {
		c->goal += 1 + rnd(&c->rng) % opt.maxmsg;
		c->rounds--;
	}
}

static int finished(const struct conn *c)
{
	return c->rx == c->goal && (c->bulk || c->rounds == 0);
}

static void want(struct conn *c, uint32_t events)
{
	struct epoll_event ev;

	if (events == c->events)
		return;
	ev.events = events;
	ev.data.ptr = c;
	if (epoll_ctl(ep, c->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c->fd, &ev) < 0)
		die("epoll_ctl");
	c->events = events;
}

/* Move what can move now; 1 when the connection is finished. */
static int pump(struct conn *c)
{
	static uint8_t buf[BUFSZ];
	ssize_t r;
	size_t len, i;
	int blocked = 0;

	for (;;) {
		next_round(c);
		if (finished(c))
			return 1;
		/* write: up to the goal, at most 256 KiB ahead of the echo */
		if (!blocked && c->tx < c->goal && c->tx - c->rx < 262144) {
			len = c->goal - c->tx;
			if (len > BUFSZ)
				len = BUFSZ;
			for (i = 0; i < len; i++)
				buf[i] = pat(c->seed, c->tx + i);
			r = write(c->fd, buf, len);
			if (r < 0 && errno != EAGAIN)
				die("write");
			if (r > 0) {
				c->tx += r;
				continue;
			}
			blocked = 1;
		}
		r = read(c->fd, buf, BUFSZ);
		if (r < 0 && errno == EAGAIN)
			break;
		if (r < 0)
			die("read");
		if (r == 0 || c->rx + r > c->tx) {
			fprintf(stderr, "rsx-load: fd %d: %s at %llu\n", c->fd,
				r ? "more bytes than sent" : "early EOF",
				(unsigned long long)c->rx);
			bad++;
			return 1;
		}
		for (i = 0; i < (size_t)r; i++)
			if (buf[i] != pat(c->seed, c->rx + i)) {
				fprintf(stderr, "rsx-load: fd %d: wrong byte at %llu\n",
					c->fd, (unsigned long long)(c->rx + i));
				bad++;
				return 1;
			}
		c->rx += r;
		moved += r;
	}
	want(c, EPOLLIN | (c->tx < c->goal && c->tx - c->rx < 262144 ? EPOLLOUT : 0));
	return 0;
}

static void retire(struct conn *c)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
	if (close(c->fd) < 0)
		die("close");
	c->fd = -1;
	done_conns++;
}

/* Run the epoll loop until every connection of cs[0..n) is finished;
 * refill(c) may give a finished slot a new connection (returns 1). */
static void run(struct conn *cs, int n, int (*refill)(struct conn *))
{
	struct epoll_event evs[256];
	int live = 0, i, k;

	/*
	 * A connection done at its first pump and refilled is looked at again
	 * (i--), and counted then: counting it here as well left "live" one
	 * too high for good, and the loop below waited for a connection that
	 * was not there.
	 */
	for (i = 0; i < n; i++)
		if (cs[i].fd >= 0) {
			live++;
			if (pump(&cs[i])) {
				retire(&cs[i]);
				live--;
				if (refill && refill(&cs[i]))
					i--;
			}
		}
	while (live > 0) {
		k = epoll_wait(ep, evs, 256, 10000);
		if (k < 0 && errno != EINTR)
			die("epoll_wait");
		if (k == 0) {
			fprintf(stderr, "rsx-load: 10 s without an event, %d live\n", live);
			/* what each stuck connection waits for */
			for (i = 0; i < n && live <= 16; i++)
				if (cs[i].fd >= 0)
					fprintf(stderr, "rsx-load:   fd %d: %s, sent %llu, echoed %llu, goal %llu, %d rounds to go, waits for%s%s\n",
						cs[i].fd, cs[i].bulk ? "bulk" : "ping-pong",
						(unsigned long long)cs[i].tx,
						(unsigned long long)cs[i].rx,
						(unsigned long long)cs[i].goal,
						cs[i].rounds,
						cs[i].events & EPOLLIN ? " EPOLLIN" : "",
						cs[i].events & EPOLLOUT ? " EPOLLOUT" : "");
		}
		for (i = 0; i < k; i++) {
			struct conn *c = evs[i].data.ptr;

			while (c->fd >= 0 && pump(c)) {
				retire(c);
				live--;
				if (!refill || !refill(c))
					break;
				live++;
			}
		}
	}
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static int hold(void)
{
	struct conn *cs = calloc(opt.n, sizeof(*cs));
	double *dt = calloc(opt.n, sizeof(*dt)), t0, t1, sum = 0;
	uint8_t b;
	int i, fd;

	if (!cs || !dt)
		die("calloc");
	t0 = now();
	for (i = 0; i < opt.n; i++) {
		double s = now();

		if (opt.setup_secs && s - t0 > opt.setup_secs) {
			printf("setup: stopped at the time budget of %d s\n",
			       opt.setup_secs);
			break;
		}
		fd = dial();
		if (fd < 0)
			break;
		plan(&cs[i], fd, 1000003ULL * (i + 1), i % opt.every == opt.every - 1,
		     opt.bulk, opt.rounds);
		/* one byte there and back: the negotiation is over */
		b = pat(cs[i].seed, 0);
		if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1) {
			if (!opt.setup_secs)
				die("first byte");
			printf("setup: first byte on connection %d: %s\n", i + 1,
			       strerror(errno));
			close(fd);
			break;
		}
		if (b != pat(cs[i].seed, 0))
			bad++;
		cs[i].tx = cs[i].rx = 1;
		if (!cs[i].bulk)
			cs[i].goal = 1;
		else
			cs[i].total = cs[i].goal = opt.bulk + 1;
		dt[i] = now() - s;
		sum += dt[i];
		nonblock(fd);
		if (i == 0)
			pause_at("one");
		if (opt.setup_secs && (i + 1) % 500 == 0) {
			printf("progress: %d connections in %.1f s\n", i + 1,
			       now() - t0);
			fflush(stdout);
		}
	}
	if (i == 0) {
		printf("setup: no connection\n");
		return 2;
	}
	opt.n = i;
	t1 = now();
	qsort(dt, opt.n, sizeof(*dt), cmp_d);
	printf("setup: %d connections in %.2f s; per connection (connect + first byte echoed) ms: mean %.2f min %.2f median %.2f p90 %.2f max %.2f\n",
	       opt.n, t1 - t0, sum / opt.n * 1e3, dt[0] * 1e3,
	       dt[opt.n / 2] * 1e3, dt[opt.n * 9 / 10] * 1e3, dt[opt.n - 1] * 1e3);
	pause_at("setup");
	t0 = now();
	run(cs, opt.n, NULL);
	t1 = now();
	printf("workload: %lu ping-pong + %lu bulk connections, %llu bytes echoed and checked in %.2f s\n",
	       ping_conns, bulk_conns, moved, t1 - t0);
	pause_at("done");
	return 0;
}

static double soak_end;
static long soak_quota;
static uint64_t soak_seq;

static int soak_refill(struct conn *c)
{
	uint64_t s;

	if (soak_quota <= 0 || now() >= soak_end)
		return 0;
	soak_quota--;
	s = ++soak_seq;
	plan(c, dial(), s * 7919 + 17, s % 8 == 0, 65536, 1 + s % 4);
	nonblock(c->fd);
	/* in the epoll set before the first byte: upgraded while registered */
	want(c, EPOLLIN);
	return 1;
}

static void soak_phase(struct conn *cs, long quota, double secs)
{
	int i;

	soak_quota = quota;
	soak_end = now() + secs;
	for (i = 0; i < opt.conc; i++)
		if (!soak_refill(&cs[i]))
			cs[i].fd = -1;
	run(cs, opt.conc, soak_refill);
}

static int soak(void)
{
	struct conn *cs = calloc(opt.conc, sizeof(*cs));
	unsigned long warm;
	double t0;

	if (!cs)
		die("calloc");
	/* warm-up: devices opened, libraries loaded, pools grown */
	soak_phase(cs, opt.warm, 1e9);
	warm = done_conns;
	printf("warm-up: %lu connections\n", warm);
	pause_at("warm");
	t0 = now();
	soak_phase(cs, 1L << 40, opt.secs);
	printf("soak: %lu connections (%lu ping-pong, %lu bulk) opened, worked and closed in %.1f s, %d at a time, %llu bytes echoed and checked\n",
	       done_conns - warm, ping_conns, bulk_conns, now() - t0, opt.conc,
	       moved);
	pause_at("end");
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: rsx-load server -l ADDR -p PORT [-r READY]\n"
		"       rsx-load hold|soak -c ADDR -p PORT [-b BIND] [-n N] [-P ROUNDS] [-M MAX]\n"
		"                [-B BULK] [-e EVERY] [-t SECS] [-C CONC] [-w WARM] [-d DIR] [-T TIMEOUT]\n"
		"                [-S SETUP_SECS]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *mode, *ready = NULL;
	int o, rc;

	if (argc < 2)
		usage();
	mode = argv[1];
	optind = 2;
	while ((o = getopt(argc, argv, "l:c:p:b:r:n:P:M:B:e:t:C:w:d:T:S:")) != -1) {
		switch (o) {
		case 'l': case 'c': opt.host = optarg; break;
		case 'p': opt.port = atoi(optarg); break;
		case 'b': opt.bind = optarg; break;
		case 'r': ready = optarg; break;
		case 'n': opt.n = atoi(optarg); break;
		case 'P': opt.rounds = atoi(optarg); break;
		case 'M': opt.maxmsg = atoi(optarg); break;
		case 'B': opt.bulk = strtoull(optarg, NULL, 0); break;
		case 'e': opt.every = atoi(optarg); break;
		case 't': opt.secs = atoi(optarg); break;
		case 'C': opt.conc = atoi(optarg); break;
		case 'w': opt.warm = atoi(optarg); break;
		case 'd': opt.dir = optarg; break;
		case 'T': opt.timeout = atoi(optarg); break;
		case 'S': opt.setup_secs = atoi(optarg); break;
		default: usage();
		}
	}
	if (!opt.host || !opt.port || opt.n < 1 || opt.every < 1 ||
	    opt.maxmsg < 1 || opt.conc < 1)
		usage();
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(mode, "server"))
		return server(opt.host, opt.port, ready);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		die("epoll_create1");
	alarm(opt.timeout);
	if (!strcmp(mode, "hold"))
		rc = hold();
	else if (!strcmp(mode, "soak"))
		rc = soak();
	else
		usage();
	if (bad || done_conns != opened) {
		printf("rsx-load: FAILED: %lu connections with wrong data, %lu of %lu finished\n",
		       bad, done_conns, opened);
		return 1;
	}
	printf("rsx-load: ok, %lu connections, every byte right\n", done_conns);
	return rc;
}
