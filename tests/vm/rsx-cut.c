// SPDX-License-Identifier: MIT
/*
 * rsx-cut: many connections, each streaming both ways at once, every byte
 * checked; for the stress test of the mid-stream cut-over
 * (tests/rdma/cutover.sh), where rsockx moves a connection from TCP to RDMA
 * at some arbitrary point of its streams.
 *
 *   rsx-cut server -l ADDR -p PORT [-r READY] [-n N] [options]
 *       accept; each connection streams and checks as below; with -n,
 *       exit once N connections are finished (else at SIGTERM).
 *   rsx-cut client -c ADDR -p PORT [-b BIND] [-n N] [-C CONC] [options]
 *       N connections (default 1000), CONC open at a time (default 100).
 *   options (each end chooses its own; they need not agree):
 *     -s SEED   seed of everything random (default 1)
 *     -L BYTES  longest payload of one direction (default 1 MiB; the
 *               length of each is log-uniform, 64 bytes to BYTES, or 0)
 *     -D MS     longest delay before the first byte (default 30; half of
 *               the connections start at once)
 *     -P MS     longest pause between two writes (default 3; after one
 *               write in 8) and between two reads (after one in 64)
 *     -H MS     the least time a connection lives (default 0): the
 *               trailer (below) waits for it
 *     -W MS     (client) open the first CONC connections evenly over MS
 *               (default 0: all at once), so that the later ones, opened
 *               as earlier ones finish, come evenly too
 *     -m MODES  how connections are driven, chosen per connection among
 *               the letters given (default "tep"):
 *                 t  blocking socket, a writer and a reader thread
 *                 e  non-blocking, one epoll loop (half edge-triggered;
 *                    half of the client's connect non-blocking)
 *                 p  non-blocking, one poll loop (likewise)
 *     -S SECS   a connection older than SECS (default 60) is stuck: say
 *               where it stands, count it as failed and shut it down
 *               (shutdown(SHUT_RDWR): its calls return), and go on; at
 *               half that age it is said to be slow ("rsx-cut: slow:"),
 *               so that a test can look at it while it still hangs
 *     -T SECS   give up after SECS (default 600), saying what is stuck
 *
 * Each direction of a connection is one stream: a 32-byte header (magic,
 * seed, payload length, connection number), the payload (bytes of a
 * counter-based generator seeded per connection and direction, so any
 * offset can be made again), then a 48-byte trailer, then the end of the
 * stream (shutdown(SHUT_WR)).  Writes are of random sizes (1 byte to
 * 64 KiB), reads too, mixing write/send and read/recv.  The reader
 * compares every payload byte with the generator and keeps an FNV-1a
 * hash; once it has the whole payload of the peer, and its own payload is
 * out, and the connection is at least -H old, each side sends its
 * trailer: the peer's seed, length, hash and number as it received them,
 * and its TCP_INFO bytes_received so far.  Each side checks the peer's
 * trailer against what it sent (both directions end to end), then EOF
 * right after it.
 *
 * The cut-over: the descriptor stays the kernel's TCP socket under
 * rsockx, so TCP_INFO's tcpi_bytes_received, taken at the end of the
 * stream, is how many bytes of it came over TCP (when nothing else of
 * rsockx's travels on the TCP connection): 0 means all came over RDMA,
 * the whole stream length means none did, anything between is the offset
 * where that direction was cut over.  The peer's trailer gives the same
 * for the other direction (up to its trailer).  Both are summarized at
 * the end: "cut DIR: ..." lines, see report().
 *
 * Prints "rsx-cut: ok ..." and exits 0 when every connection was right
 * both ways; says what went wrong and exits 1 (wrong data, early end,
 * connection errors) or 2 (usage, setup errors, timeout).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ 65536
#define HDR 32
#define TRL 48
#define MAGIC_HDR 0x31524448545543ULL	/* "CUTHDR1" */
#define MAGIC_TRL 0x314c5254545543ULL	/* "CUTTRL1" */
#define LT_BUDGET 262144		/* bytes per step of a level-triggered conn */

enum { M_THREAD, M_EPOLL, M_POLL, M_N };
static const char *mode_name[M_N] = { "thread", "epoll", "poll" };

