// SPDX-License-Identifier: MIT
/*
 * rsockx-stat: the live counters of rsockx processes.
 *
 * Every process under librsockx that has used TCP publishes its counters
 * in RSX_SHM_DIR/rsockx.<pid> (src/statshm.h).  This reads those regions
 * (never writes them), shows a table, the counters one by one, or JSON,
 * once or every few seconds, and removes the regions of processes that are
 * gone.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "statshm.h"

#define RSX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MAX_PIDS	64
#define MAX_COUNTERS	1024

static const char *prog = "rsockx-stat";

static struct {
	int json, detail, all, keep, clean_only, conns;
	double interval;
	long count;
	pid_t pids[MAX_PIDS];
	int npids;
	const char *dir;
} opt = { .count = -1, .dir = RSX_SHM_DIR };

/*
 * What the tool says of a region: live; exec (the program exec'd another,
 * which has not used TCP yet); exited (exit() or _exit() marked it);
 * dead (the pid is gone, or belongs to another process now, and nothing
 * marked the region: killed by a signal, or a raw exit system call).
 */
enum pstate { P_LIVE, P_EXEC, P_EXITED, P_DEAD };
static const char *const pstate_name[] = {
	[P_LIVE] = "live", [P_EXEC] = "exec", [P_EXITED] = "exited",
	[P_DEAD] = "dead",
};

static const char *const conn_state_name[] = RSX_SHM_CONN_STATES;
static const char *const conn_role_name[] = RSX_SHM_CONN_ROLES;

struct conn {
	int fd;
	unsigned int state, role, family;
	uint64_t opened_ns, since_ns;
	char local[64], remote[64];	/* "" when unknown */
};

/* One region, copied out of the mapping. */
struct proc {
	pid_t pid;
	uid_t uid;
	enum pstate state;
	int gone;		/* the writer's pid is dead or reused */
	char comm[16];
	char path[PATH_MAX];
	uint64_t start_ns, end_ns;
	unsigned int n;
	char (*names)[RSX_SHM_NAME_LEN];
	uint64_t *val;
	struct conn *conns;
	unsigned int nconns;
	uint32_t conns_full;
};

static void usage(FILE *f)
{
	fprintf(f,
"Usage: %s [options]\n"
"Show the statistics of the processes that run under librsockx.\n"
"\n"
"  -p, --pid PID        only this process (may be repeated)\n"
"  -d, --counters       every non-zero counter of each process\n"
"  -a, --all            every counter, zero ones too (implies --counters)\n"
"  -C, --connections    the open connections of each process\n"
"  -j, --json           JSON, one document per report\n"
"  -i, --interval SEC   report again every SEC seconds\n"
"  -c, --count N        stop after N reports (with --interval)\n"
"  -k, --keep           keep the regions of processes that are gone\n"
"      --clean          only remove the regions of processes that are gone\n"
"  -h, --help           this help\n"
"  -V, --version        the version\n"
"\n"
"Regions of dead processes are shown once (state exited or dead) and then\n"
"removed, unless --keep.\n", prog);
}

static void die(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));

static void die(int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(code);
}

static long parse_long(const char *s, const char *what, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < min || v > max)
		die(2, "%s: want a number from %ld to %ld, not \"%s\"", what,
		    min, max, s);
	return v;
}

/* rsx_proc_start_ticks() of process pid (see src/statshm.h). */
static uint64_t start_ticks(pid_t pid, char *state)
{
	char path[64], buf[1024];
	ssize_t n;
	int fd;

	*state = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	return rsx_proc_start_ticks(buf, state);
}

/*
 * Is the process that wrote the region gone?  Its pid is free (ESRCH),
 * a zombie, or taken by a process that started at another time.
 */
static int proc_gone(const struct rsx_shm_hdr *h)
{
	uint64_t now;
	char state;

	if (kill(h->pid, 0) && errno == ESRCH)
		return 1;
	now = start_ticks(h->pid, &state);
	if (state == 'Z' || state == 'X')
		return 1;
	return h->start_ticks && now && now != h->start_ticks;
}

static enum pstate proc_state(uint32_t state, int gone)
{
	if (state == RSX_SHM_EXITED)
		return P_EXITED;
	if (gone)
		return P_DEAD;
	if (state == RSX_SHM_EXEC)
		return P_EXEC;
	return P_LIVE;
}

