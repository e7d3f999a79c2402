// SPDX-License-Identifier: MIT
/* Readiness of upgraded sockets (ready.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "config.h"
#include "conn.h"
#include "dev.h"
#include "fdtab.h"
#include "guard.h"
#include "libc.h"
#include "log.h"
#include "probe.h"
#include "ready.h"
#include "upgrade.h"
#include "shm.h"
#include "sig.h"
#include "stats.h"

/*
 * The watcher's table.  The epoll data of a registration is
 * gen << 32 | slot << 1 | tcp: an event fetched before its connection was
 * taken out of the table finds another generation there and is dropped.
 */
struct rsx_watch {
	struct rsx_sock *s;
	uint32_t gen;
};

static pthread_mutex_t rsx_watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsx_watch *rsx_watch;
static uint32_t rsx_watch_cap;
static int rsx_watch_epfd = -1;
static int rsx_watch_state;	/* 0 not started, 1 running, -errno failed */
static uint32_t rsx_watch_epoch;	/* watchers started (rsx_dev.watch_epoch) */
/* The socket the watcher is about to lock or has locked (see ready_free). */
static _Atomic(struct rsx_sock *) rsx_watch_busy;
/* Sockets in the table, for the spin's choice (rsx_ready_spin). */
static _Atomic uint32_t rsx_watch_live;
/*
 * Lazy arming (ARCHITECTURE item 11).  Threads asleep in a poll, select or
 * epoll wait, or about to be: while there are none, a connection's CQ is
 * not re-armed after its event, and what comes in is taken by the
 * program's own calls and waits, without waking the watcher.  unarmed:
 * some CQ was left so; forever: the watcher sleeps without a timeout and
 * must be kicked (kick_fd) to run its backstop.
 */
static _Atomic int rsx_ready_sleepers;

/*
 * Telling an epoll wait directly (rsx_ready_show_sync): the wait this
 * thread spins in, the sockets whose readability was told and is not on
 * their x, and whether this process forked (then every wait asks x).
 * initial-exec: no __tls_get_addr, so no ld.so in NEEDED (linkage.test).
 */
static __thread struct rsx_epoll_out *rsx_told_to
	__attribute__((tls_model("initial-exec")));
static _Atomic int rsx_told_pending;
static int rsx_told_off;
static _Atomic int rsx_watch_unarmed;
static _Atomic int rsx_watch_forever;
/* The backstop's rounds, for rsx_ready_seen(); the watcher's own looks
 * do not count. */
static _Atomic uint32_t rsx_watch_round;
static RSX_TLS int rsx_watch_self;
static int rsx_watch_kick_fd = -1;
#define RSX_WATCH_KICK_KEY	UINT64_MAX
#define RSX_WATCH_DEV_KEY	(UINT64_MAX - 1)	/* a device's async fd */
#define RSX_WATCH_CHAN_KEY	(UINT64_MAX - 2)	/* a device's CQ events */
#define RSX_WATCH_BACKSTOP_MS	10
/* Waits spin and arm while the process watches at most this many. */
#define RSX_SPIN_CONNS_MAX	64

#define RSX_WATCH_BATCH 64
#define RSX_BLOCK_LEN 1024	/* fills x's minimal send buffer */

static uint64_t rsx_watch_key(uint32_t slot, uint32_t gen, int tcp)
{
	return (uint64_t)gen << 32 | slot << 1 | !!tcp;
}

static void rsx_watch_one(uint64_t key, uint32_t events)
{
	uint32_t slot = (uint32_t)key >> 1, gen = key >> 32;
	struct rsx_sock *s;

	pthread_mutex_lock(&rsx_watch_lock);
	if (slot >= rsx_watch_cap || !rsx_watch[slot].s ||
	    rsx_watch[slot].gen != gen) {
		pthread_mutex_unlock(&rsx_watch_lock);
		return;
	}
	s = rsx_watch[slot].s;
	atomic_store(&rsx_watch_busy, s);
	pthread_mutex_unlock(&rsx_watch_lock);

	rsx_sock_lock(s);
	rsx_sock_ready_event(s, !(key & 1), key & 1 ? events : 0);
	rsx_sock_unlock(s);
	atomic_store(&rsx_watch_busy, NULL);
}

static struct rsx_sock *rsx_watch_next(uint32_t *i);
static void rsx_watch_done(struct rsx_sock *s);

/*
 * The backstop of lazy arming: a program that sleeps where rsockx does not
 * see it (a raw system call, a poll on an epoll set) would wait for CQs
 * that raise no event.  RSX_WATCH_BACKSTOP_MS after one was left unarmed,
 * the watcher arms every CQ that no program thread has looked at since
 * the round before (a call on it, a spin that polled it) and none is in
 * now; then it sleeps for good once none is left unarmed.  Such a program
 * waits at most two rounds more.  Arming all of them every round, as
 * before, woke the watcher for the next arrival on each one while the
 * program was busy with them anyway: redis-server under redis-benchmark
 * took a watcher event every fourth request, each a wakeup, a lock the
 * program's thread then waited for, and an arm.  Returns 1 when some CQ
 * stays unarmed for now.
 */
static int rsx_watch_backstop(void)
{
	uint32_t i = 0, round = atomic_fetch_add(&rsx_watch_round, 1);
	struct rsx_sock *s;
	int left = 0;

	while ((s = rsx_watch_next(&i))) {
		if (rsx_sock_trylock(s)) {
			left = 1;	/* a program thread is in it */
		} else {
			left |= rsx_sock_ready_arm(s, s->rdy &&
						   s->rdy->seen == round);
			rsx_sock_unlock(s);
		}
		rsx_watch_done(s);
	}
	return left;
}

void rsx_ready_seen(struct rsx_sock *s)
{
	if (s->rdy && !rsx_watch_self)
		s->rdy->seen = atomic_load_explicit(&rsx_watch_round,
						    memory_order_relaxed);
}

/* Some device's channel fired: its connections hear of their CQs. */
static void rsx_watch_chan(void)
{
	uint64_t keys[RSX_WATCH_BATCH];
	int n, i;

	n = rsx_dev_chan_all(keys, RSX_WATCH_BATCH);
	for (i = 0; i < n; i++)
		rsx_watch_one(keys[i], 0);
}