static struct {
	const char *host, *bind, *ready, *modes;
	int port, n, conc, delay_ms, pause_ms, life_ms, ramp_ms, stuck_s, timeout;
	uint64_t seed, maxlen;
	int server;
} opt = {
	.n = 1000, .conc = 100, .delay_ms = 30, .pause_ms = 3, .stuck_s = 60, .timeout = 600,
	.seed = 1, .maxlen = 1 << 20, .modes = "tep",
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	double d = t - now();
	struct timespec ts;

	if (d <= 0)
		return;
	ts.tv_sec = (time_t)d;
	ts.tv_nsec = (long)((d - ts.tv_sec) * 1e9);
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void die(const char *what)
{
	fprintf(stderr, "rsx-cut: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* --- the streams ------------------------------------------------------------ */

static uint64_t mix(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* Word w of the payload of seed: 8 bytes, little-endian in the stream. */
static inline uint64_t word_of(uint64_t seed, uint64_t w)
{
	return mix(seed + w * 0x9e3779b97f4a7c15ULL);
}

/* Payload bytes [k, k + n) of seed into p. */
static void gen(uint64_t seed, uint64_t k, uint8_t *p, size_t n)
{
	uint64_t v;

	while (n && (k & 7)) {
		*p++ = (uint8_t)(word_of(seed, k >> 3) >> ((k & 7) * 8));
		k++;
		n--;
	}
	while (n >= 8) {
		v = htole64(word_of(seed, k >> 3));
		memcpy(p, &v, 8);
		p += 8;
		k += 8;
		n -= 8;
	}
	while (n) {
		*p++ = (uint8_t)(word_of(seed, k >> 3) >> ((k & 7) * 8));
		k++;
		n--;
	}
}

/* -1 when p[0..n) are payload bytes [k, k + n) of seed, else the index of
 * the first wrong one. */
static long verify(uint64_t seed, uint64_t k, const uint8_t *p, size_t n)
{
	uint8_t tmp[512];
	size_t done = 0, m, i;

	while (done < n) {
		m = n - done < sizeof(tmp) ? n - done : sizeof(tmp);
		gen(seed, k + done, tmp, m);
		if (memcmp(tmp, p + done, m)) {
			for (i = 0; tmp[i] == p[done + i]; i++)
				;
			return (long)(done + i);
		}
		done += m;
	}
	return -1;
}

static uint64_t fnv(uint64_t h, const uint8_t *p, size_t n)
{
	while (n--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}
#define FNV0 0xcbf29ce484222325ULL

static void put64(uint8_t *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, 8);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return le64toh(v);
}

/* xorshift64: sizes, pauses, choices (not the data) */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 1 byte to 64 KiB, every power of two as likely as the next */
static size_t piece(uint64_t *s)
{
	uint64_t r = rnd(s);

	return 1 + (size_t)((r >> 8) % (1u << (r % 17)));
}

static double pause_s(uint64_t *s)
{
	return opt.pause_ms ? (double)(rnd(s) % (opt.pause_ms * 1000 + 1)) / 1e6 : 0;
}

/* Bytes that came over TCP on this socket: TCP_INFO's bytes_received,
 * less the peer's FIN, which it counts as one once it is in (the states
 * after a FIN received).  The kernel takes the state before the counters:
 * a FIN that comes in between (under rsockx the end of the stream may come
 * over RDMA before TCP's FIN) would count as a byte, so two reads must
 * agree. */
static uint64_t tcp_received(int fd)
{
	struct tcp_info ti[2];
	socklen_t len;
	int i, k = 0;

	for (i = 0; i < 8; i++) {
		k = i & 1;
		len = sizeof(ti[k]);
		memset(&ti[k], 0, sizeof(ti[k]));
		if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti[k], &len) < 0 ||
		    len < offsetof(struct tcp_info, tcpi_bytes_received) + 8)
			return UINT64_MAX;
		if (i && ti[0].tcpi_state == ti[1].tcpi_state &&
		    ti[0].tcpi_bytes_received == ti[1].tcpi_bytes_received)
			break;
	}
	switch (ti[k].tcpi_state) {	/* the kernel's numbers (net/tcp_states.h) */
	case 6: case 7: case 8: case 9: case 11:	/* TIME_WAIT, CLOSE,
				   CLOSE_WAIT, LAST_ACK, CLOSING */
		return ti[k].tcpi_bytes_received ? ti[k].tcpi_bytes_received - 1 : 0;
	}
	return ti[k].tcpi_bytes_received;
}

/* --- connections -------------------------------------------------------------- */

struct conn {
	int fd, mode, et, connecting, gslot, slot, slow, stuck;
	uint64_t id;
	double t0;		/* connect() or accept() */
	uint64_t rng_tx, rng_rx;
	/* what this side sends: header, len payload bytes of seed, trailer */
	uint64_t seed, len, txoff, chunk_end, txfnv;
	double start_at, pause_until;
	int trl_ready, tx_done;
	uint8_t hdr[HDR], trl[TRL];
	/* what it receives */
	uint64_t rxoff, rseed, rlen, rid, rxfnv;
	int hdr_ok, rx_done, payload_in;	/* payload_in: the whole payload is in */
	int rx_full;		/* the same, as the writer may see it */
	double rx_pause_until;
	uint8_t rhdr[HDR], rtrl[TRL];
	uint64_t tcp_rx;	/* TCP_INFO bytes_received at the end of the stream */
	/* event loops */
	int want_out;
	uint32_t ev;
	double wake_at;
	/* thread mode: the reader tells the writer */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int failed;
	char err[200];
	struct conn *next;
};

#define FAILED(c) __atomic_load_n(&(c)->failed, __ATOMIC_SEQ_CST)

static uint64_t tx_total(const struct conn *c) { return HDR + c->len + TRL; }
static uint64_t rx_total(const struct conn *c) { return HDR + c->rlen + TRL; }

static pthread_mutex_t glock = PTHREAD_MUTEX_INITIALIZER;

/* The first error of a connection is its verdict. */
static void fail(struct conn *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void fail(struct conn *c, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&glock);
	if (!c->err[0]) {
		va_start(ap, fmt);
		vsnprintf(c->err, sizeof(c->err), fmt, ap);
		va_end(ap);
	}
	__atomic_store_n(&c->failed, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_unlock(&glock);
}

static struct conn *conn_new(int fd, uint64_t id, int mode)
{
	struct conn *c = calloc(1, sizeof(*c));
	uint64_t s;

	if (!c)
		die("calloc");
	c->fd = fd;
	c->id = id;
	c->mode = mode;
	c->t0 = now();
	s = mix(opt.seed * 0x100000001b3ULL + id * 2 + opt.server);
	c->seed = s;
	c->rng_tx = mix(s + 1) | 1;
	c->rng_rx = mix(s + 2) | 1;
	c->et = mode == M_EPOLL && (rnd(&c->rng_tx) & 1);
	if (rnd(&c->rng_tx) % 16 == 0) {
		c->len = 0;
	} else {
		unsigned int lg = 6, e;

		while (lg < 40 && (2ULL << lg) <= opt.maxlen)
			lg++;
		if ((1ULL << lg) > opt.maxlen)
			lg = 6;
		e = 6 + (unsigned int)(rnd(&c->rng_tx) % (lg - 6 + 1));
		c->len = (1ULL << e) + rnd(&c->rng_tx) % (1ULL << e);
		if (c->len > opt.maxlen)
			c->len = opt.maxlen;
	}
	if (rnd(&c->rng_tx) & 1)
		c->start_at = c->t0;
	else
		c->start_at = c->t0 + (double)(rnd(&c->rng_tx) % (opt.delay_ms * 1000 + 1)) / 1e6;
	put64(c->hdr, MAGIC_HDR);
	put64(c->hdr + 8, c->seed);
	put64(c->hdr + 16, c->len);
	put64(c->hdr + 24, c->id);
	c->txfnv = c->rxfnv = FNV0;
	c->wake_at = 1e300;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	return c;
}

/* Stream bytes [off, off + n) of what c sends, into p. */
static void tx_fill(const struct conn *c, uint64_t off, uint8_t *p, size_t n)
{
	size_t k;

	while (n) {
		if (off < HDR) {
			k = HDR - off < n ? HDR - off : n;
			memcpy(p, c->hdr + off, k);
		} else if (off < HDR + c->len) {
			k = HDR + c->len - off < n ? HDR + c->len - off : n;
			gen(c->seed, off - HDR, p, k);
		} else {
			k = tx_total(c) - off < n ? tx_total(c) - off : n;
			memcpy(p, c->trl + (off - HDR - c->len), k);
		}
		p += k;
		off += k;
		n -= k;
	}
}

/* How many bytes to write now from txoff: the rest of the current piece,
 * up to the trailer while it cannot go yet; 0: nothing now. */
static size_t tx_next(struct conn *c)
{
	uint64_t limit = c->trl_ready ? tx_total(c) : HDR + c->len;

	if (c->txoff >= limit)
		return 0;
	if (c->chunk_end <= c->txoff)
		c->chunk_end = c->txoff + piece(&c->rng_tx);
	return (size_t)((c->chunk_end < limit ? c->chunk_end : limit) - c->txoff);
}

/* r bytes of p (from txoff) were written. */
static void tx_wrote(struct conn *c, const uint8_t *p, size_t r, double t)
{
	uint64_t a = c->txoff > HDR ? c->txoff : HDR;
	uint64_t b = c->txoff + r < HDR + c->len ? c->txoff + r : HDR + c->len;

	if (a < b)
		c->txfnv = fnv(c->txfnv, p + (a - c->txoff), (size_t)(b - a));
	c->txoff += r;
	if (c->txoff >= c->chunk_end && rnd(&c->rng_tx) % 8 == 0)
		c->pause_until = t + pause_s(&c->rng_tx);
}

/* The trailer may go: own payload out, the peer's in, old enough. */
static int trl_may(const struct conn *c, double t)
{
	return c->txoff >= HDR + c->len && c->rx_full &&
	       t >= c->t0 + opt.life_ms / 1e3;
}

static void make_trailer(struct conn *c)
{
	put64(c->trl, MAGIC_TRL);
	put64(c->trl + 8, c->rseed);
	put64(c->trl + 16, c->rlen);
	put64(c->trl + 24, c->rxfnv);
	put64(c->trl + 32, c->rid);
	put64(c->trl + 40, tcp_received(c->fd));
	c->trl_ready = 1;
}

/* n bytes received; -1 (and the connection failed) when they are wrong. */
static int rx_consume(struct conn *c, const uint8_t *p, size_t n)
{
	size_t k;
	long bad;

	while (n) {
		if (c->rxoff < HDR) {
			k = HDR - c->rxoff < n ? HDR - c->rxoff : n;
			memcpy(c->rhdr + c->rxoff, p, k);
			c->rxoff += k;
			if (c->rxoff == HDR) {
				if (get64(c->rhdr) != MAGIC_HDR) {
					fail(c, "bad header magic %016llx",
					     (unsigned long long)get64(c->rhdr));
					return -1;
				}
				c->rseed = get64(c->rhdr + 8);
				c->rlen = get64(c->rhdr + 16);
				c->rid = get64(c->rhdr + 24);
				if (c->rlen > (1ULL << 40)) {
					fail(c, "bad header length %llu",
					     (unsigned long long)c->rlen);
					return -1;
				}
				c->hdr_ok = 1;
				c->payload_in = c->rlen == 0;
			}
		} else if (c->rxoff < HDR + c->rlen) {
			k = HDR + c->rlen - c->rxoff < n ? HDR + c->rlen - c->rxoff : n;
			bad = verify(c->rseed, c->rxoff - HDR, p, k);
			if (bad >= 0) {
				fail(c, "wrong byte at payload offset %llu of %llu (peer %llu seed %016llx): %02x, not %02x",
				     (unsigned long long)(c->rxoff - HDR + bad),
				     (unsigned long long)c->rlen,
				     (unsigned long long)c->rid,
				     (unsigned long long)c->rseed, p[bad],
				     (unsigned int)(uint8_t)(word_of(c->rseed, (c->rxoff - HDR + bad) >> 3) >>
							      (((c->rxoff - HDR + bad) & 7) * 8)));
				return -1;
			}
			c->rxfnv = fnv(c->rxfnv, p, k);
			c->rxoff += k;
			if (c->rxoff == HDR + c->rlen)
				c->payload_in = 1;
		} else if (c->rxoff < rx_total(c)) {
			k = rx_total(c) - c->rxoff < n ? rx_total(c) - c->rxoff : n;
			memcpy(c->rtrl + (c->rxoff - HDR - c->rlen), p, k);
			c->rxoff += k;
		} else {
			fail(c, "%zu bytes after the trailer", n);
			return -1;
		}
		p += k;
		n -= k;
	}
	return 0;
}

/* End of the peer's stream: it must be whole. */
static int rx_eof(struct conn *c)
{
	c->tcp_rx = tcp_received(c->fd);
	if (!c->hdr_ok || c->rxoff != rx_total(c)) {
		fail(c, "early EOF after %llu bytes of %s%llu", (unsigned long long)c->rxoff,
		     c->hdr_ok ? "" : "(no header yet) ",
		     (unsigned long long)(c->hdr_ok ? rx_total(c) : 0));
		return -1;
	}
	c->rx_done = 1;
	return 0;
}

/* The peer's trailer against what was sent (both ends' writers are done). */
static void check_trailer(struct conn *c)
{
	const uint8_t *t = c->rtrl;

	if (c->err[0])
		return;
	if (get64(t) != MAGIC_TRL)
		fail(c, "bad trailer magic");
	else if (get64(t + 8) != c->seed || get64(t + 16) != c->len ||
		 get64(t + 32) != c->id)
		fail(c, "the peer got another stream: seed %016llx len %llu id %llu, sent %016llx %llu %llu",
		     (unsigned long long)get64(t + 8), (unsigned long long)get64(t + 16),
		     (unsigned long long)get64(t + 32), (unsigned long long)c->seed,
		     (unsigned long long)c->len, (unsigned long long)c->id);
	else if (get64(t + 24) != c->txfnv)
		fail(c, "the peer's hash of %llu bytes is %016llx, sent %016llx",
		     (unsigned long long)c->len, (unsigned long long)get64(t + 24),
		     (unsigned long long)c->txfnv);
}

/* --- results ---------------------------------------------------------------- */

struct cutrec {
	uint64_t t, s;		/* bytes over TCP, bytes of the stream */
};

static struct {
	unsigned long done, bad, per_mode[M_N], et, nbconnect, stuck;
	unsigned long long txbytes, rxbytes, tcp_rx_sum;
	struct cutrec *rx, *tx;	/* this side's receive direction, the peer's */
	size_t nrx, ntx, cap;
	unsigned long printed;
	struct conn **live;	/* for the report of what is stuck */
	size_t nlive, livecap;
	double last_done, max_age;	/* the oldest connection finished right */
} st;

static sem_t slots;		/* client: connections that may still open */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static void live_add(struct conn *c)
{
	pthread_mutex_lock(&glock);
	if (st.nlive == st.livecap) {
		st.livecap = st.livecap ? 2 * st.livecap : 256;
		st.live = realloc(st.live, st.livecap * sizeof(*st.live));
		if (!st.live)
			die("realloc");
	}
	c->gslot = (int)st.nlive;
	st.live[st.nlive++] = c;
	pthread_mutex_unlock(&glock);
}

/* Both ways done (or failed): judge, count, close, free. */
static void finish(struct conn *c)
{
	check_trailer(c);
	/* off the list first: the watchdog shuts down only listed ones, so
	 * never a descriptor closed and reused meanwhile */
	pthread_mutex_lock(&glock);
	st.live[c->gslot] = st.live[--st.nlive];
	st.live[c->gslot]->gslot = c->gslot;
	pthread_mutex_unlock(&glock);
	if (close(c->fd) < 0)
		fail(c, "close: %s", strerror(errno));
	pthread_mutex_lock(&glock);
	st.done++;
	st.last_done = now();
	st.per_mode[c->mode]++;
	st.et += c->et;
	if (c->err[0]) {
		st.bad++;
		if (st.printed++ < 30)
			fprintf(stderr, "rsx-cut: %s %llu (%s%s): %s\n",
				opt.server ? "accepted" : "connection",
				(unsigned long long)c->id, mode_name[c->mode],
				c->et ? ", edge-triggered" : "", c->err);
	} else {
		if (st.nrx == st.cap) {
			st.cap = st.cap ? 2 * st.cap : 1024;
			st.rx = realloc(st.rx, st.cap * sizeof(*st.rx));
			st.tx = realloc(st.tx, st.cap * sizeof(*st.tx));
			if (!st.rx || !st.tx)
				die("realloc");
		}
		st.rx[st.nrx].t = c->tcp_rx;
		st.rx[st.nrx++].s = rx_total(c);
		/* the peer counted at its trailer: this side's header and
		 * payload, maybe some of its trailer */
		st.tx[st.ntx].t = get64(c->rtrl + 40);
		st.tx[st.ntx++].s = HDR + c->len;
		if (st.tx[st.ntx - 1].t > HDR + c->len && st.tx[st.ntx - 1].t <= tx_total(c))
			st.tx[st.ntx - 1].t = HDR + c->len;
		st.txbytes += c->len;
		st.rxbytes += c->rlen;
		if (now() - c->t0 > st.max_age)
			st.max_age = now() - c->t0;
		st.tcp_rx_sum += c->tcp_rx;
	}
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&glock);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
	if (!opt.server)
		sem_post(&slots);
}

/* --- thread mode: blocking socket, a writer and a reader -------------------- */

static void *t_reader(void *arg)
{
	struct conn *c = arg;
	uint8_t *buf = malloc(BUFSZ);
	ssize_t r;
	size_t want;

	if (!buf)
		die("malloc");
	for (;;) {
		want = piece(&c->rng_rx);
		r = rnd(&c->rng_rx) & 1 ? read(c->fd, buf, want) : recv(c->fd, buf, want, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fail(c, "read at %llu: %s", (unsigned long long)c->rxoff, strerror(errno));
			break;
		}
		if (r == 0) {
			rx_eof(c);
			break;
		}
		if (rx_consume(c, buf, (size_t)r) < 0)
			break;
		if (c->payload_in && !c->rx_full) {
			pthread_mutex_lock(&c->mu);
			c->rx_full = 1;
			pthread_cond_broadcast(&c->cv);
			pthread_mutex_unlock(&c->mu);
		}
		if (rnd(&c->rng_rx) % 64 == 0)
			sleep_until(now() + pause_s(&c->rng_rx));
	}
	pthread_mutex_lock(&c->mu);
	c->rx_done = 1;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	if (FAILED(c))		/* the writer may be blocked: end it */
		shutdown(c->fd, SHUT_RDWR);
	free(buf);
	return NULL;
}

static pthread_attr_t tattr;

static void *t_writer(void *arg)
{
	struct conn *c = arg;
	uint8_t *buf = malloc(BUFSZ);
	pthread_t rd;
	ssize_t r;
	size_t n;
	int e;

	if (!buf)
		die("malloc");
	e = pthread_create(&rd, &tattr, t_reader, c);
	if (e) {
		errno = e;
		die("pthread_create");
	}
	sleep_until(c->start_at);
	while (!FAILED(c)) {
		n = tx_next(c);
		if (!n) {
			if (c->txoff == tx_total(c))
				break;
			pthread_mutex_lock(&c->mu);
			while (!c->rx_full && !c->rx_done && !FAILED(c))
				pthread_cond_wait(&c->cv, &c->mu);
			pthread_mutex_unlock(&c->mu);
			if (!c->rx_full || FAILED(c))
				break;
			sleep_until(c->t0 + opt.life_ms / 1e3);
			make_trailer(c);
			continue;
		}
		tx_fill(c, c->txoff, buf, n);
		r = rnd(&c->rng_tx) & 1 ? write(c->fd, buf, n) : send(c->fd, buf, n, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			fail(c, "write at %llu: %s", (unsigned long long)c->txoff, strerror(errno));
			shutdown(c->fd, SHUT_RDWR);
			break;
		}
		tx_wrote(c, buf, (size_t)r, now());
		sleep_until(c->pause_until);
	}
	if (!FAILED(c) && shutdown(c->fd, SHUT_WR) < 0)
		fail(c, "shutdown: %s", strerror(errno));
	pthread_join(rd, NULL);
	free(buf);
	finish(c);
	return NULL;
}

static void t_start(struct conn *c)
{
	pthread_attr_t a;
	pthread_t t;
	int e;

	pthread_attr_init(&a);
	pthread_attr_setstacksize(&a, 256 * 1024);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	e = pthread_create(&t, &a, t_writer, c);
	pthread_attr_destroy(&a);
	if (e) {
		errno = e;
		die("pthread_create");
	}
}

/* --- event loops: epoll and poll -------------------------------------------- */

struct engine {
	int kind, ep, wake[2];
	pthread_mutex_t mu;
	struct conn *inbox;
	struct conn **conns;
	int n, cap;
	uint8_t *buf;
	struct pollfd *pfd;
	struct conn **pcon;
};

static struct engine engines[M_N];

/* The events c waits for (level-triggered and poll). */
static uint32_t interest(const struct conn *c, double t)
{
	uint32_t ev = 0;

	if (c->connecting)
		return EPOLLOUT;
	if (!c->rx_done && t >= c->rx_pause_until)
		ev |= EPOLLIN;
	if (c->want_out)
		ev |= EPOLLOUT;
	return ev;
}

/* Move what can move; 1 when the connection is finished. */
static int step(struct engine *e, struct conn *c, uint32_t revents)
{
	double t = now(), w;
	size_t moved = 0, n;
	ssize_t r;

	if (c->connecting) {
		int err = 0;
		socklen_t len = sizeof(err);

		if (!(revents & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
			goto wait;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err) {
			fail(c, "non-blocking connect: %s", strerror(err));
			return 1;
		}
		c->connecting = 0;
		c->t0 = now();
		if (c->start_at < c->t0)
			c->start_at = c->t0;
	}
	/* receive */
	while (!c->rx_done && !FAILED(c) && t >= c->rx_pause_until) {
		n = piece(&c->rng_rx);
		r = rnd(&c->rng_rx) & 1 ? read(c->fd, e->buf, n) : recv(c->fd, e->buf, n, 0);
		if (r > 0) {
			if (rx_consume(c, e->buf, (size_t)r) < 0)
				break;
			c->rx_full = c->payload_in;
			moved += (size_t)r;
			if (rnd(&c->rng_rx) % 64 == 0)
				c->rx_pause_until = t + pause_s(&c->rng_rx);
			if (!c->et && moved > LT_BUDGET)
				break;
			continue;
		}
		if (r == 0) {
			rx_eof(c);
			break;
		}
		if (errno == EAGAIN)
			break;
		if (errno != EINTR)
			fail(c, "read at %llu: %s", (unsigned long long)c->rxoff, strerror(errno));
	}
	/* send */
	moved = 0;
	c->want_out = 0;
	while (!c->tx_done && !FAILED(c) && t >= c->start_at && t >= c->pause_until) {
		n = tx_next(c);
		if (!n) {
			if (c->txoff == tx_total(c)) {
				if (shutdown(c->fd, SHUT_WR) < 0)
					fail(c, "shutdown: %s", strerror(errno));
				c->tx_done = 1;
				break;
			}
			if (!trl_may(c, t))
				break;
			make_trailer(c);
			continue;
		}
		if (!c->et && moved > LT_BUDGET) {
			c->want_out = 1;	/* come back soon */
			break;
		}
		tx_fill(c, c->txoff, e->buf, n);
		r = rnd(&c->rng_tx) & 1 ? write(c->fd, e->buf, n) : send(c->fd, e->buf, n, 0);
		if (r > 0) {
			tx_wrote(c, e->buf, (size_t)r, t);
			moved += (size_t)r;
			continue;
		}
		if (r < 0 && errno == EAGAIN) {
			c->want_out = 1;
			break;
		}
		if (r < 0 && errno != EINTR)
			fail(c, "write at %llu: %s", (unsigned long long)c->txoff, strerror(errno));
	}
	if (FAILED(c) || (c->tx_done && c->rx_done))
		return 1;
wait:
	/* the next time something may move without an event */
	w = 1e300;
	if (!c->connecting && !c->tx_done && !c->want_out) {
		if (t < c->start_at)
			w = c->start_at;
		else if (t < c->pause_until)
			w = c->pause_until;
		else if (c->txoff >= HDR + c->len && !c->trl_ready && c->rx_full)
			w = c->t0 + opt.life_ms / 1e3;
	}
	if (!c->rx_done && t < c->rx_pause_until && c->rx_pause_until < w)
		w = c->rx_pause_until;
	c->wake_at = w;
	if (e->kind == M_EPOLL && !c->et) {
		uint32_t ev = interest(c, t);

		if (ev != c->ev) {
			struct epoll_event ee = { .events = ev, .data.ptr = c };

			if (epoll_ctl(e->ep, EPOLL_CTL_MOD, c->fd, &ee) < 0)
				die("epoll_ctl mod");
			c->ev = ev;
		}
	}
	return 0;
}

static void engine_drop(struct engine *e, struct conn *c)
{
	if (e->kind == M_EPOLL)
		epoll_ctl(e->ep, EPOLL_CTL_DEL, c->fd, NULL);
	e->conns[c->slot] = e->conns[--e->n];
	e->conns[c->slot]->slot = c->slot;
	finish(c);
}

static void engine_adopt(struct engine *e, struct conn *c)
{
	int fl = fcntl(c->fd, F_GETFL);

	if (fl < 0 || fcntl(c->fd, F_SETFL, fl | O_NONBLOCK) < 0)
		die("fcntl");
	if (e->n == e->cap) {
		e->cap *= 2;
		e->conns = realloc(e->conns, e->cap * sizeof(*e->conns));
		e->pfd = realloc(e->pfd, (e->cap + 1) * sizeof(*e->pfd));
		e->pcon = realloc(e->pcon, (e->cap + 1) * sizeof(*e->pcon));
		if (!e->conns || !e->pfd || !e->pcon)
			die("realloc");
	}
	c->slot = e->n;
	e->conns[e->n++] = c;
	if (e->kind == M_EPOLL) {
		struct epoll_event ee = { .data.ptr = c };

		ee.events = c->et ? EPOLLIN | EPOLLOUT | EPOLLET :
			    c->connecting ? EPOLLOUT : EPOLLIN;
		c->ev = ee.events;
		if (epoll_ctl(e->ep, EPOLL_CTL_ADD, c->fd, &ee) < 0)
			die("epoll_ctl add");
	}
	if (!c->connecting && step(e, c, 0))
		engine_drop(e, c);
}

static void *engine_run(void *arg)
{
	struct engine *e = arg;
	struct epoll_event evs[256];
	struct conn *in, *c;
	double t, soon;
	int i, k, timeout;
	char junk[64];

	for (;;) {
		t = now();
		soon = 1e300;
		for (i = 0; i < e->n; i++)
			if (e->conns[i]->wake_at < soon)
				soon = e->conns[i]->wake_at;
		timeout = soon > t + 1 ? 1000 : soon <= t ? 0 : (int)((soon - t) * 1e3) + 1;
		if (e->kind == M_EPOLL) {
			k = epoll_wait(e->ep, evs, 256, timeout);
			if (k < 0 && errno != EINTR)
				die("epoll_wait");
			for (i = 0; i < k; i++) {
				c = evs[i].data.ptr;
				if (!c) {
					while (read(e->wake[0], junk, sizeof(junk)) > 0)
						;
					continue;
				}
				if (step(e, c, evs[i].events))
					engine_drop(e, c);
			}
		} else {
			int np = 1;

			e->pfd[0].fd = e->wake[0];
			e->pfd[0].events = POLLIN;
			for (i = 0; i < e->n; i++) {
				uint32_t ev = interest(e->conns[i], t);

				if (!ev)
					continue;
				e->pfd[np].fd = e->conns[i]->fd;
				e->pfd[np].events = (short)((ev & EPOLLIN ? POLLIN : 0) |
							    (ev & EPOLLOUT ? POLLOUT : 0));
				e->pcon[np++] = e->conns[i];
			}
			k = poll(e->pfd, (nfds_t)np, timeout);
			if (k < 0 && errno != EINTR)
				die("poll");
			if (k > 0 && e->pfd[0].revents)
				while (read(e->wake[0], junk, sizeof(junk)) > 0)
					;
			for (i = 1; k > 0 && i < np; i++) {
				short re = e->pfd[i].revents;

				if (!re)
					continue;
				if (step(e, e->pcon[i], (re & POLLIN ? EPOLLIN : 0) |
					 (re & POLLOUT ? EPOLLOUT : 0) |
					 (re & POLLERR ? EPOLLERR : 0) |
					 (re & POLLHUP ? EPOLLHUP : 0)))
					engine_drop(e, e->pcon[i]);
			}
		}
		pthread_mutex_lock(&e->mu);
		in = e->inbox;
		e->inbox = NULL;
		pthread_mutex_unlock(&e->mu);
		while (in) {
			c = in;
			in = in->next;
			engine_adopt(e, c);
		}
		t = now();
		for (i = 0; i < e->n;) {
			c = e->conns[i];
			if (c->wake_at <= t && step(e, c, 0))
				engine_drop(e, c);	/* the last one moved here */
			else
				i++;
		}
	}
	return NULL;
}

static void engines_start(void)
{
	pthread_t t;
	int m, err;

	for (m = M_EPOLL; m <= M_POLL; m++) {
		struct engine *e = &engines[m];

		e->kind = m;
		pthread_mutex_init(&e->mu, NULL);
		if (pipe2(e->wake, O_NONBLOCK | O_CLOEXEC) < 0)
			die("pipe2");
		e->buf = malloc(BUFSZ);
		e->cap = 256;
		e->conns = malloc(e->cap * sizeof(*e->conns));
		e->pfd = malloc((e->cap + 1) * sizeof(*e->pfd));
		e->pcon = malloc((e->cap + 1) * sizeof(*e->pcon));
		if (!e->buf || !e->conns || !e->pfd || !e->pcon)
			die("malloc");
		if (m == M_EPOLL) {
			struct epoll_event ee = { .events = EPOLLIN, .data.ptr = NULL };

			e->ep = epoll_create1(EPOLL_CLOEXEC);
			if (e->ep < 0)
				die("epoll_create1");
			if (epoll_ctl(e->ep, EPOLL_CTL_ADD, e->wake[0], &ee) < 0)
				die("epoll_ctl wake");
		}
		err = pthread_create(&t, &tattr, engine_run, e);
		if (err) {
			errno = err;
			die("pthread_create");
		}
		pthread_detach(t);
	}
}

static void dispatch(struct conn *c)
{
	struct engine *e;

	live_add(c);
	if (c->mode == M_THREAD) {
		t_start(c);
		return;
	}
	e = &engines[c->mode];
	pthread_mutex_lock(&e->mu);
	c->next = e->inbox;
	e->inbox = c;
	pthread_mutex_unlock(&e->mu);
	if (write(e->wake[1], "x", 1) < 0 && errno != EAGAIN)
		die("write wake");
}

static int pick_mode(uint64_t *r)
{
	size_t n = strlen(opt.modes);
	char m = opt.modes[rnd(r) % n];

	return m == 't' ? M_THREAD : m == 'e' ? M_EPOLL : M_POLL;
}

/* --- memory, report, stuck --------------------------------------------------- */

static void mem_now(long *rss, long *pin)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	*rss = *pin = -1;
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "VmRSS:", 6))
			*rss = atol(line + 6);
		else if (!strncmp(line, "VmPin:", 6))
			*pin = atol(line + 6);
	}
	fclose(f);
}

