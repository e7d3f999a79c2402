// SPDX-License-Identifier: MIT
/*
 * The shared-memory transport (shm.h): a connection's memory, its
 * messages and its wake-ups between two processes of one host.  Callers
 * hold the owning socket's lock.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "fdtab.h"
#include "libc.h"
#include "log.h"
#include "shm.h"
#include "stats.h"

#define RSX_SHM_SEALS	(F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)

_Static_assert(RSX_SHM_DEPTH >= RSX_WIRE_RQ_MIN,
	       "the queue is the peer's message window");

/* One direction's receive side: ring, control area, queue; whole pages. */
static size_t rsx_shm_area(uint32_t ring_size)
{
	size_t page = 4096, n = (size_t)ring_size + RSX_CTRL_SIZE +
				 sizeof(struct rsx_shm_q);

	return (n + page - 1) & ~(page - 1);
}

int rsx_shm_create(uint32_t ring_size, struct rsx_conn **out)
{
	struct rsx_conn *c = rsx_conn_alloc(ring_size);

	if (!c)
		return -ENOMEM;
	c->shm = 1;
	c->shm_evfd = c->shm_peer_evfd = c->shm_memfd = -1;
	c->tp = &rsx_shm_transport;
	*out = c;
	return 0;
}

static void rsx_shm_destroy(struct rsx_conn *c)
{
	if (c->shm_map) {
		__atomic_store_n(&c->shm_rxq->here, 0, __ATOMIC_RELEASE);
		munmap(c->shm_map, c->shm_map_len);
	}
	if (c->shm_memfd >= 0)
		rsx_fd_private_close(c->shm_memfd);
	if (c->shm_evfd >= 0)
		rsx_fd_private_close(c->shm_evfd);
	if (c->shm_peer_evfd >= 0)
		rsx_fd_private_close(c->shm_peer_evfd);
}

/*
 * The wire's fields that mean a queue pair mean nothing here; they are
 * given values the decoder accepts (qpn and ring_addr 1: "no such thing").
 */
static void rsx_shm_hello(const struct rsx_conn *c, struct rsx_hello *h)
{
	h->qpn = 1;
	h->psn = c->psn;
	h->mtu = 5;
	h->rq_depth = RSX_SHM_DEPTH;
	h->ring_size = c->ring_size;
	h->ring_addr = 1;
}

/* Is fd an eventfd?  A peer hands us descriptors we write into. */
static int rsx_is_eventfd(int fd)
{
	char path[32], link[32];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return 0;
	link[n] = 0;
	return !strcmp(link, "anon_inode:[eventfd]");
}

/*
 * Our receive side is area `mine` of the mapping, the peer's the other.
 * Both queues start where the ring's control area ends.
 */
static void rsx_shm_layout(struct rsx_conn *c, uint8_t *base, int mine,
			   uint32_t server_ring, uint32_t client_ring)
{
	uint8_t *a0 = base, *a1 = base + rsx_shm_area(server_ring);
	uint8_t *rx = mine ? a1 : a0, *tx = mine ? a0 : a1;
	uint32_t txring = mine ? server_ring : client_ring;

	c->ring = rx;
	c->ctrl = (volatile struct rsx_ctrl *)(rx + c->ring_size);
	c->shm_rxq = (struct rsx_shm_q *)(rx + c->ring_size + RSX_CTRL_SIZE);
	c->stage = tx;
	c->ctrl_out = (struct rsx_ctrl *)(tx + txring);
	c->shm_txq = (struct rsx_shm_q *)(tx + txring + RSX_CTRL_SIZE);
}

/* Both processes map it alike; a fork child keeps out, as with RDMA. */
static int rsx_shm_map(struct rsx_conn *c, size_t len)
{
	void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
			 c->shm_memfd, 0);

	if (map == MAP_FAILED)
		return -errno;
	c->shm_map = map;
	c->shm_map_len = len;
	madvise(map, len, MADV_DONTFORK);
	return 0;
}