static void *rsx_watch_thread(void *arg)
{
	struct epoll_event ev[RSX_WATCH_BATCH];
	uint64_t kick;
	int n, i, forever;

	(void)arg;
	rsx_guard_enter();	/* for good: this thread is all ours */
	rsx_watch_self = 1;
	for (;;) {
		/* forever first, then unarmed: see rsx_ready_arm_now() */
		atomic_store(&rsx_watch_forever, 1);
		forever = !atomic_load(&rsx_watch_unarmed);
		if (!forever)
			atomic_store(&rsx_watch_forever, 0);
		n = rsx_libc.epoll_wait(rsx_watch_epfd, ev, RSX_WATCH_BATCH,
					forever ? -1 : RSX_WATCH_BACKSTOP_MS);
		atomic_store(&rsx_watch_forever, 0);
		if (n < 0) {
			if (errno != EINTR) {
				rsx_info("readiness watcher: epoll_wait: %s",
					 strerror(errno));
				usleep(10000);
			}
			continue;
		}
		if (n == 0 && !forever) {
			atomic_store(&rsx_watch_unarmed, 0);
			if (rsx_watch_backstop())
				atomic_store(&rsx_watch_unarmed, 1);
		}
		for (i = 0; i < n; i++) {
			if (ev[i].data.u64 == RSX_WATCH_KICK_KEY) {
				rsx_libc.read(rsx_watch_kick_fd, &kick,
					      sizeof(kick));
			} else if (ev[i].data.u64 == RSX_WATCH_DEV_KEY) {
				rsx_dev_async_all();
				if (ev[i].events & (EPOLLERR | EPOLLHUP))
					rsx_dev_unwatch(rsx_watch_epfd);
			} else if (ev[i].data.u64 == RSX_WATCH_CHAN_KEY) {
				rsx_watch_chan();
			} else {
				rsx_watch_one(ev[i].data.u64, ev[i].events);
			}
		}
	}
	return NULL;
}

/*
 * Whether a connection's CQ must be armed now (under its lock, with its
 * event consumed): when a thread sleeps or is about to, or when waits
 * would not arm it (too many connections for them).  Otherwise the
 * watcher's backstop hears of it.
 */
int rsx_ready_arm_now(void)
{
	if (atomic_load(&rsx_ready_sleepers) ||
	    atomic_load_explicit(&rsx_watch_live, memory_order_relaxed) >
	    RSX_SPIN_CONNS_MAX)
		return 1;
	rsx_ready_backstop_soon();
	return 0;
}

void rsx_ready_backstop_soon(void)
{
	uint64_t one = 1;

	if (!atomic_exchange(&rsx_watch_unarmed, 1) &&
	    atomic_load(&rsx_watch_forever) &&
	    rsx_libc.write(rsx_watch_kick_fd, &one, sizeof(one)) < 0)
		rsx_dbg("watcher kick: %s", strerror(errno));
}

/* Under rsx_watch_lock. */
static int rsx_watch_start(void)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = RSX_WATCH_KICK_KEY };
	int ret;

	if (rsx_watch_state)
		return rsx_watch_state > 0 ? 0 : rsx_watch_state;
	rsx_watch_epfd = rsx_fd_move_high(rsx_libc.epoll_create1(EPOLL_CLOEXEC));
	if (rsx_watch_epfd < 0) {
		rsx_watch_state = -errno;
		return rsx_watch_state;
	}
	rsx_fd_set_private(rsx_watch_epfd, NULL);
	rsx_watch_kick_fd = rsx_fd_move_high(eventfd(0, EFD_NONBLOCK |
						     EFD_CLOEXEC));
	rsx_fd_set_private(rsx_watch_kick_fd, NULL);
	if (rsx_watch_kick_fd < 0 ||
	    rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_ADD,
			       rsx_watch_kick_fd, &ev)) {
		ret = -errno;
		goto err_kick;
	}
	ret = rsx_guard_thread(rsx_watch_thread, "rsockx-ready");
	if (ret)
		goto err_kick;
	rsx_watch_state = 1;
	/* devices join its set anew (a fork child's) */
	__atomic_add_fetch(&rsx_watch_epoch, 1, __ATOMIC_SEQ_CST);
	return 0;

err_kick:
	rsx_info("readiness watcher: cannot start: %s", strerror(-ret));
	rsx_fd_private_close(rsx_watch_kick_fd);
	rsx_watch_kick_fd = -1;
	rsx_fd_private_close(rsx_watch_epfd);
	rsx_watch_epfd = -1;
	return ret;	/* tried again next time */
}

/* Under rsx_watch_lock: a free slot for s, the table grown if need be. */
static int rsx_watch_slot(struct rsx_sock *s, uint32_t *slot)
{
	struct rsx_watch *w;
	uint32_t i, cap;

	for (i = 0; i < rsx_watch_cap; i++)
		if (!rsx_watch[i].s)
			goto found;
	cap = rsx_watch_cap ? rsx_watch_cap * 2 : 64;
	w = realloc(rsx_watch, cap * sizeof(*w));
	if (!w)
		return -ENOMEM;
	memset(w + rsx_watch_cap, 0, (cap - rsx_watch_cap) * sizeof(*w));
	rsx_watch = w;
	i = rsx_watch_cap;
	rsx_watch_cap = cap;
found:
	rsx_watch[i].s = s;
	rsx_watch[i].gen++;
	atomic_fetch_add(&rsx_watch_live, 1);
	*slot = i;
	return 0;
}

/* Under rsx_watch_lock. */
static void rsx_watch_unslot(uint32_t slot)
{
	rsx_watch[slot].s = NULL;
	rsx_watch[slot].gen++;
	atomic_fetch_sub(&rsx_watch_live, 1);
}

/*
 * After the peer's DOWNGRADE our sends are TCP's again, and the bytes it
 * gets again go out only as TCP takes them: the watcher wakes for room in
 * TCP as well.  Under s->lock.
 */
void rsx_ready_watch_out(struct rsx_sock *s)
{
	struct rsx_ready *r = s->rdy;
	struct epoll_event ev;

	if (!r || r->watch_out)
		return;
	pthread_mutex_lock(&rsx_watch_lock);
	ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	ev.data.u64 = rsx_watch_key(r->slot, rsx_watch[r->slot].gen, 1);
	if (!rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_MOD, r->tcp, &ev))
		r->watch_out = 1;
	pthread_mutex_unlock(&rsx_watch_lock);
}