/* Where c stands (under glock). */
static void say_conn(const char *tag, const struct conn *c)
{
	fprintf(stderr, "rsx-cut: %s%llu fd %d %s%s%s: sent %llu of %llu%s%s, received %llu of %llu%s, age %.1f s%s%s\n",
		tag, (unsigned long long)c->id, c->fd, mode_name[c->mode],
		c->et ? " ET" : "", c->connecting ? " connecting" : "",
		(unsigned long long)c->txoff, (unsigned long long)tx_total(c),
		c->trl_ready ? "" : " (trailer not yet)",
		c->tx_done ? " +shut" : "",
		(unsigned long long)c->rxoff,
		(unsigned long long)(c->hdr_ok ? rx_total(c) : 0),
		c->rx_done ? " +EOF" : "", now() - c->t0,
		c->want_out ? ", waits to write" : "",
		c->err[0] ? ", failed" : "");
}

static void report_stuck(void)
{
	size_t i;

	pthread_mutex_lock(&glock);
	fprintf(stderr, "rsx-cut: %zu connections open, nothing finished for %.0f s:\n",
		st.nlive, now() - st.last_done);
	for (i = 0; i < st.nlive && i < 20; i++)
		say_conn("  ", st.live[i]);
	pthread_mutex_unlock(&glock);
}