/* The server: the memory and both eventfds, sent with the ACK (local.c). */
static int rsx_shm_make(struct rsx_conn *c, const struct rsx_hello *peer)
{
	size_t len = rsx_shm_area(c->ring_size) +
		     rsx_shm_area(peer->ring_size);
	int fd, ret;

	fd = memfd_create("rsockx-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -errno;
	c->shm_memfd = rsx_fd_hide(fd);
	if (ftruncate(c->shm_memfd, len) ||
	    rsx_libc.fcntl(c->shm_memfd, F_ADD_SEALS, RSX_SHM_SEALS))
		return -errno;
	ret = rsx_shm_map(c, len);
	if (ret)
		return ret;
	c->shm_evfd = rsx_fd_hide(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	c->shm_peer_evfd = rsx_fd_hide(eventfd(0, EFD_NONBLOCK |
						 EFD_CLOEXEC));
	if (c->shm_evfd < 0 || c->shm_peer_evfd < 0)
		return -EMFILE;
	rsx_shm_layout(c, c->shm_map, 0, c->ring_size, peer->ring_size);
	return 0;
}

/* The client: the server's memory, checked before it is mapped. */
static int rsx_shm_take(struct rsx_conn *c, const struct rsx_hello *peer)
{
	size_t len = rsx_shm_area(peer->ring_size) +
		     rsx_shm_area(c->ring_size);
	struct stat st;
	int seals, ret;

	if (c->shm_memfd < 0 || c->shm_evfd < 0 || c->shm_peer_evfd < 0)
		return -EPROTO;
	/*
	 * Sealed, or the server could shrink it under our stores (SIGBUS);
	 * of the size the two rings make, or we would store past its end.
	 */
	seals = rsx_libc.fcntl(c->shm_memfd, F_GET_SEALS);
	if (seals < 0 || (seals & RSX_SHM_SEALS) != RSX_SHM_SEALS ||
	    rsx_libc.fstat(c->shm_memfd, &st) || (size_t)st.st_size != len ||
	    !rsx_is_eventfd(c->shm_evfd) || !rsx_is_eventfd(c->shm_peer_evfd))
		return -EPROTO;
	ret = rsx_shm_map(c, len);
	if (ret)
		return ret;
	rsx_fd_private_close(c->shm_memfd);
	c->shm_memfd = -1;
	rsx_shm_layout(c, c->shm_map, 1, peer->ring_size, c->ring_size);
	return 0;
}

/*
 * "Connects": the server makes the memory, the client (which holds the
 * server's descriptors by now: shm_memfd) maps it.  The peer's ring is
 * bounded as on RDMA: memfd memory is not pinned, but it is memory.
 */
static int rsx_shm_connect(struct rsx_conn *c, const struct rsx_hello *peer)
{
	int ret;

	if (peer->ring_size > 4 * c->ring_size && peer->ring_size > 4u << 20) {
		rsx_info("shm: peer's ring of %u bytes is too large",
			 peer->ring_size);
		return -ENOBUFS;
	}
	c->peer = *peer;
	ret = c->shm_memfd >= 0 ? rsx_shm_take(c, peer) :
				  rsx_shm_make(c, peer);
	if (ret) {
		rsx_info("shm: connection memory: %s", strerror(-ret));
		return ret;
	}
	c->peer.rq_depth = RSX_SHM_DEPTH;
	__atomic_store_n(&c->shm_rxq->here, 1, __ATOMIC_RELEASE);
	c->qp_ready = 1;
	rsx_dbg("shm: connected, ring %u/%u", c->ring_size, peer->ring_size);
	return 0;
}

socklen_t rsx_shm_wake_addr(uint64_t xtok, char end, struct sockaddr_un *a)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	/* abstract: sun_path[0] stays 0, the name has no terminator */
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
		     "rsockx-%c:%016llx", end, (unsigned long long)xtok);
	return offsetof(struct sockaddr_un, sun_path) + 1 + n;
}

/*
 * The process's one socket for waking peers' stand-ins: unbound, so it
 * may send to any of them; made once, kept for the life of the process
 * (a fork child shares it, which sendto allows).
 */
static _Atomic int rsx_shm_waker = -1;

static int rsx_shm_waker_fd(void)
{
	int fd = atomic_load_explicit(&rsx_shm_waker, memory_order_acquire),
	    expect = -1;

	if (fd >= 0)
		return fd;
	fd = rsx_fd_hide(rsx_libc.socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK |
					 SOCK_CLOEXEC, 0));
	if (fd < 0)
		return -1;
	if (!atomic_compare_exchange_strong(&rsx_shm_waker, &expect, fd)) {
		rsx_fd_private_close(fd);	/* another thread's won */
		fd = expect;
	}
	return fd;
}

