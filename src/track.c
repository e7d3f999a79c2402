// SPDX-License-Identifier: MIT
/*
 * Which descriptors are TCP sockets, and which descriptors share one socket.
 *
 * Only sockets rsockx may one day upgrade are tracked: AF_INET/AF_INET6
 * stream sockets with protocol 0 or IPPROTO_TCP (not MPTCP), created by
 * socket() or accepted from a tracked listener.  Every other descriptor a
 * wrapper sees being created clears its slot, because the number may have
 * belonged to a tracked socket that was closed behind our back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <netinet/in.h>

#include "clock.h"
#include "compiler.h"
#include "config.h"
#include "dev.h"
#include "oob.h"
#include "probe.h"
#include "fdtab.h"
#include "guard.h"
#include "init.h"
#include "libc.h"
#include "linger.h"
#include "local.h"
#include "log.h"
#include "stats.h"
#include "ready.h"
#include "sig.h"
#include "track.h"
#include "upgrade.h"

static int rsx_tracking(void)
{
	if (rsx_init_once())
		return 0;
	if (rsx_config.disabled)
		return 0;
	if (rsx_fdtab_ready())
		return 0;
	rsx_stats_publish();	/* the first TCP socket: make the region */
	return 1;
}

static struct rsx_sock *rsx_track_new(int fd, int family, int role,
				      int nonblock)
{
	struct rsx_sock *s;

	if (!rsx_tracking()) {
		rsx_fd_clear(fd);
		return NULL;
	}
	s = rsx_sock_new(RSX_SOCK_TCP, family, role);
	if (!s) {
		rsx_stat_inc(RSX_STAT_untracked_full);
		rsx_fd_clear(fd);
		return NULL;
	}
	atomic_store(&s->nonblock, !!nonblock);
	if (rsx_fd_install(fd, s))
		return NULL;
	return s;
}

void rsx_on_socket(int fd, int domain, int type, int protocol)
{
	if ((domain == AF_INET || domain == AF_INET6) &&
	    (type & 0xf) == SOCK_STREAM &&
	    (protocol == 0 || protocol == IPPROTO_TCP)) {
		rsx_stat_inc(RSX_STAT_tcp_sockets);
		rsx_track_new(fd, domain, RSX_ROLE_NONE,
			      type & SOCK_NONBLOCK);
		return;
	}
	rsx_fd_clear(fd);
}

void rsx_on_untracked(int fd)
{
	rsx_fd_clear(fd);
}

/*
 * An accepted connection may start with a client's HELLO: the engine looks
 * at its first bytes (and takes a HELLO out) before the application does.
 */
void rsx_on_accept(int lfd, int fd, int flags)
{
	struct rsx_sock *l = rsx_fd_peek(lfd), *s;

	if (!l || l->kind != RSX_SOCK_TCP) {
		rsx_fd_clear(fd);
		return;
	}
	rsx_stat_inc(RSX_STAT_tcp_accepted);
	s = rsx_track_new(fd, l->family, RSX_ROLE_ACCEPTED,
			  flags & SOCK_NONBLOCK);
	if (!s)
		return;
	rsx_stats_conn_open(s, fd, s->family, RSX_ROLE_ACCEPTED, s->state);
	rsx_sock_accepted(s);
	rsx_oob_accepted(s, fd, l);
}

/* Before the program's accept(): an heir's look (probe.h). */
void rsx_on_accept_prepare(int lfd)
{
	struct rsx_sock *l = rsx_fd_peek(lfd);

	if (l && !rsx_guarded())
		rsx_probe_heir_look(l, lfd);
}

void rsx_on_setfl(int fd, int flags)
{
	struct rsx_sock *s = rsx_fd_peek(fd);

	if (s && s->kind == RSX_SOCK_TCP)
		atomic_store(&s->nonblock, !!(flags & O_NONBLOCK));
}