/*
 * Connections older than -S: stuck.  Said, failed, and shut down so that
 * their calls return and the run goes on (under glock: a listed
 * connection's descriptor is still its own).
 */
static void watchdog(void)
{
	double t = now();
	size_t i;

	pthread_mutex_lock(&glock);
	for (i = 0; i < st.nlive; i++) {
		struct conn *c = st.live[i];

		if (!c->slow && t - c->t0 >= opt.stuck_s / 2.0) {
			c->slow = 1;
			say_conn("slow: ", c);
		}
		if (c->stuck || t - c->t0 < opt.stuck_s)
			continue;
		c->stuck = 1;
		st.stuck++;
		say_conn("stuck: ", c);
		if (!c->err[0])
			snprintf(c->err, sizeof(c->err),
				 "stuck for %d s (sent %llu of %llu, received %llu of %llu)",
				 opt.stuck_s, (unsigned long long)c->txoff,
				 (unsigned long long)tx_total(c), (unsigned long long)c->rxoff,
				 (unsigned long long)(c->hdr_ok ? rx_total(c) : 0));
		__atomic_store_n(&c->failed, 1, __ATOMIC_SEQ_CST);
		shutdown(c->fd, SHUT_RDWR);
	}
	pthread_mutex_unlock(&glock);
}