/*
 * One byte into the reader's stand-in (xtok, from its memory, so any
 * value: the address is of our making, the byte a hint).  0 when it is
 * there.  EAGAIN is a full stand-in, or our own send buffer full of
 * bytes that other stand-ins have not taken yet: the two look alike, so
 * the eventfd wakes the reader then.
 */
static int rsx_shm_wake_x(uint64_t xtok)
{
	struct sockaddr_un a;
	socklen_t len = rsx_shm_wake_addr(xtok, 'x', &a);
	int fd = rsx_shm_waker_fd();

	if (fd < 0)
		return -1;
	if (rsx_libc.sendto(fd, "", 1, MSG_DONTWAIT | MSG_NOSIGNAL,
			    (struct sockaddr *)&a, len) == 1)
		return 0;
	rsx_dbg("shm: wake of stand-in %016llx: %s",
		(unsigned long long)xtok, strerror(errno));
	return -1;
}

/* Is message n newer than those the reader had when it armed with v? */
static int rsx_shm_newer(uint32_t n, uint32_t v)
{
	uint32_t d = (n - v) & ~RSX_SHM_ARM_X;

	return d && d < RSX_SHM_ARM_X / 2;
}

/*
 * A message: its bytes are in the peer's memory already (the stage is
 * its ring, ctrl_out its control area); the immediate, the count, the
 * wake.  It is complete as it is posted.
 */
static int rsx_shm_post(struct rsx_conn *c, uint64_t roff, const void *src,
			uint32_t len, uint32_t imm, int signal)
{
	struct rsx_shm_q *q = c->shm_txq;
	uint64_t one = 1;
	uint32_t n = (uint32_t)c->tx_msgs;	/* counted by the caller */
	uint32_t armed, lost, type = imm >> 28;
	int ret, x;

	(void)roff, (void)src, (void)len, (void)signal;
	c->sq_done = ++c->sq_posted;
	__atomic_store_n(&q->imm[(n - 1) % RSX_SHM_DEPTH], imm,
			 __ATOMIC_RELAXED);
	__atomic_store_n(&q->prod, n, __ATOMIC_RELEASE);
	/* against the reader's store of armed and its look at prod */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	lost = __atomic_load_n(&q->lost, __ATOMIC_SEQ_CST);
	armed = __atomic_load_n(&q->armed, __ATOMIC_RELAXED);
	do {
		if (!armed)
			return 0;
		/*
		 * On the stand-in (shm.h): not for a message the reader had
		 * when it armed, nor for a credit, which changes nothing x
		 * shows while the reader's program waits there (for output
		 * only while x shows room: rsx_ready_direct).
		 */
		if ((armed & RSX_SHM_ARM_X) &&
		    (type == RSX_IMM_CREDIT || !rsx_shm_newer(n, armed)))
			return 0;
	} while (!__atomic_compare_exchange_n(&q->armed, &armed, 0, 0,
					      __ATOMIC_ACQ_REL,
					      __ATOMIC_RELAXED));
	/*
	 * Bytes and the end wake x; a CUTOVER or DOWNGRADE goes through the
	 * reader's watcher, which shows what it means for x exactly.  Every
	 * stand-in arm taken is counted in woken after its byte, sent or
	 * not: the reader waits for that count (rsx_shm_woken).
	 */
	ret = -1;
	x = armed == 2 || (armed & RSX_SHM_ARM_X);
	if (x && (armed == 2 || type == RSX_IMM_DATA ||
		  type == RSX_IMM_FIN)) {
		/*
		 * Unless the reader gave up on us and showed x itself:
		 * sending before that look, as the reader adds to lost
		 * before its look at sending (shm.h).
		 */
		__atomic_store_n(&q->sending, 1, __ATOMIC_SEQ_CST);
		if (__atomic_load_n(&q->lost, __ATOMIC_SEQ_CST) != lost)
			ret = 1;
		else
			ret = rsx_shm_wake_x(__atomic_load_n(&q->xtok,
							     __ATOMIC_RELAXED));
	}
	if (x) {
		__atomic_fetch_add(&q->woken, 1, __ATOMIC_RELEASE);
		__atomic_store_n(&q->sending, 0, __ATOMIC_RELEASE);
	}
	if (ret >= 0) {
		if (!ret)
			rsx_stat_inc(RSX_STAT_shm_direct_wakes);
		return 0;
	}
	if (rsx_libc.write(c->shm_peer_evfd, &one, sizeof(one)) < 0)
		rsx_dbg("shm: wake: %s", strerror(errno));
	return 0;
}