static void proc_free(struct proc *p)
{
	free(p->names);
	free(p->val);
	free(p->conns);
	p->names = NULL;
	p->val = NULL;
	p->conns = NULL;
}

/* The connection entries in use; an older layout without them has none. */
static int read_conns(const void *map, const struct rsx_shm_hdr *h,
		      struct proc *p)
{
	const struct rsx_shm_conn *e;
	unsigned int i, n = h->nconns;
	struct conn *c;
	int fd;

	p->nconns = 0;
	p->conns_full = __atomic_load_n(&h->conns_full, __ATOMIC_RELAXED);
	if (!n || h->conn_size < sizeof(*e) || n > 65536 ||
	    (uint64_t)h->conns_off + (uint64_t)n * h->conn_size > h->size)
		return 0;
	p->conns = calloc(n, sizeof(*p->conns));
	if (!p->conns)
		return -ENOMEM;
	for (i = 0; i < n; i++) {
		e = (const void *)((const char *)map + h->conns_off +
				   (size_t)i * h->conn_size);
		fd = __atomic_load_n(&e->fd, __ATOMIC_ACQUIRE);
		if (fd < 0)
			continue;
		c = &p->conns[p->nconns++];
		c->fd = fd;
		c->state = __atomic_load_n(&e->state, __ATOMIC_RELAXED);
		c->role = e->role;
		c->family = e->family;
		c->opened_ns = e->opened_ns;
		c->since_ns = __atomic_load_n(&e->since_ns, __ATOMIC_RELAXED);
	}
	return 0;
}

static const char *conn_state(const struct conn *c)
{
	return c->state < RSX_ARRAY_LEN(conn_state_name) ?
	       conn_state_name[c->state] : "?";
}

static const char *conn_role(const struct conn *c)
{
	return c->role < RSX_ARRAY_LEN(conn_role_name) ?
	       conn_role_name[c->role] : "?";
}

/* "0100007F:1F90" of /proc/net/tcp (or the IPv6 form) to "a:p"/"[a]:p" */
static void tcp_addr(const char *hex, char *out, size_t len)
{
	unsigned char a[16];
	char ip[INET6_ADDRSTRLEN];
	unsigned int port, w, i, j;
	size_t n = strcspn(hex, ":");

	out[0] = 0;
	if ((n != 8 && n != 32) || sscanf(hex + n, ":%x", &port) != 1)
		return;
	/* the kernel prints each 32-bit word in host order */
	for (i = 0; i < n / 8; i++) {
		if (sscanf(hex + i * 8, "%8x", &w) != 1)
			return;
		for (j = 0; j < 4; j++)
			a[i * 4 + j] = ((unsigned char *)&w)[j];
	}
	if (!inet_ntop(n == 8 ? AF_INET : AF_INET6, a, ip, sizeof(ip)))
		return;
	snprintf(out, len, n == 8 ? "%s:%u" : "[%s]:%u", ip, port);
}

/*
 * The addresses of a live process's connections: the inode of each
 * descriptor (/proc/PID/fd/FD is "socket:[INODE]"), looked up in the
 * process's own network namespace (/proc/PID/net/tcp, tcp6).  Needs the
 * rights to look at the process; without them the addresses stay empty.
 */
static void conn_addrs(struct proc *p)
{
	static const char *const files[] = { "tcp", "tcp6" };
	unsigned long *ino, in;
	char path[64], buf[512], loc[80], rem[80];
	unsigned int i, f;
	ssize_t n;
	FILE *fp;

	if (!p->nconns || p->state != P_LIVE)
		return;
	ino = calloc(p->nconns, sizeof(*ino));
	if (!ino)
		return;
	for (i = 0; i < p->nconns; i++) {
		snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)p->pid,
			 p->conns[i].fd);
		n = readlink(path, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = 0;
			sscanf(buf, "socket:[%lu]", &ino[i]);
		}
	}
	for (f = 0; f < 2; f++) {
		snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)p->pid,
			 files[f]);
		fp = fopen(path, "re");
		if (!fp)
			continue;
		while (fgets(buf, sizeof(buf), fp)) {
			/* sl local rem st txq:rxq tr:when retr uid timeout inode */
			if (sscanf(buf, "%*s %79s %79s %*s %*s %*s %*s %*s %*s %lu",
				   loc, rem, &in) != 3 || !in)
				continue;
			for (i = 0; i < p->nconns; i++)
				if (ino[i] == in) {
					tcp_addr(loc, p->conns[i].local,
						 sizeof(p->conns[i].local));
					tcp_addr(rem, p->conns[i].remote,
						 sizeof(p->conns[i].remote));
				}
		}
		fclose(fp);
	}
	free(ino);
}