static struct {
	long base_rss, base_pin, rss, pin;
	size_t live;
	double last;
} mem;

static void mem_sample(void)
{
	long rss, pin;
	size_t live;

	if (now() - mem.last < 0.5)
		return;
	mem.last = now();
	watchdog();
	pthread_mutex_lock(&glock);
	live = st.nlive;
	pthread_mutex_unlock(&glock);
	mem_now(&rss, &pin);
	if (live >= mem.live && live > 0) {
		mem.live = live;
		mem.rss = rss;
		mem.pin = pin;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * One direction's cut-over points, from the bytes each stream had over
 * TCP (t) of its length (s):
 *   rdma_only  t == 0: cut over before its first byte
 *   split      0 < t < s: bytes on both sides of the cut (mid-stream)
 *   tcp_only   t == s: no byte over RDMA
 *   over       t > s: more TCP bytes than the stream (control bytes on
 *              TCP: an in-band negotiation), or no TCP_INFO
 * then where the split ones were cut: percentiles of t (bytes) and of
 * t/s (per mille), and a histogram of t/s in tenths.
 */
static void report_cut(const char *dir, const char *how, struct cutrec *r, size_t n)
{
	unsigned long rdma_only = 0, split = 0, tcp_only = 0, over = 0, hist[10] = { 0 };
	unsigned long long tsum = 0, ssum = 0;
	uint64_t *off = malloc((n + 1) * sizeof(*off)), *pm = malloc((n + 1) * sizeof(*pm));
	size_t i, m = 0;

	if (!off || !pm)
		die("malloc");
	for (i = 0; i < n; i++) {
		ssum += r[i].s;
		if (r[i].t == UINT64_MAX || r[i].t > r[i].s) {
			over++;
			continue;
		}
		tsum += r[i].t;
		if (r[i].t == 0) {
			rdma_only++;
		} else if (r[i].t == r[i].s) {
			tcp_only++;
		} else {
			split++;
			off[m] = r[i].t;
			pm[m] = r[i].t * 1000 / r[i].s;
			hist[pm[m] / 100]++;
			m++;
		}
	}
	printf("cut %s: streams=%zu rdma_only=%lu split=%lu tcp_only=%lu over=%lu tcp_bytes=%llu stream_bytes=%llu (%s)\n",
	       dir, n, rdma_only, split, tcp_only, over, tsum, ssum, how);
	if (m) {
		qsort(off, m, sizeof(*off), cmp_u64);
		qsort(pm, m, sizeof(*pm), cmp_u64);
		printf("cut %s: split at byte p10=%llu p50=%llu p90=%llu max=%llu; at per mille of the stream p10=%llu p50=%llu p90=%llu\n",
		       dir, (unsigned long long)off[m / 10], (unsigned long long)off[m / 2],
		       (unsigned long long)off[m * 9 / 10], (unsigned long long)off[m - 1],
		       (unsigned long long)pm[m / 10], (unsigned long long)pm[m / 2],
		       (unsigned long long)pm[m * 9 / 10]);
		printf("cut %s: split in tenths of the stream:", dir);
		for (i = 0; i < 10; i++)
			printf(" %lu", hist[i]);
		printf("\n");
	}
	free(off);
	free(pm);
}

static int report(double secs)
{
	const char *me = opt.server ? "server" : "client";

	pthread_mutex_lock(&glock);
	printf("%s: %lu connections (%lu thread, %lu epoll of which %lu edge-triggered, %lu poll; %lu non-blocking connects), payload %llu bytes sent, %llu received, in %.1f s; the longest lived %.1f s\n",
	       me, st.done, st.per_mode[M_THREAD], st.per_mode[M_EPOLL], st.et,
	       st.per_mode[M_POLL], st.nbconnect, st.txbytes, st.rxbytes, secs, st.max_age);
	if (st.stuck)
		printf("%s: %lu connections stuck (older than %d s, shut down)\n",
		       me, st.stuck, opt.stuck_s);
	report_cut(opt.server ? "c2s" : "s2c", "received, TCP_INFO at its end", st.rx, st.nrx);
	report_cut(opt.server ? "s2c" : "c2s", "sent, header+payload, the peer's TCP_INFO at its trailer", st.tx, st.ntx);
	printf("%s: tcp_rx_sum=%llu (TCP_INFO bytes_received of all connections)\n", me, st.tcp_rx_sum);
	if (mem.live)
		printf("mem: %s: base rss=%ld KiB pinned=%ld KiB; at %zu live connections rss=%ld KiB pinned=%ld KiB; per connection rss=%ld KiB pinned=%ld KiB\n",
		       me, mem.base_rss, mem.base_pin, mem.live, mem.rss, mem.pin,
		       (mem.rss - mem.base_rss) / (long)mem.live,
		       (mem.pin - mem.base_pin) / (long)mem.live);
	if (st.bad || (opt.n && st.done != (unsigned long)opt.n)) {
		printf("rsx-cut: FAILED: %lu of %lu connections wrong, %lu finished of %d\n",
		       st.bad, st.done, st.done, opt.n);
		pthread_mutex_unlock(&glock);
		return 1;
	}
	printf("rsx-cut: ok, %s: %lu connections, every byte right both ways\n", me, st.done);
	pthread_mutex_unlock(&glock);
	return 0;
}

/* Wait until done reaches goal (or deadline); 0 on time. */
static int wait_done(unsigned long goal, double deadline)
{
	struct timespec ts;
	double stuck_said = 0;

	pthread_mutex_lock(&glock);
	while (st.done < goal) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 500000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&done_cv, &glock, &ts);
		pthread_mutex_unlock(&glock);
		mem_sample();
		if (now() - st.last_done > 20 && now() - stuck_said > 20) {
			report_stuck();
			stuck_said = now();
		}
		if (now() > deadline) {
			fprintf(stderr, "rsx-cut: timeout\n");
			report_stuck();
			return -1;
		}
		pthread_mutex_lock(&glock);
	}
	pthread_mutex_unlock(&glock);
	return 0;
}