/*
 * The next message, if any: 1 and *imm; 0 none; -ECONNRESET when the
 * peer's count runs ahead of what its credits allow.  A connection whose
 * answer has not come yet has no memory mapped and nothing to take, as
 * a queue pair not yet connected has no completion: the end of the TCP
 * stream can come to it first (rsx_peer_closed).
 */
static int rsx_shm_next(struct rsx_conn *c, uint32_t *imm)
{
	struct rsx_shm_q *q = c->shm_rxq;
	uint32_t prod, seen = (uint32_t)c->rx_msgs;

	if (!q)
		return 0;
	prod = __atomic_load_n(&q->prod, __ATOMIC_ACQUIRE);
	if (prod == seen)
		return 0;
	if (prod - seen > RSX_SHM_DEPTH)
		return -ECONNRESET;
	*imm = __atomic_load_n(&q->imm[seen % RSX_SHM_DEPTH],
			       __ATOMIC_RELAXED);
	return 1;
}

/*
 * Did a writer take our arm?  Then a wake-up went, or goes, and we arm
 * anew; one for the stand-in is counted (shm_takes), for rsx_shm_woken().
 */
static void rsx_shm_taken(struct rsx_conn *c)
{
	if (!c->armed || !c->shm_rxq ||
	    __atomic_load_n(&c->shm_rxq->armed, __ATOMIC_RELAXED))
		return;
	c->armed = 0;
	if (c->armed_x)
		c->shm_takes++;
}

/* Takes in the messages that came; returns how many. */
static int rsx_shm_poll(struct rsx_conn *c)
{
	int n, total = 0;
	uint32_t imm;

	rsx_shm_taken(c);
	while (!c->err && !c->peer_down && (n = rsx_shm_next(c, &imm))) {
		if (n < 0) {
			rsx_conn_fail(c, n, "message queue overrun");
			break;
		}
		rsx_conn_recv(c, imm);
		total++;
	}
	return total;
}

/*
 * 0: the next message will signal our eventfd, or with xtok our stand-in
 * (the caller looks again).
 */