/*
 * Reads one region.  Returns 0, or 1 to skip it quietly (still being
 * made, or of another layout version: *why says which), or -errno.
 */
static int proc_read(const char *path, pid_t pid, struct proc *p,
		     const char **why)
{
	const struct rsx_shm_hdr *h;
	const char *names;
	struct stat st;
	unsigned int i;
	uint32_t state;
	void *map;
	int fd, ret = 0;

	*why = NULL;
	fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode) || st.st_size < RSX_SHM_HDR_SIZE ||
	    st.st_size > RSX_SHM_MAX_SIZE) {
		close(fd);
		*why = "not a statistics region";
		return 1;
	}
	map = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return -errno;
	h = map;
	if (memcmp(h->magic, RSX_SHM_MAGIC, sizeof(h->magic))) {
		/* not filled in yet, or a future layout */
		*why = memcmp(h->magic, RSX_SHM_MAGIC, 7) ?
		       "being made" : "another layout version";
		ret = 1;
		goto out;
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (h->version != RSX_SHM_VERSION || h->pid != pid ||
	    h->size > st.st_size || h->name_len != RSX_SHM_NAME_LEN ||
	    h->ncounters > MAX_COUNTERS || h->names_off < RSX_SHM_HDR_SIZE ||
	    h->counters_off % 8 ||
	    (uint64_t)h->names_off + (uint64_t)h->ncounters * h->name_len >
	    h->size ||
	    (uint64_t)h->counters_off + (uint64_t)h->ncounters * 8 > h->size) {
		*why = "inconsistent header";
		ret = 1;
		goto out;
	}
	memset(p, 0, sizeof(*p));
	p->pid = h->pid;
	p->uid = h->uid;
	memcpy(p->comm, h->comm, sizeof(p->comm) - 1);
	snprintf(p->path, sizeof(p->path), "%s", path);
	p->start_ns = h->start_ns;
	p->n = h->ncounters;
	p->names = calloc(p->n ? p->n : 1, sizeof(*p->names));
	p->val = calloc(p->n ? p->n : 1, sizeof(*p->val));
	if (!p->names || !p->val) {
		proc_free(p);
		ret = -ENOMEM;
		goto out;
	}
	names = (const char *)map + h->names_off;
	for (i = 0; i < p->n; i++) {
		memcpy(p->names[i], names + i * h->name_len,
		       RSX_SHM_NAME_LEN - 1);
		p->val[i] = __atomic_load_n((const uint64_t *)
					    ((const char *)map +
					     h->counters_off) + i,
					    __ATOMIC_RELAXED);
	}
	ret = read_conns(map, h, p);
	if (ret) {
		proc_free(p);
		goto out;
	}
	state = __atomic_load_n(&h->state, __ATOMIC_ACQUIRE);
	p->end_ns = __atomic_load_n(&h->end_ns, __ATOMIC_RELAXED);
	p->gone = proc_gone(h);
	p->state = proc_state(state, p->gone);
out:
	munmap(map, st.st_size);
	return ret;
}

static uint64_t proc_get(const struct proc *p, const char *name)
{
	unsigned int i;

	for (i = 0; i < p->n; i++)
		if (!strcmp(p->names[i], name))
			return p->val[i];
	return 0;
}

static uint64_t proc_sum_prefix(const struct proc *p, const char *prefix)
{
	size_t len = strlen(prefix);
	uint64_t sum = 0;
	unsigned int i;

	for (i = 0; i < p->n; i++)
		if (!strncmp(p->names[i], prefix, len))
			sum += p->val[i];
	return sum;
}