/*
 * Under rsx_watch_lock, the watcher started: dev's channel is in its set
 * (once per device and watcher).  Devices that share a context share the
 * channel (EEXIST).
 */
static int rsx_watch_chan_add(struct rsx_dev *dev)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = RSX_WATCH_CHAN_KEY };
	uint32_t epoch = __atomic_load_n(&rsx_watch_epoch, __ATOMIC_RELAXED);
	struct ibv_comp_channel *ch = atomic_load(&dev->chan);

	if (atomic_load(&dev->chan_epoch) == epoch)
		return 0;
	if (!ch)
		return -ENODEV;
	if (rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_ADD, ch->fd, &ev) &&
	    errno != EEXIST)
		return -errno;
	atomic_store(&dev->chan_epoch, epoch);
	return 0;
}

/* Under rsx_watch_lock: the watcher no longer hears of c's wake-ups. */
static void rsx_watch_chan_del(struct rsx_conn *c)
{
	if (rsx_conn_chan_fd(c) >= 0)
		rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_DEL,
				   rsx_conn_chan_fd(c), NULL);
	else
		__atomic_store_n(&c->watch_key, 0, __ATOMIC_SEQ_CST);
}

/*
 * A thread is about to sleep on one of dev's connections: the watcher
 * drains dev's channel, and kicks it for its completions.  0 once it
 * does; -errno when it cannot (the sleep then looks on its own).
 */
int rsx_ready_chan_watch(struct rsx_dev *dev)
{
	uint32_t epoch = atomic_load(&dev->chan_epoch);
	int ret;

	/* 0: never in a watcher's set */
	if (likely(epoch && epoch == __atomic_load_n(&rsx_watch_epoch,
						     __ATOMIC_ACQUIRE)))
		return 0;
	pthread_mutex_lock(&rsx_watch_lock);
	ret = rsx_watch_start();
	if (!ret)
		ret = rsx_watch_chan_add(dev);
	pthread_mutex_unlock(&rsx_watch_lock);
	return ret;
}

static int rsx_watch_add(struct rsx_sock *s, struct rsx_ready *r)
{
	struct epoll_event ev;
	int ret;

	pthread_mutex_lock(&rsx_watch_lock);
	ret = rsx_watch_start();
	if (ret)
		goto out;
	ret = rsx_watch_slot(s, &r->slot);
	if (ret)
		goto out;
	/*
	 * The channel level-triggered: an event stays until consumed.  A
	 * connection whose CQ reports to its device's channel has none of
	 * its own: the device's is in the set, and the key we leave in the
	 * connection comes back with its CQ's event (rsx_watch_chan).
	 */
	ev.events = EPOLLIN;
	ev.data.u64 = rsx_watch_key(r->slot, rsx_watch[r->slot].gen, 0);
	if (rsx_conn_chan_fd(s->conn) < 0) {
		if (!s->conn->dev || rsx_watch_chan_add(s->conn->dev))
			goto err_slot;
		__atomic_store_n(&s->conn->watch_key, ev.data.u64,
				 __ATOMIC_SEQ_CST);
	} else if (rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_ADD,
				      rsx_conn_chan_fd(s->conn), &ev)) {
		goto err_slot;
	}
	/* TCP edge-triggered: bytes before the cut-over, and the end */
	ev.events = EPOLLIN | EPOLLRDHUP | EPOLLET;
	ev.data.u64 = rsx_watch_key(r->slot, rsx_watch[r->slot].gen, 1);
	if (rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_ADD, r->tcp, &ev))
		goto err_chan;
	/*
	 * The device's events, once per device and for good: a port that
	 * goes down while the program sleeps where only the watcher hears.
	 * Devices that share a context share the descriptor (EEXIST).
	 */
	if (s->conn->dev && s->conn->dev->watch_epoch !=
	    __atomic_load_n(&rsx_watch_epoch, __ATOMIC_RELAXED)) {
		ev.events = EPOLLIN;
		ev.data.u64 = RSX_WATCH_DEV_KEY;
		if (!rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_ADD,
					rsx_dev_async_fd(s->conn->dev), &ev) ||
		    errno == EEXIST)
			s->conn->dev->watch_epoch =
				__atomic_load_n(&rsx_watch_epoch,
						__ATOMIC_RELAXED);
	}
	pthread_mutex_unlock(&rsx_watch_lock);
	return 0;

err_chan:
	ret = -errno;
	rsx_watch_chan_del(s->conn);
	errno = -ret;
err_slot:
	ret = -errno;
	rsx_watch_unslot(r->slot);
out:
	pthread_mutex_unlock(&rsx_watch_lock);
	return ret;
}

/*
 * A stand-in that the peer's process can wake (ready.h): x bound to its
 * address, y to its own and connected to x.  A name that is taken (a
 * token drawn twice) fails with EADDRINUSE, and the caller takes a pair.
 */
static int rsx_ready_named(struct rsx_ready *r, int sv[2])
{
	struct sockaddr_un a;
	socklen_t len;
	int ret;

	if (getrandom(&r->xtok, sizeof(r->xtok), GRND_NONBLOCK) !=
	    sizeof(r->xtok) || !r->xtok) {
		r->xtok = 0;
		return -EAGAIN;
	}
	sv[0] = rsx_libc.socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK |
				SOCK_CLOEXEC, 0);
	if (sv[0] < 0)
		return -errno;
	sv[1] = rsx_libc.socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK |
				SOCK_CLOEXEC, 0);
	if (sv[1] < 0)
		goto err;
	len = rsx_shm_wake_addr(r->xtok, 'y', &a);
	if (rsx_libc.bind(sv[1], (struct sockaddr *)&a, len))
		goto err;
	len = rsx_shm_wake_addr(r->xtok, 'x', &a);
	if (rsx_libc.bind(sv[0], (struct sockaddr *)&a, len) ||
	    rsx_libc.connect(sv[1], (struct sockaddr *)&a, len))
		goto err;
	return 0;
err:
	ret = -errno;
	rsx_libc.close(sv[0]);
	if (sv[1] >= 0)
		rsx_libc.close(sv[1]);
	r->xtok = 0;
	return ret;
}

/*
 * Under s->lock, s->conn set: gives s its stand-in, watched from now on.
 * Returns x, or -errno.
 */