void rsx_on_fionbio(int fd, int on)
{
	struct rsx_sock *s = rsx_fd_peek(fd);

	if (s && s->kind == RSX_SOCK_TCP)
		atomic_store(&s->nonblock, !!on);
}

/*
 * A listener answers probes for its port, unless a rule says its
 * connections stay TCP (then clients should not even try).
 */
void rsx_on_listen(int fd)
{
	struct rsx_sock *s = rsx_fd_peek(fd);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!s || s->kind != RSX_SOCK_TCP)
		return;
	atomic_store(&s->role, RSX_ROLE_LISTENER);
	rsx_stat_inc(RSX_STAT_tcp_listening);
	if (!rsx_config.valid ||
	    rsx_libc.getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    rsx_rules_match(&rsx_config.rules, RSX_DIR_ACCEPT,
			    (struct sockaddr *)&ss, len, RSX_ACT_PROBE,
			    NULL) == RSX_ACT_TCP)
		return;
	rsx_probe_listen(s, fd);
	rsx_local_listen(s, fd);
}

/*
 * Before the real connect(): which action do the rules give this
 * destination?  For rdma, the RDMA libraries and devices are made ready
 * now, while the handshake is under way, so that the HELLO leaves as soon
 * as the connection is up.
 */
void rsx_on_connect_prepare(int fd, const struct sockaddr *sa, socklen_t len)
{
	struct rsx_sock *s = rsx_fd_peek(fd);
	const struct rsx_rule *r;
	int answer;

	if (!s || s->kind != RSX_SOCK_TCP || !sa || !rsx_config.valid)
		return;
	s->action = rsx_rules_match(&rsx_config.rules, RSX_DIR_CONNECT, sa,
				    len, rsx_config.default_action, &r);
	rsx_dbg("fd %d connect: action %d (%s %u)", fd, s->action,
		r ? "rule at line" : "default", r ? r->line : 0);
	if (s->action == RSX_ACT_TCP)
		return;
	/*
	 * A server on this host: asked on its Unix socket at once, for
	 * shared memory (local.h); no probe, no RDMA device.
	 */
	if (rsx_config.local && rsx_config.oob && rsx_local_dst(sa, len)) {
		s->inband_try = 0;
		s->local = 1;
		s->action = RSX_ACT_OOB;
		if (rsx_oob_addr(sa, s->peer_addr, &s->peer_port) ||
		    !rsx_cm_running())
			s->action = RSX_ACT_TCP;
		return;
	}
	/*
	 * A HELLO goes into the stream only to a server known to run rsockx
	 * (the probe's answer).  Without an answer yet, the connection starts
	 * on TCP and moves out of band once the answer comes (oob.h); where
	 * the rules say rdma, its first send waits for the answer,
	 * and a HELLO still leads the stream when it is yes.
	 */
	answer = rsx_probe_lookup(sa, len);
	s->inband_try = s->action == RSX_ACT_RDMA && rsx_config.inband;
	if (answer == RSX_PROBE_NO) {
		s->action = RSX_ACT_TCP;
		/* no RDMA CM device at all: nothing could have answered */
		rsx_stat_inc(rsx_cm_start() == -ENODEV ? RSX_STAT_fallback_nodev :
			     RSX_STAT_fallback_probe);
		return;
	}
	if (answer == RSX_PROBE_YES && (rsx_config.inband || !rsx_config.oob))
		s->action = RSX_ACT_RDMA;
	else if (rsx_config.oob)
		s->action = RSX_ACT_OOB;
	else {
		s->action = RSX_ACT_TCP;
		rsx_stat_inc(RSX_STAT_fallback_probe);
		return;
	}
	if (rsx_oob_addr(sa, s->peer_addr, &s->peer_port)) {
		s->action = RSX_ACT_TCP;
		return;
	}
	if (s->action == RSX_ACT_RDMA)
		rsx_dev_prepare();
}