static int rsx_shm_arm(struct rsx_conn *c, uint64_t xtok)
{
	struct rsx_shm_q *q = c->shm_rxq;
	uint32_t v = 1;

	if (xtok) {
		__atomic_store_n(&q->xtok, xtok, __ATOMIC_RELAXED);
		v = RSX_SHM_ARM_X | ((uint32_t)c->rx_msgs & ~RSX_SHM_ARM_X);
	}
	/*
	 * An exchange, not a store: an arm before that a writer took just
	 * now must be counted (rsx_shm_woken), not written over.
	 */
	if (!__atomic_exchange_n(&q->armed, v, __ATOMIC_SEQ_CST) &&
	    c->armed && c->armed_x)
		c->shm_takes++;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

/* Our arm on the stand-in back, unless a writer took it first. */
static void rsx_shm_disarm(struct rsx_conn *c)
{
	if (!(__atomic_exchange_n(&c->shm_rxq->armed, 0, __ATOMIC_ACQ_REL) &
	      RSX_SHM_ARM_X))
		c->shm_takes++;
}

/*
 * The stand-in's wake-ups so far, and those given up on, once every one of
 * an arm that a writer took has landed in x: the writer counts it in
 * woken right after its send, one system call after the take, so the
 * wait is short.  One that stopped before its look at lost (preempted)
 * is waited for RSX_SHM_WAKE_WAIT_NS, yielding the CPU it may need; then
 * lost tells it to send nothing (shm.h), and the caller shows x anew (the
 * count moved).  One past that look is waited for until it has counted,
 * RSX_SHM_SENDING_WAIT_NS at most, once per connection: a peer that does
 * not count in that time is not armed for again (x_off), so that a
 * hostile one cannot stall our thread for every message it sends.  wrk
 * against nginx on this 2-core host, 60 s: with a bound of 1 ms alone, 3
 * bytes came late, each after a writer preempted; with 50 us and lost, 7
 * (writers inside their send); with sending too, none (163 give-ups).
 */
#define RSX_SHM_WAKE_WAIT_NS	50000
#define RSX_SHM_SENDING_WAIT_NS	10000000

static uint32_t rsx_shm_woken(struct rsx_conn *c)
{
	struct rsx_shm_q *q = c->shm_rxq;
	int64_t start = 0, t;
	int gave_up = 0;
	uint32_t w;

	if (!q)
		return 0;
	for (;;) {
		w = __atomic_load_n(&q->woken, __ATOMIC_ACQUIRE);
		if ((int32_t)(w - c->shm_takes) >= 0)
			break;
		if (!start) {
			start = rsx_mono_ns();
		} else {
			t = rsx_mono_ns() - start;
			if (t > RSX_SHM_SENDING_WAIT_NS) {
				/* never again for a peer that does not count */
				rsx_info("shm: a peer took a wake-up and did "
					 "not count it: its wake-ups go through "
					 "the watcher from now on");
				c->x_off = 1;
				break;
			}
			if (!gave_up && t > RSX_SHM_WAKE_WAIT_NS) {
				gave_up = 1;
				__atomic_fetch_add(&q->lost, 1,
						   __ATOMIC_SEQ_CST);
				c->shm_lost++;
				if (!__atomic_load_n(&q->sending,
						     __ATOMIC_SEQ_CST))
					break;
			}
		}
		sched_yield();
	}
	/* the peer's count is its own: never wait for what it left out */
	c->shm_takes = w;
	return w + c->shm_lost;
}

static void rsx_shm_event(struct rsx_conn *c)
{
	uint64_t v;

	/*
	 * Armed no more if a writer took the arm; one made since the wake
	 * (on the stand-in, say) stays, and must be known to stay.
	 */
	rsx_shm_taken(c);
	while (rsx_libc.read(c->shm_evfd, &v, sizeof(v)) > 0)
		;
}

/*
 * Bytes went into the ring of a peer that has let go of it: it closed the
 * socket (or exited) without a DOWNGRADE, so nobody reads them.  As TCP
 * answers a send to a closed peer with a reset, this send has gone and
 * the next fails with EPIPE (the caller's rsx_epipe: SIGPIPE too).
 */
static void rsx_shm_sent(struct rsx_conn *c)
{
	if (__atomic_load_n(&c->shm_txq->here, __ATOMIC_ACQUIRE))
		return;
	rsx_conn_poll(c);	/* a DOWNGRADE first: its bytes go again */
	if (c->peer_down || c->err)
		return;
	c->err = -EPIPE;
	c->err_reported = 1;
	rsx_dbg("shm: the peer has closed: EPIPE");
}

/*
 * Is the peer's process alive?  Its pidfd polls readable once it has
 * exited; a pid that is gone altogether fails pidfd_open.
 */
static int rsx_shm_alive(const struct rsx_conn *c)
{
	struct pollfd pfd;
	int fd, ret;

	if (!__atomic_load_n(&c->shm_txq->here, __ATOMIC_ACQUIRE))
		return 0;
	if (c->shm_peer_pid <= 0)
		return 1;
	fd = syscall(SYS_pidfd_open, c->shm_peer_pid, 0);
	if (fd < 0)
		return errno != ESRCH;
	pfd.fd = fd;
	pfd.events = POLLIN;
	ret = rsx_libc.poll(&pfd, 1, 0);
	rsx_libc.close(fd);
	return !(ret > 0 && (pfd.revents & POLLIN));
}

/*
 * No transport to ask: is the peer's process still there, with the
 * memory mapped?  Answered at once.
 */
static int rsx_shm_ping(struct rsx_conn *c)
{
	c->sq_done = ++c->sq_posted;
	if (rsx_shm_alive(c))
		return 0;
	/*
	 * A client that never cut over and let go (its whole stream went on
	 * TCP before our answer was of use): TCP carries on, as after the
	 * deadline's ping (rsx_cut_abandoned).
	 */
	if (!c->peer_cutover && !c->tx_ring)
		c->cut_ping = 1;
	rsx_conn_fail(c, -ECONNRESET, "the peer's memory or process is gone");
	return 0;
}

static int rsx_shm_channel(const struct rsx_conn *c)
{
	return c->shm_evfd;
}

const struct rsx_transport rsx_shm_transport = {
	.name = "shm",
	.hello = rsx_shm_hello,
	.connect = rsx_shm_connect,
	.post = rsx_shm_post,
	.posted = rsx_shm_sent,
	.poll = rsx_shm_poll,
	.ping = rsx_shm_ping,
	.ping_now = 1,
	.arm = rsx_shm_arm,
	.disarm = rsx_shm_disarm,
	.woken = rsx_shm_woken,
	.event = rsx_shm_event,
	.channel = rsx_shm_channel,
	.destroy = rsx_shm_destroy,
};
