// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "libc.h"
#include "log.h"
#include "sock.h"
#include "stats.h"
#include "statshm.h"

static _Atomic uint64_t rsx_stats_private[RSX_STAT_COUNT];
_Atomic uint64_t *_Atomic rsx_stats = rsx_stats_private;
_Atomic int rsx_stats_pub = RSX_PUB_OFF;

/* The region names states and roles by the numbers of sock.h. */
_Static_assert(RSX_ST_TCP == 0 && RSX_ST_UPGRADED == 5 && RSX_ST_FORKED == 6 &&
	       RSX_ST_SERVER_WAIT == 9,
	       "RSX_SHM_CONN_STATES follows enum rsx_state");
_Static_assert(RSX_ROLE_CONNECTOR == 2 && RSX_ROLE_ACCEPTED == 3,
	       "RSX_SHM_CONN_ROLES follows enum rsx_sock_role");

/* Every counter name fits its slot in the region. */
#define RSX_STAT_NAME_FITS(name)					\
	_Static_assert(sizeof(#name) <= RSX_SHM_NAME_LEN, #name);
RSX_STATS(RSX_STAT_NAME_FITS)
#undef RSX_STAT_NAME_FITS

/* The region this process writes (NULL: none), and its length. */
static struct rsx_shm_hdr *rsx_shm;
static size_t rsx_shm_size;

/*
 * Its connection entries, and which socket object each entry is (0: free),
 * kept here rather than in the region: a look-up scans 1 KiB of private
 * memory.  rsx_conn_snap: the entries as they were before fork().
 */
static struct rsx_shm_conn *rsx_shm_conn;
static _Atomic uintptr_t rsx_conn_key[RSX_SHM_CONNS];
static struct rsx_shm_conn rsx_conn_snap[RSX_SHM_CONNS];

static const char *const rsx_stat_names[] = {
#define RSX_STAT_NAME(name) #name,
	RSX_STATS(RSX_STAT_NAME)
#undef RSX_STAT_NAME
};

const char *rsx_stat_name(enum rsx_stat s)
{
	return (unsigned int)s < RSX_STAT_COUNT ? rsx_stat_names[s] : "?";
}

/* What earlier lines of RSOCKX_STATS_FILE already said (rsx_stats_dump). */
static uint64_t rsx_stats_dumped[RSX_STAT_COUNT];

/*
 * "key=value key=value ...", no newline, of the counts since the last
 * dump; each value is also left in val[].  Returns the length or -ENOSPC.
 */
static int rsx_stats_format(char *buf, size_t len, uint64_t *val)
{
	size_t off = 0;
	int i, n;

	for (i = 0; i < RSX_STAT_COUNT; i++) {
		val[i] = rsx_stat_get(i) - rsx_stats_dumped[i];
		n = snprintf(buf + off, len - off, "%s%s=%llu", i ? " " : "",
			     rsx_stat_names[i], (unsigned long long)val[i]);
		if (n < 0 || (size_t)n >= len - off)
			return -ENOSPC;
		off += n;
	}
	return off;
}

/*
 * Appends "rsockx[PID]: stats: ..." to path (RSOCKX_STATS_FILE): at exit,
 * and before an exec, whose new program counts anew.  Should the exec
 * fail, the line at exit holds only what came after, so that the lines of
 * a process always add up.
 */
int rsx_stats_dump(const char *path)
{
	uint64_t now[RSX_STAT_COUNT];
	char buf[2048];
	int fd, n, m, i, ret = 0;

	n = snprintf(buf, sizeof(buf), "rsockx[%d]: stats: ", (int)getpid());
	m = rsx_stats_format(buf + n, sizeof(buf) - n - 1, now);
	if (m < 0)
		return m;
	n += m;
	buf[n++] = '\n';
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (rsx_safe_write(fd, buf, n) != n)
		ret = -EIO;
	rsx_libc.close(fd);
	for (i = 0; !ret && i < RSX_STAT_COUNT; i++)
		rsx_stats_dumped[i] += now[i];
	return ret;
}

/*
 * The statistics region (statshm.h).  Everything below runs on events the
 * library already handles slowly (the first tracked TCP socket, fork, exec,
 * exit), possibly in a signal handler (socket() and accept() are
 * async-signal-safe): system calls and plain stores only, no allocation,
 * no stdio.
 */
void rsx_stats_shm_enable(void)
{
	int expect = RSX_PUB_OFF;

	atomic_compare_exchange_strong(&rsx_stats_pub, &expect, RSX_PUB_NONE);
}

static uint64_t rsx_now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_REALTIME, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

/* RSX_SHM_DIR/rsockx.<pid> into buf (at least 64 bytes). */
static void rsx_shm_path(char *buf, pid_t pid)
{
	static const char pre[] = RSX_SHM_DIR "/" RSX_SHM_PREFIX;
	char digits[12];
	unsigned int v = pid, n = 0;

	do {
		digits[n++] = '0' + v % 10;
		v /= 10;
	} while (v && n < sizeof(digits));
	memcpy(buf, pre, sizeof(pre) - 1);
	buf += sizeof(pre) - 1;
	while (n)
		*buf++ = digits[--n];
	*buf = 0;
}

/*
 * When this process started, in clock ticks since boot (field 22 of
 * /proc/self/stat): with the pid it names the process for good, pid reuse
 * included.  0 when /proc cannot tell.
 */
static uint64_t rsx_start_ticks(void)
{
	char buf[1024], state;
	ssize_t n;
	int fd;

	fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = rsx_libc.read(fd, buf, sizeof(buf) - 1);
	rsx_libc.close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return rsx_proc_start_ticks(buf, &state);
}

static int rsx_shm_open(const char *path)
{
	return open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
		    0600);
}

static int rsx_shm_create(void)
{
	size_t names_off = RSX_SHM_HDR_SIZE, counters_off, conns_off, size;
	size_t page = getpagesize();
	_Atomic uint64_t *counters, *old;
	struct rsx_shm_hdr *h;
	pid_t pid = getpid();
	char path[64], *names;
	unsigned int i;
	int fd, ret;

	counters_off = (names_off + RSX_STAT_COUNT * RSX_SHM_NAME_LEN + 63) &
		       ~(size_t)63;
	conns_off = (counters_off + RSX_STAT_COUNT * sizeof(uint64_t) + 63) &
		    ~(size_t)63;
	size = (conns_off + RSX_SHM_CONNS * sizeof(struct rsx_shm_conn) +
		page - 1) & ~(page - 1);
	rsx_shm_path(path, pid);
	fd = rsx_shm_open(path);
	if (fd < 0 && errno == EEXIST) {
		/*
		 * Left by the program this process was before an exec, or
		 * by a dead process whose pid this is now: nobody else's.
		 * In the sticky /dev/shm, unlink() fails on another user's.
		 */
		if (!unlink(path))
			fd = rsx_shm_open(path);
	}
	if (fd < 0)
		return -errno;
	/* fallocate, not ftruncate: a full tmpfs must fail here, not as
	 * SIGBUS on the first counter update */
	if (fallocate(fd, 0, 0, size)) {
		ret = -errno;
		goto err_unlink;
	}
	h = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (h == MAP_FAILED) {
		ret = -errno;
		goto err_unlink;
	}
	rsx_libc.close(fd);

	h->version = RSX_SHM_VERSION;
	h->size = size;
	h->ncounters = RSX_STAT_COUNT;
	h->name_len = RSX_SHM_NAME_LEN;
	h->names_off = names_off;
	h->counters_off = counters_off;
	h->pid = pid;
	h->uid = geteuid();
	atomic_store(&h->state, RSX_SHM_LIVE);
	h->start_ticks = rsx_start_ticks();
	h->start_ns = rsx_now_ns();
	strncpy(h->comm, program_invocation_short_name, sizeof(h->comm) - 1);
	h->conns_off = conns_off;
	h->nconns = RSX_SHM_CONNS;
	h->conn_size = sizeof(struct rsx_shm_conn);
	rsx_shm_conn = (struct rsx_shm_conn *)((char *)h + conns_off);
	for (i = 0; i < RSX_SHM_CONNS; i++)
		atomic_store(&rsx_shm_conn[i].fd, -1);
	names = (char *)h + names_off;
	for (i = 0; i < RSX_STAT_COUNT; i++)
		strncpy(names + i * RSX_SHM_NAME_LEN, rsx_stat_names[i],
			RSX_SHM_NAME_LEN - 1);

	/*
	 * Counting moves to the region first, then what was counted so far
	 * follows it: an event counted meanwhile by another thread lands in
	 * one place or the other, both of which are summed here.
	 */
	counters = (_Atomic uint64_t *)((char *)h + counters_off);
	rsx_shm = h;
	rsx_shm_size = size;
	old = atomic_exchange(&rsx_stats, counters);
	for (i = 0; i < RSX_STAT_COUNT; i++)
		atomic_fetch_add_explicit(&counters[i],
					  atomic_exchange(&old[i], 0),
					  memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(h->magic, RSX_SHM_MAGIC, sizeof(h->magic));
	return 0;

err_unlink:
	unlink(path);
	rsx_libc.close(fd);
	return ret;
}

/*
 * Makes the region, once (the first tracked TCP socket).  A concurrent
 * caller does not wait: the counters work wherever they are.
 */
int rsx_stats_publish_slow(void)
{
	int expect = RSX_PUB_NONE, saved = errno, ret;

	if (!atomic_compare_exchange_strong(&rsx_stats_pub, &expect,
					    RSX_PUB_BUSY))
		return 0;
	ret = rsx_shm_create();
	atomic_store(&rsx_stats_pub, ret ? RSX_PUB_FAILED : RSX_PUB_MAPPED);
	if (ret)
		rsx_dbg("statistics region not made (%s): counters stay "
			"private", strerror(-ret));
	errno = saved;
	return ret;
}

/*
 * Right before fork(): the child will start with the parent's counts, as
 * it would without the region, but the region is shared with the child
 * and keeps changing (the parent may count its exec before the child
 * runs at all).  So the counts are copied into the private array, unused
 * while the region is mapped, for the child to start from.
 */
void rsx_stats_fork_prepare(void)
{
	_Atomic uint64_t *cur = atomic_load(&rsx_stats);
	unsigned int i;

	if (cur == rsx_stats_private)
		return;
	for (i = 0; i < RSX_STAT_COUNT; i++)
		atomic_store_explicit(&rsx_stats_private[i],
				      atomic_load_explicit(&cur[i],
							   memory_order_relaxed),
				      memory_order_relaxed);
	if (!rsx_shm_conn)
		return;
	for (i = 0; i < RSX_SHM_CONNS; i++)
		if (atomic_load_explicit(&rsx_conn_key[i],
					 memory_order_relaxed))
			memcpy(&rsx_conn_snap[i], &rsx_shm_conn[i],
			       sizeof(rsx_conn_snap[i]));
}

/*
 * In a fork child, before anything else is counted: the counters mapped
 * are the parent's.  The child counts in the private array again (the
 * copy made before the fork), the parent's mapping goes, and the child
 * makes its own region.
 */
void rsx_stats_fork_child(void)
{
	int pub = atomic_load(&rsx_stats_pub);
	unsigned int i;

	if (atomic_load(&rsx_stats) != rsx_stats_private)
		atomic_store(&rsx_stats, rsx_stats_private);
	if (rsx_shm) {
		munmap(rsx_shm, rsx_shm_size);
		rsx_shm = NULL;
		rsx_shm_conn = NULL;
	}
	if (pub != RSX_PUB_MAPPED && pub != RSX_PUB_BUSY)
		return;
	atomic_store(&rsx_stats_pub, RSX_PUB_NONE);
	if (rsx_stats_publish_slow()) {
		for (i = 0; i < RSX_SHM_CONNS; i++)
			atomic_store(&rsx_conn_key[i], 0);
		return;
	}
	/* the child has the parent's descriptors, hence its connections */
	for (i = 0; i < RSX_SHM_CONNS; i++)
		if (atomic_load(&rsx_conn_key[i]))
			memcpy(&rsx_shm_conn[i], &rsx_conn_snap[i],
			       sizeof(rsx_shm_conn[i]));
}

/* The region of this very process (not a vfork parent's), or NULL. */
static struct rsx_shm_hdr *rsx_shm_mine(void)
{
	struct rsx_shm_hdr *h = rsx_shm;

	if (atomic_load(&rsx_stats_pub) != RSX_PUB_MAPPED || !h ||
	    h->pid != getpid())
		return NULL;
	return h;
}

/* An exec-family call starts (starting = 1) or came back failed (0). */
void rsx_stats_exec(int starting)
{
	struct rsx_shm_hdr *h = rsx_shm_mine();

	if (!h)
		return;
	atomic_store(&h->end_ns, starting ? rsx_now_ns() : 0);
	atomic_store(&h->state, starting ? RSX_SHM_EXEC : RSX_SHM_LIVE);
}

/* exit() or _exit(): the region stays for a post-mortem, marked. */
void rsx_stats_exit(void)
{
	struct rsx_shm_hdr *h = rsx_shm_mine();

	if (!h)
		return;
	atomic_store(&h->end_ns, rsx_now_ns());
	atomic_store(&h->state, RSX_SHM_EXITED);
}

/*
 * Connection entries (statshm.h): written when a connection is tracked,
 * changes state, or goes; key is its struct rsx_sock.  Entries of
 * sockets found no room for are only counted.
 */
static int rsx_conn_find(uintptr_t key)
{
	int i;

	for (i = 0; i < RSX_SHM_CONNS; i++)
		if (atomic_load_explicit(&rsx_conn_key[i],
					 memory_order_relaxed) == key)
			return i;
	return -1;
}

static int rsx_conn_ready(void)
{
	return atomic_load_explicit(&rsx_stats_pub, memory_order_acquire) ==
	       RSX_PUB_MAPPED && rsx_shm_conn;
}

void rsx_stats_conn_open(const void *key, int fd, int family, int role,
			 int state)
{
	uintptr_t k = (uintptr_t)key, zero;
	struct rsx_shm_conn *e;
	uint64_t now;
	int i;

	if (!rsx_conn_ready())
		return;
	i = rsx_conn_find(k);
	for (zero = 0; i < 0; zero = 0) {
		for (i = 0; i < RSX_SHM_CONNS; i++)
			if (!atomic_load_explicit(&rsx_conn_key[i],
						  memory_order_relaxed))
				break;
		if (i == RSX_SHM_CONNS) {
			atomic_fetch_add(&rsx_shm->conns_full, 1);
			return;
		}
		if (!atomic_compare_exchange_strong(&rsx_conn_key[i], &zero,
						    k))
			i = -1;		/* taken meanwhile: next one */
	}
	e = &rsx_shm_conn[i];
	now = rsx_now_ns();
	e->role = role;
	e->family = family;
	e->opened_ns = now;
	atomic_store(&e->state, state);
	atomic_store(&e->since_ns, now);
	atomic_store_explicit(&e->fd, fd, memory_order_release);
}

void rsx_stats_conn_state(const void *key, int state)
{
	int i;

	if (!rsx_conn_ready())
		return;
	i = rsx_conn_find((uintptr_t)key);
	if (i < 0)
		return;
	atomic_store(&rsx_shm_conn[i].state, state);
	atomic_store(&rsx_shm_conn[i].since_ns, rsx_now_ns());
}

void rsx_stats_conn_close(const void *key)
{
	int i;

	if (!rsx_conn_ready())
		return;
	i = rsx_conn_find((uintptr_t)key);
	if (i < 0)
		return;
	atomic_store(&rsx_shm_conn[i].fd, -1);
	atomic_store(&rsx_conn_key[i], 0);
}