void rsx_on_connect(int fd, const struct sockaddr *sa, socklen_t len,
		    int connected)
{
	struct rsx_sock *s = rsx_fd_peek(fd);

	if (!s || s->kind != RSX_SOCK_TCP)
		return;
	atomic_store(&s->role, RSX_ROLE_CONNECTOR);
	rsx_stat_inc(RSX_STAT_tcp_connected);
	rsx_stats_conn_open(s, fd, s->family, RSX_ROLE_CONNECTOR, s->state);
	rsx_sock_connected(s, fd, s->action, connected);
}

/*
 * getsockopt(SO_ERROR) said 0: a non-blocking connect() may have completed.
 * If it has (the socket has a peer), the HELLO goes now, as after a
 * blocking connect(): a client that only reads would otherwise send it with
 * its first read, after the server spoke first, too late for the upgrade.
 */
void rsx_on_connect_done(int fd)
{
	struct rsx_sock *s = rsx_fd_peek(fd);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (!s || s->kind != RSX_SOCK_TCP || s->state != RSX_ST_CLIENT_NEW ||
	    rsx_libc.getpeername(fd, (struct sockaddr *)&ss, &len))
		return;
	rsx_sock_connected(s, fd, s->action, 1);
}

/* dup(), fcntl(F_DUPFD*): newfd was free, so its slot can only be stale. */
void rsx_on_dup(int oldfd, int newfd)
{
	struct rsx_sock *s = rsx_fd_get(oldfd);

	if (!s) {
		rsx_fd_clear(newfd);
		return;
	}
	rsx_fd_install(newfd, s);
}

/*
 * The last descriptor of an upgraded socket goes: deliver what was sent;
 * of one that waits to move out of band: it stays TCP (rsx_oob_forgo).
 * Other references are other descriptors, or calls of other threads under
 * way, which go on with a duplicate of their own (rsx_sock_orphan()).
 */
static void rsx_close_flush(struct rsx_sock *s, int fd)
{
	if (s && s->kind == RSX_SOCK_TCP && s->nepreg)
		rsx_ready_forget_fd(s, fd);
	if (!s || (!s->conn && !rsx_state_counted(s->state)))
		return;
	if (atomic_load(&s->ref) == 1)
		rsx_sock_close_last(s, fd);
	else
		rsx_sock_orphan(s, fd);
}

/*
 * close(): returns 1 when fd is one of rsockx's own descriptors, which the
 * program cannot have opened; the wrapper then reports success without
 * closing it.  Otherwise the slot is emptied before the real close, and the
 * reference is dropped after it.
 */
int rsx_close_begin(int fd, struct rsx_sock **old)
{
	struct rsx_sock *s = rsx_fd_peek(fd);

	*old = NULL;
	if (likely(!s))
		return 0;
	if (s->kind == RSX_SOCK_PRIVATE) {
		rsx_stat_inc(RSX_STAT_private_close_refused);
		return 1;
	}
	*old = rsx_fd_take(fd);
	rsx_close_flush(*old, fd);
	return 0;
}

void rsx_close_end(struct rsx_sock *old)
{
	if (!old)
		return;
	rsx_stat_inc(RSX_STAT_closed);
	rsx_sock_put(old);
}

static void rsx_forget_range(unsigned int first, unsigned int last)
{
	unsigned int hw = rsx_fdtab_hiwater(), fd;
	struct rsx_sock *s;

	if (last >= hw)
		last = hw ? hw - 1 : 0;
	for (fd = first; fd <= last && fd < hw; fd++) {
		if (rsx_fd_is_private(fd))
			continue;
		s = rsx_fd_take(fd);
		rsx_close_flush(s, fd);
		rsx_close_end(s);
	}
}

/*
 * close_range() and closefrom() must not close our private descriptors: the
 * range is closed in pieces around them.
 */