static int selected(pid_t pid)
{
	int i;

	if (!opt.npids)
		return 1;
	for (i = 0; i < opt.npids; i++)
		if (opt.pids[i] == pid)
			return 1;
	return 0;
}

static int pid_of_name(const char *name, pid_t *pid)
{
	const char *d = name + strlen(RSX_SHM_PREFIX);
	char *end;
	long v;

	if (strncmp(name, RSX_SHM_PREFIX, strlen(RSX_SHM_PREFIX)) ||
	    *d < '1' || *d > '9')
		return 0;
	errno = 0;
	v = strtol(d, &end, 10);
	if (errno || *end || v <= 0 || v > INT_MAX)
		return 0;
	*pid = v;
	return 1;
}

static int cmp_proc(const void *a, const void *b)
{
	const struct proc *x = a, *y = b;

	return (x->pid > y->pid) - (x->pid < y->pid);
}

struct scan {
	struct proc *v;
	size_t n, cap;
	int unreadable;		/* regions we may not read */
	pid_t found[MAX_PIDS];	/* -p pids seen, readable or not */
	int nfound;
	int err[MAX_PIDS];	/* why a -p pid could not be read */
};

static void scan_free(struct scan *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		proc_free(&s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

static int scan(struct scan *s)
{
	char path[PATH_MAX];
	const char *why;
	struct dirent *de;
	struct proc p;
	pid_t pid;
	DIR *d;
	int ret;

	memset(s, 0, sizeof(*s));
	d = opendir(opt.dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (!pid_of_name(de->d_name, &pid) || !selected(pid))
			continue;
		snprintf(path, sizeof(path), "%s/%s", opt.dir, de->d_name);
		ret = proc_read(path, pid, &p, &why);
		if (opt.npids && s->nfound < MAX_PIDS) {
			s->err[s->nfound] = ret < 0 ? -ret : 0;
			s->found[s->nfound++] = pid;
		}
		if (ret == -EACCES || ret == -EPERM) {
			s->unreadable++;
			continue;
		}
		if (ret == 1 && (opt.clean_only || !opt.keep) &&
		    kill(pid, 0) && errno == ESRCH) {
			/* never finished, or unreadable to us, and its
			 * writer is gone: nothing to show */
			if (!unlink(path) && opt.clean_only)
				printf("removed %s (pid %d, %s)\n", path,
				       (int)pid, why);
			continue;
		}
		if (ret) {
			if (ret < 0 || opt.npids)
				fprintf(stderr, "%s: %s: %s\n", prog, path,
					ret < 0 ? strerror(-ret) : why);
			continue;
		}
		if (opt.conns || opt.json)
			conn_addrs(&p);
		if (s->n == s->cap) {
			size_t cap = s->cap ? s->cap * 2 : 16;
			struct proc *v = realloc(s->v, cap * sizeof(*v));

			if (!v) {
				proc_free(&p);
				closedir(d);
				return -ENOMEM;
			}
			s->v = v;
			s->cap = cap;
		}
		s->v[s->n++] = p;
	}
	closedir(d);
	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), cmp_proc);
	return 0;
}

/* Removes the regions of processes that are gone; returns how many. */
static int clean(const struct scan *s, int verbose)
{
	size_t i;
	int n = 0;

	for (i = 0; i < s->n; i++) {
		const struct proc *p = &s->v[i];

		if (!p->gone)
			continue;
		if (unlink(p->path)) {
			if (errno != ENOENT)
				fprintf(stderr, "%s: cannot remove %s: %s\n",
					prog, p->path, strerror(errno));
			continue;
		}
		n++;
		if (verbose)
			printf("removed %s (pid %d, %s, %s)\n", p->path,
			       (int)p->pid, p->comm, pstate_name[p->state]);
	}
	return n;
}

static void json_str(const char *s)
{
	const unsigned char *c;

	putchar('"');
	for (c = (const unsigned char *)s; *c; c++) {
		if (*c == '"' || *c == '\\')
			printf("\\%c", *c);
		else if (*c < 0x20 || *c >= 0x7f)
			printf("\\u%04x", *c);	/* comm is not always UTF-8 */
		else
			putchar(*c);
	}
	putchar('"');
}