/* --- client and server ------------------------------------------------------ */

static void addr_of(struct sockaddr_in *sa, const char *host, int port)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &sa->sin_addr) != 1) {
		fprintf(stderr, "rsx-cut: bad IPv4 address %s\n", host);
		exit(2);
	}
}

static int client(void)
{
	struct sockaddr_in sa, ba;
	double t0 = now(), deadline = t0 + opt.timeout;
	uint64_t r = mix(opt.seed + 99) | 1;
	int i, fd, one = 1, mode, nb, rc;
	struct conn *c;

	if (sem_init(&slots, 0, (unsigned int)opt.conc) < 0)
		die("sem_init");
	addr_of(&sa, opt.host, opt.port);
	for (i = 0; i < opt.n; i++) {
		struct timespec ts;

		for (;;) {
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec++;
			if (!sem_timedwait(&slots, &ts))
				break;
			if (errno != ETIMEDOUT && errno != EINTR)
				die("sem_timedwait");
			mem_sample();
			if (now() - st.last_done > 20 && st.nlive)
				report_stuck(), st.last_done = now();
			if (now() > deadline) {
				fprintf(stderr, "rsx-cut: timeout after %d connections opened\n", i);
				report_stuck();
				report(now() - t0);
				return 2;
			}
		}
		if (i < opt.conc && opt.ramp_ms)
			sleep_until(t0 + (double)opt.ramp_ms / 1e3 * i / opt.conc);
		mem_sample();
		mode = pick_mode(&r);
		nb = mode != M_THREAD && (rnd(&r) & 1);
		fd = socket(AF_INET, SOCK_STREAM | (nb ? SOCK_NONBLOCK : 0), 0);
		if (fd < 0)
			die("socket");
		if (opt.bind) {
			addr_of(&ba, opt.bind, 0);
			if (bind(fd, (struct sockaddr *)&ba, sizeof(ba)) < 0)
				die("bind");
		}
		c = conn_new(fd, (uint64_t)i, mode);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			if (!nb || errno != EINPROGRESS) {
				fprintf(stderr, "rsx-cut: connection %d: connect: %s\n", i, strerror(errno));
				return 2;
			}
			c->connecting = 1;
			st.nbconnect++;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		dispatch(c);
		if (i == 0)
			st.last_done = now();
	}
	if (wait_done((unsigned long)opt.n, deadline) < 0) {
		report(now() - t0);
		return 2;
	}
	rc = report(now() - t0);
	return rc;
}