int rsx_close_range(unsigned int first, unsigned int last, int flags)
{
	unsigned int lo = first;
	int p, ret = 0;

	if (first > last)
		return -EINVAL;
	if (!(flags & CLOSE_RANGE_CLOEXEC))
		rsx_forget_range(first, last);
	for (;;) {
		p = rsx_fd_private_next(lo);
		if (p < 0 || (unsigned int)p > last) {
			ret = rsx_libc.close_range(lo, last, flags);
			break;
		}
		if ((unsigned int)p > lo) {
			ret = rsx_libc.close_range(lo, p - 1, flags);
			if (ret)
				break;
		}
		if ((unsigned int)p == last)
			break;
		lo = p + 1;
	}
	return ret ? -errno : 0;
}

int rsx_closefrom(int lowfd)
{
	if (lowfd < 0)
		lowfd = 0;
	return rsx_close_range(lowfd, ~0u, 0);
}

/* dup2()/dup3() onto newfd: forget newfd first, as close() does. */
int rsx_dup2_begin(int newfd, struct rsx_sock **prev)
{
	int ret;

	*prev = NULL;
	if (rsx_fd_is_private(newfd)) {
		ret = rsx_fd_private_relocate(newfd);
		if (ret)
			return ret;
	}
	*prev = rsx_fd_take(newfd);
	rsx_close_flush(*prev, newfd);
	return 0;
}

void rsx_dup2_end(int oldfd, int newfd, int ok, struct rsx_sock *prev)
{
	if (!ok) {
		rsx_fd_restore(newfd, prev);
		return;
	}
	rsx_close_end(prev);
	rsx_on_dup(oldfd, newfd);
}

/*
 * Around the real fork(): prepare right before it, then parent (also when
 * it failed) or child.
 */
void rsx_on_fork_prepare(void)
{
	/* a daemon's master, about to fork its workers (probe.h) */
	if (rsx_probe_heirs_open())
		rsx_probe_adopt_all(RSX_ADOPT_FORK);
	rsx_fork_share_sockets();	/* may start the CM thread */
	if (unlikely(rsx_config.test_fork_gap_ms))
		usleep(rsx_config.test_fork_gap_ms * 1000);
	rsx_stats_fork_prepare();
	rsx_probe_fork_prepare();
	rsx_sig_fork_prepare();
}

void rsx_on_fork_parent(int failed)
{
	rsx_sig_fork_done();
	if (!failed)	/* the child shares the epoll sets */
		rsx_ready_forked();
	rsx_fork_parent_sockets(failed);	/* before the CM thread goes on */
	rsx_probe_fork_parent();
}

/* The child of fork() has copies of all descriptors and of our table. */
void rsx_on_fork_child(void)
{
	rsx_stats_fork_child();	/* first: the counters mapped are the parent's */
	rsx_sig_fork_done();
	rsx_stat_inc(RSX_STAT_forks);
	rsx_fork_child_sockets();
	rsx_dev_fork_child();
}

/*
 * daemon(3)'s child: its parent exits right after the fork; a listener it
 * answered for is this process's to answer for, as soon as it is gone.
 */
void rsx_on_daemon_child(void)
{
	rsx_on_fork_child();
	if (rsx_probe_heirs_open())
		rsx_probe_adopt_all(RSX_ADOPT_WATCH);
}

void rsx_on_exec(void)
{
	rsx_stat_inc(RSX_STAT_execs);
}

/*
 * Across execve() our state is gone, the descriptors are not.  A socket
 * whose first bytes nobody has looked at yet (accepted, then fork and exec
 * of the service: the inetd pattern) may still receive a client's HELLO,
 * which the new program must never see.  Such sockets are named to the new
 * program's rsockx in RSOCKX_INHERIT=fd,fd,...; it takes a HELLO out and
 * keeps the connection on TCP (rsx_adopt_inherited()).
 *
 * Returns a copy of envp with that variable set (or removed when there is
 * nothing to hand over), or NULL to leave envp alone.  Runs only on the
 * way to execve(), which does not come back on success.
 *
 * When this process itself becomes the new program (self), its upgraded
 * connections that the program inherits go back to TCP first
 * (rsx_sock_exec_downgrade()).  A spawned child's do not: the parent keeps
 * them.
 */