int rsx_ready_on(struct rsx_sock *s, int fd)
{
	struct rsx_ready *r = s->rdy;
	int sv[2] = { -1, -1 }, one = 1, ret;

	if (r)
		return r->x;
	if (!s->conn)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	if ((!s->conn->shm || rsx_ready_named(r, sv)) &&
	    rsx_libc.socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK |
				SOCK_CLOEXEC, 0, sv)) {
		ret = -errno;
		goto err_free;
	}
	r->x = rsx_fd_move_high(sv[0]);
	r->y = rsx_fd_move_high(sv[1]);
	rsx_fd_set_private(r->x, NULL);
	rsx_fd_set_private(r->y, NULL);
	/* the kernel rounds this up to its minimum (about 4.5 KiB) */
	rsx_libc.setsockopt(r->x, SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
	/* high among ours if there is room (64 fds under a limit of 1024) */
	r->tcp = rsx_libc.fcntl(fd, F_DUPFD_CLOEXEC, rsx_fd_private_base());
	if (r->tcp < 0)
		r->tcp = rsx_libc.fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (r->tcp < 0) {
		ret = -errno;
		goto err_pair;
	}
	rsx_fd_set_private(r->tcp, NULL);
	ret = rsx_watch_add(s, r);
	if (ret)
		goto err_tcp;
	s->rdy = r;
	rsx_stat_inc(RSX_STAT_ready_on);
	return r->x;

err_tcp:
	rsx_fd_private_close(r->tcp);
err_pair:
	rsx_fd_private_close(r->x);
	rsx_fd_private_close(r->y);
err_free:
	free(r);
	rsx_info("fd %d: no readiness for poll/epoll: %s", fd,
		 strerror(-ret));
	return ret;
}

static void rsx_ready_free(struct rsx_ready *r)
{
	rsx_fd_private_close(r->x);
	rsx_fd_private_close(r->y);
	rsx_fd_private_close(r->tcp);
	free(r);
}

/* The program's registrations go back from x to the socket itself. */
static void rsx_ready_unswap(struct rsx_sock *s, int x)
{
	struct epoll_event ev;
	unsigned int i;

	for (i = 0; i < s->nepreg; i++) {
		rsx_libc.epoll_ctl(s->epreg[i].epfd, EPOLL_CTL_DEL, x, NULL);
		ev.events = s->epreg[i].events;
		ev.data.u64 = s->epreg[i].data;
		if (rsx_libc.epoll_ctl(s->epreg[i].epfd, EPOLL_CTL_ADD,
				       s->epreg[i].fd, &ev) &&
		    errno != EEXIST)
			rsx_info("fd %d: epoll %d: cannot move back to TCP: %s",
				 s->epreg[i].fd, s->epreg[i].epfd,
				 strerror(errno));
	}
}

/*
 * A poll() or select() of another thread may sleep on x right now, and
 * closing x would not wake it (and would make it report POLLNVAL for the
 * program's socket).  So a stand-in that goes while its socket stays open
 * wakes such a sleeper as readable and writable (the program then finds
 * the kernel socket's real state) and stays until the socket is freed.
 */
static void rsx_ready_retire(struct rsx_sock *s, struct rsx_ready *r)
{
	static const struct rsx_ready_state all = { .in = 1, .out = 1 };

	s->rdy = r;
	rsx_ready_show(s, &all);
	s->rdy = NULL;
	if (s->rdy_retired)
		rsx_ready_free(s->rdy_retired);
	s->rdy_retired = r;
}

/*
 * Takes s's stand-in away (under s->lock, or s unreachable).  With restore
 * (the connection stays TCP, its descriptors open) the program's epoll
 * registrations go back to the socket and x is retired; without (s is
 * being freed), x is closed, which takes it out of every epoll set.  The
 * watcher may still be about to look at s; rsx_ready_quiesce() waits for
 * that before s is freed.
 */
void rsx_ready_off(struct rsx_sock *s, int restore)
{
	struct rsx_ready *r = s->rdy;

	if (!restore && s->rdy_retired) {
		rsx_ready_free(s->rdy_retired);
		s->rdy_retired = NULL;
	}
	if (!r)
		return;
	if (r->told) {
		r->told = 0;
		atomic_fetch_sub(&rsx_told_pending, 1);
	}
	if (restore && r->swapped)
		rsx_ready_unswap(s, r->x);
	s->rdy = NULL;
	pthread_mutex_lock(&rsx_watch_lock);
	if (rsx_watch_epfd >= 0 && s->conn)
		rsx_watch_chan_del(s->conn);
	if (rsx_watch_epfd >= 0)
		rsx_libc.epoll_ctl(rsx_watch_epfd, EPOLL_CTL_DEL, r->tcp, NULL);
	if (r->slot < rsx_watch_cap && rsx_watch[r->slot].s == s)
		rsx_watch_unslot(r->slot);
	pthread_mutex_unlock(&rsx_watch_lock);
	if (restore)
		rsx_ready_retire(s, r);
	else
		rsx_ready_free(r);
}

/*
 * s is about to be freed (no lock held, out of the table): the watcher and
 * the spinning waits must be done with it.
 */
void rsx_ready_quiesce(struct rsx_sock *s)
{
	while (atomic_load_explicit(&rsx_watch_busy, memory_order_acquire) ==
	       s ||
	       atomic_load_explicit(&s->spinners, memory_order_acquire))
		sched_yield();
}

/*
 * Empties one end of the pair.  One datagram is queued there, more only
 * where a forked copy of the state queued its own; recvmmsg takes them in
 * one call where a loop of recv would need a second to see EAGAIN (one
 * system call per request, in an evented server).
 */
static void rsx_ready_drain(int fd)
{
	struct mmsghdr m[4];
	struct iovec v[4];
	char b[4];
	unsigned int i;

	for (i = 0; i < 4; i++) {
		v[i] = (struct iovec){ .iov_base = &b[i], .iov_len = 1 };
		m[i] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &v[i],
						      .msg_iovlen = 1 } };
	}
	while (rsx_libc.recvmmsg(fd, m, 4, MSG_DONTWAIT, NULL) == 4)
		;
}

/* x unwritable: a datagram that y keeps (a named x has no peer to send to). */
static void rsx_ready_block(const struct rsx_ready *r, const void *b,
			    size_t len)
{
	struct sockaddr_un a;
	socklen_t alen;

	if (!r->xtok) {
		rsx_libc.send(r->x, b, len, MSG_DONTWAIT);
		return;
	}
	alen = rsx_shm_wake_addr(r->xtok, 'y', &a);
	rsx_libc.sendto(r->x, b, len, MSG_DONTWAIT, (struct sockaddr *)&a,
			alen);
}