static volatile sig_atomic_t got_term;
static void on_term(int sig)
{
	(void)sig;
	got_term = 1;
}

static int server(void)
{
	struct sockaddr_in sa;
	struct sigaction act;
	struct pollfd p;
	double t0 = 0, deadline = 0;
	uint64_t r = mix(opt.seed + 77) | 1, accepted = 0;
	int lfd, fd, one = 1, done;

	memset(&act, 0, sizeof(act));
	act.sa_handler = on_term;
	sigaction(SIGTERM, &act, NULL);
	addr_of(&sa, opt.host, opt.port);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (lfd < 0)
		die("socket");
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind");
	if (listen(lfd, 4096) < 0)
		die("listen");
	if (opt.ready) {
		FILE *f = fopen(opt.ready, "w");

		if (!f)
			die(opt.ready);
		fprintf(f, "%d\n", (int)getpid());
		fclose(f);
	}
	p.fd = lfd;
	p.events = POLLIN;
	for (;;) {
		if (poll(&p, 1, 200) < 0 && errno != EINTR)
			die("poll");
		while ((fd = accept4(lfd, NULL, NULL, 0)) >= 0) {
			int mode = pick_mode(&r);

			if (!accepted) {
				t0 = now();
				deadline = t0 + opt.timeout;
				st.last_done = t0;
			}
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			dispatch(conn_new(fd, accepted++, mode));
		}
		if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
			die("accept4");
		mem_sample();
		pthread_mutex_lock(&glock);
		done = opt.n && st.done >= (unsigned long)opt.n && !st.nlive;
		pthread_mutex_unlock(&glock);
		if (done || got_term)
			break;
		if (accepted && now() - st.last_done > 20 && st.nlive) {
			report_stuck();
			st.last_done = now();
		}
		if (accepted && now() > deadline) {
			fprintf(stderr, "rsx-cut: timeout\n");
			report_stuck();
			report(now() - t0);
			return 2;
		}
	}
	if (got_term && st.nlive)
		report_stuck();
	close(lfd);
	return report(accepted ? now() - t0 : 0);
}