#define RSX_INHERIT "RSOCKX_INHERIT="
#define RSX_INHERIT_MAX 64

/* The next tracked socket from *fd on that a new program would inherit. */
static struct rsx_sock *rsx_next_inherited(unsigned int *fd)
{
	unsigned int hw = rsx_fdtab_hiwater();
	struct rsx_sock *s;
	int flags;

	for (; *fd < hw; ++*fd) {
		s = rsx_fd_peek(*fd);
		if (!s || s->kind != RSX_SOCK_TCP)
			continue;
		flags = rsx_libc.fcntl(*fd, F_GETFD);
		if (flags >= 0 && !(flags & FD_CLOEXEC))
			return s;
	}
	return NULL;
}

/*
 * vfork(): its child shares our memory and runs nothing of ours, and it
 * almost always executes a program, which inherits what is not close-on-
 * exec.  Those of our upgraded sockets go back to TCP first, as for
 * posix_spawn().  (A socket whose close-on-exec the child clears itself
 * is not seen: it stays the parent's.)
 */
void rsx_on_vfork(void)
{
	unsigned int fd = 0;
	struct rsx_sock *s;

	if (!atomic_load_explicit(&rsx_engine_socks, memory_order_relaxed))
		return;
	while ((s = rsx_next_inherited(&fd)))
		rsx_sock_exec_inherit(s, fd++, 0);
}

char **rsx_exec_env(char *const envp[], int self)
{
	char list[sizeof(RSX_INHERIT) + RSX_INHERIT_MAX * 11];
	size_t len = strlen(RSX_INHERIT), n = 0, i, j = 0;
	int found = 0, had = 0;
	unsigned int fd = 0;
	struct rsx_sock *s;
	char **env;

	memcpy(list, RSX_INHERIT, len + 1);
	for (; found < RSX_INHERIT_MAX && (s = rsx_next_inherited(&fd)); fd++) {
		if (rsx_sock_exec_inherit(s, fd, self))
			continue;
		if (s->state != RSX_ST_SERVER_NEW &&
		    s->state != RSX_ST_SERVER_STRIP &&
		    atomic_load(&s->role) != RSX_ROLE_LISTENER)
			continue;
		len += snprintf(list + len, sizeof(list) - len, "%s%u",
				found ? "," : "", fd);
		found++;
	}
	if (self) {
		/* closes still ending in the background end first */
		rsx_linger_exit(rsx_now_ms() + rsx_config.linger_ms);
		rsx_exec_stats();
	}
	if (unlikely(rsx_config.test_exec_gap_ms))
		usleep(rsx_config.test_exec_gap_ms * 1000);
	for (n = 0; envp && envp[n]; n++)
		had |= !strncmp(envp[n], RSX_INHERIT, strlen(RSX_INHERIT));
	if (!found && !had)
		return NULL;
	env = malloc((n + 2) * sizeof(*env) + (found ? len + 1 : 0));
	if (!env)
		return NULL;
	for (i = 0; i < n; i++)
		if (strncmp(envp[i], RSX_INHERIT, strlen(RSX_INHERIT)))
			env[j++] = envp[i];
	if (found) {
		env[j] = (char *)(env + n + 2);
		memcpy(env[j++], list, len + 1);
		rsx_stat_add(RSX_STAT_exec_handed, found);
	}
	env[j] = NULL;
	return env;
}