/* Under s->lock: make x show st. */
void rsx_ready_show(struct rsx_sock *s, const struct rsx_ready_state *st)
{
	static const char block[RSX_BLOCK_LEN];
	struct rsx_ready *r = s->rdy;

	if (st->hup && !r->hup) {
		rsx_libc.shutdown(r->x, SHUT_RDWR);
		r->hup = r->rdhup = 1;
	} else if (st->rdhup && !r->rdhup) {
		rsx_libc.shutdown(r->x, SHUT_RD);
		r->rdhup = 1;
	}
	if (!r->rdhup && (st->in != r->in || r->unsure)) {
		if (st->in)
			rsx_libc.send(r->y, "", 1, MSG_DONTWAIT);
		else
			rsx_ready_drain(r->x);
		r->in = st->in;
		r->unsure = 0;
	}
	if (st->out == r->blocked) {
		if (st->out)
			rsx_ready_drain(r->y);
		else
			rsx_ready_block(r, block, sizeof(block));
		r->blocked = !st->out;
	}
}

/*
 * s's stand-in for its peer to wake directly, or 0 (ready.h): one that
 * the peer's process can reach, that the program waits on in epoll sets
 * only (not in a poll, whose wish rsockx does not keep), for input, and
 * for output only while x shows writable (room to write comes back with
 * the peer's credits, which must then reach the watcher), on a
 * non-blocking socket, whose reader takes a wake that finds nothing for
 * EAGAIN.
 */
uint64_t rsx_ready_direct(const struct rsx_sock *s)
{
	const struct rsx_ready *r = s->rdy;
	unsigned int i;

	if (!r || !r->xtok || !r->swapped || !s->nepreg || r->rdhup ||
	    r->polled ||
	    atomic_load_explicit(&s->evented, memory_order_relaxed) ||
	    !atomic_load_explicit(&s->nonblock, memory_order_relaxed) ||
	    atomic_load_explicit(&s->pollers, memory_order_relaxed))
		return 0;
	for (i = 0; i < s->nepreg; i++)
		if (!(s->epreg[i].events & EPOLLIN) ||
		    ((s->epreg[i].events & EPOLLOUT) && r->blocked))
			return 0;
	return r->xtok;
}

/* The peer woke x since we last looked: x shows what it shows no more. */
void rsx_ready_woken(struct rsx_sock *s)
{
	struct rsx_ready *r = s->rdy;
	uint32_t w;

	if (!r->xtok)
		return;
	w = rsx_conn_woken(s->conn);
	if (w != r->woken) {
		r->woken = w;
		r->unsure = 1;
	}
}

/*
 * A read found nothing: whatever woke the program must go from x (any
 * process may send to it, a late wake of the peer too).
 */
void rsx_ready_recheck(struct rsx_sock *s)
{
	if (s->rdy && s->rdy->xtok)
		s->rdy->unsure = 1;
}

/*
 * Readable s told to the epoll wait this thread spins in, as an event in
 * its buffer, rather than shown on x: a datagram queued on x now and taken
 * back when the program has read would be two system calls per request of
 * an evented server, more than TCP's own read.  Only where the wait would
 * report exactly that event from x: s's one registration is in this epoll
 * set, level-triggered, for input only (no EPOLLOUT that x would add, no
 * ET, ONESHOT or EXCLUSIVE whose state the kernel keeps), and no other
 * process shares the set (no fork).  What the program does not read is
 * told again by its next wait (s->rdy->told) or shown by its next call.
 */
static int rsx_ready_tell(struct rsx_sock *s)
{
	const uint32_t not = EPOLLOUT | EPOLLET | EPOLLONESHOT |
			     EPOLLEXCLUSIVE;
	struct rsx_epoll_out *o = rsx_told_to;
	const struct rsx_epreg *e = s->epreg;
	int i;

	if (!o || rsx_told_off || s->nepreg != 1 || !s->rdy->swapped ||
	    e->epfd != o->epfd || !(e->events & EPOLLIN) || (e->events & not))
		return 0;
	for (i = 0; i < o->n; i++)
		if (o->ev[i].data.u64 == e->data)
			return 1;
	if (o->n == o->max)
		return 0;
	o->ev[o->n].events = e->events & (EPOLLIN | EPOLLRDNORM);
	o->ev[o->n].data.u64 = e->data;
	o->n++;
	rsx_stat_inc(RSX_STAT_ready_told);
	return 1;
}

void rsx_ready_show_sync(struct rsx_sock *s, const struct rsx_ready_state *st)
{
	struct rsx_ready *r = s->rdy;
	struct rsx_ready_state quiet = *st;
	int tell;

	tell = st->in && !st->rdhup && !st->hup && !r->in && !r->rdhup &&
	       rsx_ready_tell(s);
	if (tell != r->told) {
		r->told = tell;
		atomic_fetch_add(&rsx_told_pending, tell ? 1 : -1);
	}
	quiet.in = st->in && !tell;
	rsx_ready_show(s, &quiet);
}

void rsx_ready_forked(void)
{
	rsx_told_off = 1;
}

/* Registrations of the program's epoll sets that name s (see sock.h). */
static struct rsx_epreg *rsx_epreg_find(struct rsx_sock *s, int epfd, int fd)
{
	unsigned int i;

	for (i = 0; i < s->nepreg; i++)
		if (s->epreg[i].epfd == epfd && s->epreg[i].fd == fd)
			return &s->epreg[i];
	return NULL;
}

static void rsx_epreg_drop(struct rsx_sock *s, struct rsx_epreg *e)
{
	*e = s->epreg[--s->nepreg];
}

static void rsx_epreg_note(struct rsx_sock *s, int epfd, int op, int fd,
			   const struct epoll_event *ev)
{
	struct rsx_epreg *e = rsx_epreg_find(s, epfd, fd);

	if (op == EPOLL_CTL_DEL) {
		if (e)
			rsx_epreg_drop(s, e);
		return;
	}
	if (!e && op == EPOLL_CTL_ADD) {
		if (s->nepreg == RSX_EPREGS) {
			/* we could not move it to the stand-in later */
			atomic_store(&s->evented, 1);
			return;
		}
		e = &s->epreg[s->nepreg++];
		e->epfd = epfd;
		e->fd = fd;
	}
	if (e) {
		e->events = ev->events;
		e->data = ev->data.u64;
	}
}