static void json_time(uint64_t ns)
{
	if (ns)
		printf("%" PRIu64 ".%03" PRIu64, ns / 1000000000,
		       ns / 1000000 % 1000);
	else
		printf("null");
}

static void report_json(const struct scan *s)
{
	struct timespec now;
	unsigned int j;
	size_t i;

	clock_gettime(CLOCK_REALTIME, &now);
	printf("{\"version\":%d,\"time\":", RSX_SHM_VERSION);
	json_time((uint64_t)now.tv_sec * 1000000000ull + now.tv_nsec);
	printf(",\"processes\":[");
	for (i = 0; i < s->n; i++) {
		const struct proc *p = &s->v[i];

		printf("%s{\"pid\":%d,\"program\":", i ? "," : "",
		       (int)p->pid);
		json_str(p->comm);
		printf(",\"uid\":%u,\"state\":\"%s\",\"start\":",
		       (unsigned int)p->uid, pstate_name[p->state]);
		json_time(p->start_ns);
		printf(",\"end\":");
		json_time(p->end_ns);
		printf(",\"counters\":{");
		for (j = 0; j < p->n; j++) {
			if (j)
				putchar(',');
			json_str(p->names[j]);
			printf(":%" PRIu64, p->val[j]);
		}
		printf("},\"connections\":[");
		for (j = 0; j < p->nconns; j++) {
			const struct conn *c = &p->conns[j];

			printf("%s{\"fd\":%d,\"role\":\"%s\",\"state\":\"%s\","
			       "\"opened\":", j ? "," : "", c->fd, conn_role(c),
			       conn_state(c));
			json_time(c->opened_ns);
			printf(",\"since\":");
			json_time(c->since_ns);
			printf(",\"local\":");
			if (c->local[0])
				json_str(c->local);
			else
				printf("null");
			printf(",\"remote\":");
			if (c->remote[0])
				json_str(c->remote);
			else
				printf("null");
			putchar('}');
		}
		printf("],\"connections_unlisted\":%u}", p->conns_full);
	}
	printf("]}\n");
}

static void print_conns(const struct proc *p)
{
	struct timespec now;
	uint64_t ns;
	unsigned int j;

	clock_gettime(CLOCK_REALTIME, &now);
	ns = (uint64_t)now.tv_sec * 1000000000ull + now.tv_nsec;
	for (j = 0; j < p->nconns; j++) {
		const struct conn *c = &p->conns[j];

		printf("%7s fd %-5d %-7s %-12s %21s %-3s %-21s %8.1fs\n", "",
		       c->fd, conn_role(c), conn_state(c),
		       c->local[0] ? c->local : "-",
		       c->role == 3 ? "<-" : "->",
		       c->remote[0] ? c->remote : "-",
		       ns > c->since_ns ? (ns - c->since_ns) / 1e9 : 0.0);
	}
	if (p->conns_full)
		printf("%7s (%u more connections not listed: table full)\n",
		       "", p->conns_full);
}

static void report_table(const struct scan *s)
{
	unsigned int j;
	size_t i;

	printf("%7s %-15s %-6s %6s %8s %8s %12s %12s %12s %12s\n", "PID",
	       "PROGRAM", "STATE", "CONNS", "UPGRADED", "FALLBACK", "RDMA-TX",
	       "RDMA-RX", "TCP-TX", "TCP-RX");
	for (i = 0; i < s->n; i++) {
		const struct proc *p = &s->v[i];

		printf("%7d %-15s %-6s %6" PRIu64 " %8" PRIu64 " %8" PRIu64
		       " %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %12" PRIu64
		       "\n", (int)p->pid, p->comm, pstate_name[p->state],
		       proc_get(p, "tcp_accepted") +
		       proc_get(p, "tcp_connected"),
		       proc_get(p, "upgraded"),
		       proc_sum_prefix(p, "fallback_"),
		       proc_get(p, "rdma_tx_bytes"),
		       proc_get(p, "rdma_rx_bytes"),
		       proc_get(p, "tcp_tx_bytes"),
		       proc_get(p, "tcp_rx_bytes"));
		if (opt.conns)
			print_conns(p);
		if (!opt.detail)
			continue;
		for (j = 0; j < p->n; j++)
			if (opt.all || p->val[j])
				printf("%7s %-28s %" PRIu64 "\n", "",
				       p->names[j], p->val[j]);
	}
}