/* The socket fd really is a TCP socket: its inode, or 0. */
static unsigned long rsx_tcp_ino(int fd)
{
	int type = 0, dom = 0, proto = 0;
	socklen_t len = sizeof(int);
	struct stat st;

	if (rsx_libc.getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) ||
	    rsx_libc.getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &len) ||
	    rsx_libc.getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len) ||
	    type != SOCK_STREAM || (dom != AF_INET && dom != AF_INET6) ||
	    proto != IPPROTO_TCP || rsx_libc.fstat(fd, &st))
		return 0;
	return st.st_ino;
}

/*
 * fd, inherited across exec, is a TCP socket: when it listens, it becomes
 * a tracked listener whose port is answered for from the program's first
 * look at it (rsx_probe_inherit), unless the rules keep it TCP.  1 when fd
 * listens.
 */
static int rsx_adopt_listener(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct rsx_sock *s;
	int on = 0;

	if (rsx_libc.getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &len) ||
	    !on)
		return 0;
	len = sizeof(ss);
	if (!rsx_config.valid ||
	    rsx_libc.getsockname(fd, (struct sockaddr *)&ss, &len) ||
	    rsx_rules_match(&rsx_config.rules, RSX_DIR_ACCEPT,
			    (struct sockaddr *)&ss, len, RSX_ACT_PROBE,
			    NULL) == RSX_ACT_TCP)
		return 1;
	s = rsx_sock_new(RSX_SOCK_TCP, ss.ss_family, RSX_ROLE_LISTENER);
	if (!s)
		return 1;
	rsx_fd_install(fd, s);
	rsx_probe_inherit(s);
	rsx_stat_inc(RSX_STAT_tcp_listening);
	rsx_stats_publish();
	rsx_dbg("fd %d: an inherited listener", fd);
	return 1;
}

/*
 * A service manager's listeners (systemd's socket activation: LISTEN_FDS
 * descriptors from 3 on, LISTEN_PID ours), once at start.
 */
void rsx_adopt_listen_fds(const char *nfds, const char *pid)
{
	int n, fd;

	if (!nfds || !pid || atoi(pid) != getpid() || rsx_fdtab_ready())
		return;
	n = atoi(nfds);
	for (fd = 3; fd < 3 + n && fd < 3 + RSX_INHERIT_MAX; fd++)
		if (!rsx_fd_peek(fd) && rsx_tcp_ino(fd))
			rsx_adopt_listener(fd);
}

/*
 * Called once at start with RSOCKX_INHERIT: those descriptors become
 * tracked sockets in the "drop a HELLO" state, or tracked listeners;
 * descriptors of one socket (dup2 onto 0 and 1) share one object.
 * Anything that does not check out is ignored.
 */
void rsx_adopt_inherited(const char *list)
{
	unsigned long ino[RSX_INHERIT_MAX];
	int fds[RSX_INHERIT_MAX], n = 0, i, fd;
	struct rsx_sock *s;
	const char *p = list;
	char *end;

	if (rsx_fdtab_ready())
		return;
	while (*p && n < RSX_INHERIT_MAX) {
		fd = strtol(p, &end, 10);
		if (end == p || fd < 0)
			return;
		p = *end == ',' ? end + 1 : end;
		fds[n] = fd;
		ino[n] = rsx_tcp_ino(fd);
		if (!ino[n])
			continue;
		for (i = 0; i < n; i++)
			if (ino[i] == ino[n] && rsx_fd_peek(fds[i]))
				break;
		if (i < n) {
			rsx_on_dup(fds[i], fd);
		} else if (rsx_adopt_listener(fd)) {
			n++;
			continue;
		} else {
			s = rsx_sock_new(RSX_SOCK_TCP, AF_INET,
					 RSX_ROLE_ACCEPTED);
			if (!s)
				return;
			rsx_sock_set_state(s, RSX_ST_SERVER_STRIP);
			rsx_fd_install(fd, s);
		}
		rsx_dbg("fd %d: inherited, its HELLO (if any) is dropped", fd);
		rsx_stats_publish();
		n++;
	}
}