/* A descriptor of s is being closed: its registrations go with it. */
void rsx_ready_forget_fd(struct rsx_sock *s, int fd)
{
	unsigned int i;

	rsx_sock_lock(s);
	for (i = 0; i < s->nepreg;)
		if (s->epreg[i].fd == fd)
			rsx_epreg_drop(s, &s->epreg[i]);
		else
			i++;
	rsx_sock_unlock(s);
}

/*
 * Under s->lock, stand-in made: every registration of the socket in the
 * program's epoll sets moves to x, with the program's own events and data.
 * One that is gone (its epoll set closed) is forgotten.
 */
int rsx_ready_swap(struct rsx_sock *s)
{
	struct epoll_event ev;
	unsigned int i;
	int ret = 0;

	if (s->rdy->swapped)
		return 0;
	s->rdy->swapped = 1;
	for (i = 0; i < s->nepreg;) {
		struct rsx_epreg *e = &s->epreg[i];

		if (rsx_libc.epoll_ctl(e->epfd, EPOLL_CTL_DEL, e->fd, NULL)) {
			rsx_epreg_drop(s, e);
			continue;
		}
		ev.events = e->events;
		ev.data.u64 = e->data;
		if (rsx_libc.epoll_ctl(e->epfd, EPOLL_CTL_ADD, s->rdy->x, &ev)) {
			ret = -errno;
			rsx_info("fd %d: epoll %d: cannot move to the ring: %s",
				 e->fd, e->epfd, strerror(errno));
		}
		i++;
	}
	return ret;
}

/* Might s still be upgraded, or is it?  Then its registrations matter. */
static int rsx_ready_tracks(struct rsx_sock *s)
{
	if (s->kind != RSX_SOCK_TCP)
		return 0;
	return atomic_load(&s->mode) ||
	       atomic_load(&s->role) == RSX_ROLE_NONE;
}

int rsx_ready_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
	struct rsx_sock *s = rsx_fd_peek(fd);
	int target = fd, ret;

	if (likely(!s) || rsx_guarded())
		return 1;
	if (op != EPOLL_CTL_DEL)
		rsx_probe_heir_look(s, fd);
	if (!rsx_ready_tracks(s))
		return 1;
	s = rsx_fd_get(fd);
	if (!s)
		return 1;
	rsx_sock_lock(s);
	if (op != EPOLL_CTL_DEL)
		rsx_sock_forked_use(s);	/* a fork child: TCP first */
	if (op != EPOLL_CTL_DEL && rsx_sock_ready_wanted(s) &&
	    !(s->rdy && s->rdy->swapped)) {
		/* upgraded, or waiting for the answer: x stands in from now */
		ret = rsx_ready_on(s, fd);
		if (ret < 0)
			goto out;
		rsx_ready_swap(s);
		rsx_sock_ready_sync(s);
	}
	if (s->rdy && s->rdy->swapped)
		target = s->rdy->x;
	ret = rsx_libc.epoll_ctl(epfd, op, target, ev) ? -errno : 0;
	if (!ret)
		rsx_epreg_note(s, epfd, op, fd, ev);
	if (s->conn && s->conn->armed_x)
		rsx_sock_ready_sync(s);	/* the wake may have to go elsewhere */
out:
	rsx_sock_unlock(s);
	rsx_sock_put(s);
	return ret;
}

/*
 * The stand-in of fd for a poll, or -1: wait on fd itself.  A socket that
 * may move out of band counts the wait instead (*gen set, oob.h).
 */
static int rsx_poll_fd(int fd, uint32_t *gen, uint8_t *counted)
{
	struct rsx_sock *s = rsx_fd_peek(fd);
	int x = -1;

	*counted = 0;
	if (likely(!s) || s->kind != RSX_SOCK_TCP)
		return -1;
	rsx_probe_heir_look(s, fd);
	if (!atomic_load_explicit(&s->mode, memory_order_relaxed))
		return -1;
	s = rsx_fd_get(fd);
	if (!s)
		return -1;
	rsx_sock_lock(s);
	rsx_sock_forked_use(s);	/* a fork child waits on it: TCP first */
	if (rsx_sock_ready_wanted(s)) {
		x = rsx_ready_on(s, fd);
		if (x >= 0) {
			s->rdy->polled = 1;	/* its events are not kept */
			rsx_sock_ready_sync(s);
		}
		if (!rsx_sock_ready_wanted(s))
			x = -1;		/* the answer said TCP meanwhile */
	} else if (rsx_sock_poll_begin(s)) {
		*gen = s->gen;
		*counted = 1;
	}
	rsx_sock_unlock(s);
	rsx_sock_put(s);
	return x;
}

int rsx_poll_enter(struct pollfd *fds, nfds_t nfds, struct rsx_poll_save *sv)
{
	struct rsx_poll_ent *more;
	uint8_t counted;
	uint32_t gen = 0;
	nfds_t i;
	int x;

	sv->n = 0;
	sv->cap = RSX_POLL_SAVE;
	sv->ent = sv->local;
	if (likely(!atomic_load_explicit(&rsx_engine_socks,
					 memory_order_relaxed)) ||
	    rsx_guarded())
		return 0;
	for (i = 0; i < nfds; i++) {
		x = rsx_poll_fd(fds[i].fd, &gen, &counted);
		if (x < 0 && !counted)
			continue;
		if (sv->n == sv->cap) {
			more = malloc(2 * sv->cap * sizeof(*more));
			if (!more) {
				if (counted)
					rsx_sock_poll_done(fds[i].fd, gen);
				rsx_poll_leave(fds, sv);
				return -ENOMEM;
			}
			memcpy(more, sv->ent, sv->n * sizeof(*more));
			if (sv->ent != sv->local)
				free(sv->ent);
			sv->ent = more;
			sv->cap *= 2;
		}
		sv->ent[sv->n].idx = i;
		sv->ent[sv->n].fd = fds[i].fd;
		sv->ent[sv->n].gen = gen;
		sv->ent[sv->n].counted = counted;
		sv->n++;
		if (x >= 0)
			fds[i].fd = x;
	}
	return sv->n;
}