static void usage(void)
{
	fprintf(stderr, "usage: rsx-cut server -l ADDR -p PORT [-r READY] [-n N] [options]\n"
		"       rsx-cut client -c ADDR -p PORT [-b BIND] [-n N] [-C CONC] [options]\n"
		"options: -s SEED -L MAXLEN -D DELAY_MS -P PAUSE_MS -H LIFE_MS -W RAMP_MS -S STUCK_S -m MODES(tep) -T SECS\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *mode;
	const char *p;
	int o;

	if (argc < 2)
		usage();
	mode = argv[1];
	if (!strcmp(mode, "server"))
		opt.server = 1;
	else if (strcmp(mode, "client"))
		usage();
	if (opt.server)
		opt.n = 0;
	optind = 2;
	while ((o = getopt(argc, argv, "l:c:p:b:r:n:C:s:L:D:P:H:W:S:m:T:")) != -1) {
		switch (o) {
		case 'l': case 'c': opt.host = optarg; break;
		case 'p': opt.port = atoi(optarg); break;
		case 'b': opt.bind = optarg; break;
		case 'r': opt.ready = optarg; break;
		case 'n': opt.n = atoi(optarg); break;
		case 'C': opt.conc = atoi(optarg); break;
		case 's': opt.seed = strtoull(optarg, NULL, 0); break;
		case 'L': opt.maxlen = strtoull(optarg, NULL, 0); break;
		case 'D': opt.delay_ms = atoi(optarg); break;
		case 'P': opt.pause_ms = atoi(optarg); break;
		case 'H': opt.life_ms = atoi(optarg); break;
		case 'W': opt.ramp_ms = atoi(optarg); break;
		case 'S': opt.stuck_s = atoi(optarg); break;
		case 'm': opt.modes = optarg; break;
		case 'T': opt.timeout = atoi(optarg); break;
		default: usage();
		}
	}
	if (!opt.host || !opt.port || opt.n < 0 || (!opt.server && opt.n < 1) ||
	    opt.conc < 1 || opt.delay_ms < 0 || opt.pause_ms < 0 || opt.life_ms < 0 || opt.ramp_ms < 0 || opt.stuck_s < 1 ||
	    opt.maxlen < 64 || !*opt.modes || opt.timeout < 1)
		usage();
	for (p = opt.modes; *p; p++)
		if (!strchr("tep", *p))
			usage();
	signal(SIGPIPE, SIG_IGN);
	pthread_attr_init(&tattr);
	pthread_attr_setstacksize(&tattr, 256 * 1024);
	mem_now(&mem.base_rss, &mem.base_pin);
	engines_start();
	setvbuf(stdout, NULL, _IOLBF, 0);
	return opt.server ? server() : client();
}