static int report(int round)
{
	struct scan s;
	int i, ret, missing = 0;

	ret = scan(&s);
	if (ret == -ENOENT)
		die(1, "%s does not exist: no process can publish statistics "
		    "here", opt.dir);
	if (ret)
		die(1, "cannot read %s: %s", opt.dir, strerror(-ret));
	if (opt.clean_only) {
		ret = clean(&s, 1);
		if (s.unreadable)
			fprintf(stderr, "%s: %d regions of other users not "
				"readable, left alone\n", prog, s.unreadable);
		scan_free(&s);
		return 0;
	}
	if (round && !opt.json)
		putchar('\n');
	if (opt.json)
		report_json(&s);
	else
		report_table(&s);
	fflush(stdout);
	for (i = 0; i < opt.npids; i++) {
		int j, seen = 0;

		for (j = 0; j < s.nfound; j++)
			if (s.found[j] == opt.pids[i]) {
				seen = 1;
				if (s.err[j])
					fprintf(stderr, "%s: pid %d: %s\n",
						prog, (int)opt.pids[i],
						strerror(s.err[j]));
			}
		if (!seen) {
			if (!round)
				fprintf(stderr, "%s: pid %d publishes no "
					"statistics (not under rsockx, no TCP "
					"socket yet, or RSOCKX_STATS_SHM=0)\n",
					prog, (int)opt.pids[i]);
			missing++;
		}
	}
	if (!round && s.unreadable)
		fprintf(stderr, "%s: %d regions of other users not readable "
			"(run as root to see them)\n", prog, s.unreadable);
	if (!opt.keep)
		clean(&s, 0);
	scan_free(&s);
	return missing;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "pid", required_argument, NULL, 'p' },
		{ "counters", no_argument, NULL, 'd' },
		{ "all", no_argument, NULL, 'a' },
		{ "connections", no_argument, NULL, 'C' },
		{ "json", no_argument, NULL, 'j' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'c' },
		{ "keep", no_argument, NULL, 'k' },
		{ "clean", no_argument, NULL, 1 },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct timespec ts;
	char *end;
	long round;
	int c, missing = 0;

	while ((c = getopt_long(argc, argv, "p:dCajki:c:hV", lopts,
				NULL)) != -1) {
		switch (c) {
		case 'p':
			if (opt.npids == MAX_PIDS)
				die(2, "at most %d --pid options", MAX_PIDS);
			opt.pids[opt.npids++] = parse_long(optarg, "--pid", 1,
							   INT_MAX);
			break;
		case 'd':
			opt.detail = 1;
			break;
		case 'a':
			opt.all = opt.detail = 1;
			break;
		case 'j':
			opt.json = 1;
			break;
		case 'i':
			errno = 0;
			opt.interval = strtod(optarg, &end);
			if (errno || end == optarg || *end ||
			    !(opt.interval > 0 && opt.interval <= 86400))
				die(2, "--interval: want seconds above 0, not "
				    "\"%s\"", optarg);
			break;
		case 'c':
			opt.count = parse_long(optarg, "--count", 1, LONG_MAX);
			break;
		case 'k':
			opt.keep = 1;
			break;
		case 'C':
			opt.conns = 1;
			break;
		case 1:
			opt.clean_only = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("rsockx-stat %s (region layout %d)\n",
			       PACKAGE_VERSION, RSX_SHM_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc)
		die(2, "unexpected argument \"%s\" (see --help)", argv[optind]);
	if (opt.clean_only && (opt.keep || opt.json || opt.detail ||
			       opt.conns || opt.interval > 0))
		die(2, "--clean takes no other option but --pid");
	if (opt.count > 0 && !(opt.interval > 0))
		die(2, "--count needs --interval");
	if (opt.interval <= 0)
		opt.count = 1;

	for (round = 0; opt.count < 0 || round < opt.count; round++) {
		if (round) {
			ts.tv_sec = (time_t)opt.interval;
			ts.tv_nsec = (long)((opt.interval - ts.tv_sec) * 1e9);
			while (nanosleep(&ts, &ts) && errno == EINTR)
				;
		}
		missing = report(round);
	}
	return missing ? 1 : 0;
}