void rsx_poll_leave(struct pollfd *fds, struct rsx_poll_save *sv)
{
	unsigned int i;

	for (i = 0; i < sv->n; i++) {
		fds[sv->ent[i].idx].fd = sv->ent[i].fd;
		if (sv->ent[i].counted)
			rsx_sock_poll_done(sv->ent[i].fd, sv->ent[i].gen);
	}
	if (sv->ent != sv->local)
		free(sv->ent);
	sv->n = 0;
	sv->ent = sv->local;
}

int rsx_select_needs(int nfds, const fd_set *r, const fd_set *w,
		     const fd_set *e)
{
	struct rsx_sock *s;
	int fd;

	if (unlikely(rsx_probe_heirs_open()) && !rsx_guarded())
		rsx_probe_adopt_all(RSX_ADOPT_WATCH);
	if (likely(!atomic_load_explicit(&rsx_engine_socks,
					 memory_order_relaxed)) ||
	    rsx_guarded())
		return 0;
	for (fd = 0; fd < nfds && fd < FD_SETSIZE; fd++) {
		if (!(r && FD_ISSET(fd, r)) && !(w && FD_ISSET(fd, w)) &&
		    !(e && FD_ISSET(fd, e)))
			continue;
		s = rsx_fd_peek(fd);
		if (s && s->kind == RSX_SOCK_TCP &&
		    (s->state == RSX_ST_UPGRADED ||
		     s->state == RSX_ST_CLIENT_HELLO ||
		     s->state == RSX_ST_FORKED ||
		     rsx_state_counted(s->state) ||
		     (s->oob_ok && s->state != RSX_ST_TCP)))
			return 1;
	}
	return 0;
}

/*
 * Busy polling for poll, select and epoll (ARCHITECTURE item 11).  An
 * arrival for a program asleep in one of those wakes the watcher, which
 * wakes the program: two thread wakeups, where a blocking read that is
 * still spinning takes none.  So before the program's call sleeps, the
 * thread polls the completion queues of the watched connections itself
 * for up to RSOCKX_SPIN_US, which keeps their stand-ins current, and asks
 * the kernel again without waiting whenever one moved, and every
 * RSX_SPIN_ASK_EVERY rounds for the program's other descriptors.  Only
 * while few connections are watched: a round polls them all.
 *
 * A handler of the program that runs during the spin ends the call with
 * EINTR (sig.h).  Where rsockx cannot see the handlers run, or the call
 * has a mask of its own (ppoll, pselect, epoll_pwait: the spin must not
 * let in what it blocks), signals are held back while it spins
 * (rsx_guard_signals).  Either way they are held back from the end of the
 * spin on, and the wait that follows takes the program's mask atomically.
 * A timeout runs from the end of the spin: the wait is longer by at most
 * the spin, which the kernel's timeouts allow, and the spin no longer than
 * the timeout.
 */
#define RSX_SPIN_ASK_EVERY	16

/*
 * The next watched socket from *i on, NULL at the end; rsx_watch_done()
 * when done with it.  Not a reference, which would make the program's
 * close() of its last descriptor look like not the last one (track.c),
 * skipping the FIN: s counts the thread as a spinner instead, and
 * rsx_ready_quiesce() lets it be freed only once none is left.  Until
 * then a spinner finds s->rdy gone under s->lock and does nothing.
 */
static struct rsx_sock *rsx_watch_next(uint32_t *i)
{
	struct rsx_sock *s = NULL;

	pthread_mutex_lock(&rsx_watch_lock);
	for (; *i < rsx_watch_cap && !s; (*i)++)
		s = rsx_watch[*i].s;
	if (s)
		atomic_fetch_add(&s->spinners, 1);
	pthread_mutex_unlock(&rsx_watch_lock);
	return s;
}

static void rsx_watch_done(struct rsx_sock *s)
{
	atomic_fetch_sub_explicit(&s->spinners, 1, memory_order_release);
}

/*
 * Every watched connection polled once: 1 when any took something in.
 * With arm, before a sleep: each one synced under its lock, waiting for it
 * (with a sleeper counted, that arms its CQ).
 */
static int rsx_spin_round(int arm)
{
	struct rsx_sock *s;
	uint32_t i = 0;
	int moved = 0;

	while ((s = rsx_watch_next(&i))) {
		if (arm) {
			rsx_sock_lock(s);
			rsx_sock_ready_sync(s);
			rsx_sock_unlock(s);
		} else if (!rsx_sock_trylock(s)) {
			moved |= rsx_sock_ready_spin(s);
			rsx_sock_unlock(s);
		}
		rsx_watch_done(s);
	}
	return moved;
}

/*
 * The program's wait, with what the spin told in front (rsx_ready_tell):
 * then the kernel is asked without waiting for the rest, and an event of
 * x that the watcher set meanwhile merges into ours (same data).
 */
static int rsx_spin_call(rsx_ready_call *call, void *arg,
			 struct rsx_epoll_out *out, int wait,
			 const sigset_t *mask)
{
	int n, ret, i, j;

	if (likely(!out || !out->n))
		return call(arg, wait, mask);
	n = out->n;
	ret = call(arg, 0, NULL);
	out->n = 0;
	if (ret < 0)
		return n;
	for (i = n; i < n + ret;) {
		for (j = 0; j < n && out->ev[j].data.u64 != out->ev[i].data.u64;
		     j++)
			;
		if (j == n) {
			i++;
			continue;
		}
		out->ev[j].events |= out->ev[i].events;
		out->ev[i] = out->ev[n + --ret];
	}
	return n + ret;
}

static int rsx_spin_wait(rsx_ready_call *call, void *arg,
			 struct rsx_epoll_out *out, int64_t timeout_us,
			 const sigset_t *ss)
{
	const sigset_t *mask = ss;
	int64_t spin = rsx_config.spin_us;
	struct rsx_spin_end end;
	struct rsx_sig_seen seen;
	sigset_t old;
	unsigned int i;
	int ret, held = 0, counted;

	/* what came in while the program was busy, unarmed */
	rsx_spin_round(0);
	if (!timeout_us)
		return rsx_spin_call(call, arg, out, 1, ss);
	ret = rsx_spin_call(call, arg, out, 0, NULL);
	if (ret)
		return ret;
	if (spin) {
		rsx_sig_snap(&seen);
		counted = !ss && rsx_sig_wrapped();
		if (!counted) {
			rsx_guard_signals(&old);
			held = 1;
			mask = ss ? ss : &old;
		}
		rsx_stat_inc(RSX_STAT_spin_waits);
		if (timeout_us > 0 && timeout_us < spin)
			rsx_spin_end_init(&end, timeout_us, 1);
		else
			rsx_spin_end_init(&end, spin, 0);
		for (i = 1;; i++) {
			if (!rsx_spin_round(0) && i % RSX_SPIN_ASK_EVERY)
				continue;
			ret = rsx_spin_call(call, arg, out, 0, NULL);
			if (ret) {
				rsx_stat_inc(RSX_STAT_spin_wakes);
				goto out;
			}
			if (counted ? rsx_sig_ran(&seen) :
			    rsx_guard_signalled(mask))
				break;
			if (rsx_spin_end_passed(&end))
				break;
		}
		if (counted) {
			rsx_guard_signals(&old);
			held = 1;
			mask = &old;
			if (rsx_sig_ran(&seen)) {
				errno = EINTR;
				ret = -1;
				goto out;
			}
		}
	}
	/* asleep from now on: every CQ must raise its event */
	atomic_fetch_add(&rsx_ready_sleepers, 1);
	rsx_spin_round(1);
	ret = rsx_spin_call(call, arg, out, 0, NULL);
	if (!ret)
		ret = rsx_spin_call(call, arg, out, 1, mask);
	atomic_fetch_sub(&rsx_ready_sleepers, 1);
out:
	if (held)
		rsx_guard_signals_end(&old);
	return ret;
}

int rsx_ready_spin(rsx_ready_call *call, void *arg,
		   struct rsx_epoll_out *out, int64_t timeout_us,
		   const sigset_t *ss)
{
	uint32_t live = atomic_load_explicit(&rsx_watch_live,
					     memory_order_relaxed);
	struct rsx_epoll_out *outer;
	int ret;

	if (likely(!live) || live > RSX_SPIN_CONNS_MAX || rsx_guarded()) {
		/* a wait that does not spin: what was told goes on x first */
		if (unlikely(atomic_load_explicit(&rsx_told_pending,
						  memory_order_relaxed) > 0) &&
		    live && !rsx_guarded())
			rsx_spin_round(0);
		return call(arg, 1, ss);
	}
	if (out)
		out->n = 0;
	outer = rsx_told_to;	/* a handler's wait within a spin */
	rsx_told_to = out;
	ret = rsx_spin_wait(call, arg, out, timeout_us, ss);
	rsx_told_to = outer;
	return ret;
}

/* select's wait: ppoll over the set (rsx_ready_call). */
struct rsx_select_call {
	struct pollfd *pfd;
	int n;
	const struct timespec *ts;
};

static int rsx_select_call(void *arg, int wait, const sigset_t *mask)
{
	static const struct timespec zero;
	struct rsx_select_call *a = arg;

	return rsx_libc.ppoll(a->pfd, a->n, wait ? a->ts : &zero, mask);
}

/*
 * select through ppoll, for sets that hold an upgraded socket.  Like the
 * kernel's select, *ts is left with the time that was not slept.
 */
int rsx_select_poll(int nfds, fd_set *r, fd_set *w, fd_set *e,
		    struct timespec *ts, const sigset_t *ss)
{
	struct pollfd pfd[FD_SETSIZE];
	struct rsx_select_call sc;
	struct rsx_poll_save sv;
	int64_t start = rsx_mono_ns(), left;
	int fd, n = 0, i, ret, count = 0;
	short ev;

	if (nfds > FD_SETSIZE)
		nfds = FD_SETSIZE;
	for (fd = 0; fd < nfds; fd++) {
		ev = 0;
		if (r && FD_ISSET(fd, r))
			ev |= POLLIN;
		if (w && FD_ISSET(fd, w))
			ev |= POLLOUT;
		if (e && FD_ISSET(fd, e))
			ev |= POLLPRI;
		if (!ev)
			continue;
		pfd[n].fd = fd;
		pfd[n].events = ev;
		pfd[n].revents = 0;
		n++;
	}
	ret = rsx_poll_enter(pfd, n, &sv);
	if (ret < 0)
		return ret;
	sc.pfd = pfd;
	sc.n = n;
	sc.ts = ts;
	ret = rsx_ready_spin(rsx_select_call, &sc, NULL, rsx_ready_ts_us(ts),
			     ss);
	if (ret < 0)
		ret = -errno;
	rsx_poll_leave(pfd, &sv);
	if (ts) {
		left = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec -
		       (rsx_mono_ns() - start);
		if (left < 0)
			left = 0;
		ts->tv_sec = left / 1000000000;
		ts->tv_nsec = left % 1000000000;
	}
	if (ret < 0)
		return ret;
	for (i = 0; i < n; i++)
		if (pfd[i].revents & POLLNVAL)
			return -EBADF;
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (e)
		FD_ZERO(e);
	for (i = 0; i < n; i++) {
		short rev = pfd[i].revents, want = pfd[i].events;

		if ((want & POLLIN) && (rev & (POLLIN | POLLHUP | POLLERR))) {
			FD_SET(pfd[i].fd, r);
			count++;
		}
		if ((want & POLLOUT) && (rev & (POLLOUT | POLLERR))) {
			FD_SET(pfd[i].fd, w);
			count++;
		}
		if ((want & POLLPRI) && (rev & POLLPRI)) {
			FD_SET(pfd[i].fd, e);
			count++;
		}
	}
	return count;
}

/*
 * The child of fork() has no watcher thread; its copies of the parent's
 * connections are the parent's (sock.c), and a connection the child makes
 * starts a watcher of its own.
 */
void rsx_ready_fork_child(void)
{
	pthread_mutex_init(&rsx_watch_lock, NULL);
	rsx_fd_private_close(rsx_watch_epfd);
	rsx_watch_epfd = -1;
	rsx_watch_state = 0;
	if (rsx_watch)
		memset(rsx_watch, 0, rsx_watch_cap * sizeof(*rsx_watch));
	atomic_store(&rsx_watch_busy, NULL);
	atomic_store(&rsx_watch_live, 0);
	atomic_store(&rsx_ready_sleepers, 0);
	atomic_store(&rsx_watch_unarmed, 0);
	atomic_store(&rsx_watch_forever, 0);
	rsx_fd_private_close(rsx_watch_kick_fd);
	rsx_watch_kick_fd = -1;
	atomic_store(&rsx_told_pending, 0);
	rsx_told_off = 1;
}
