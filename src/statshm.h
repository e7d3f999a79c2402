/* SPDX-License-Identifier: MIT */
#ifndef RSX_STATSHM_H
#define RSX_STATSHM_H

#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

/*
 * The statistics region: how a process publishes its counters to
 * rsockx-stat.  One file per process, RSX_SHM_DIR/rsockx.<pid>, mode 0600,
 * mapped MAP_SHARED; the process's counters (stats.h) live in it, so an
 * update is the same relaxed atomic add as before.  The file is made the
 * first time the process tracks a TCP socket, never at load.
 *
 *	offset		what
 *	0		struct rsx_shm_hdr (below), RSX_SHM_HDR_SIZE bytes
 *	names_off	ncounters names, name_len bytes each, NUL padded
 *	counters_off	ncounters uint64_t, 8-byte aligned, in name order
 *	conns_off	nconns struct rsx_shm_conn, conn_size bytes each
 *
 * The region describes itself (sizes, offsets, the counter names), so a
 * reader of the same layout version decodes it whatever counters the
 * writer's rsockx had.  The magic is written last: a reader that does not
 * see it skips a region that is still being filled in.  The fields after
 * the magic never change once it is set, except state and end_ns.
 *
 * Life cycle: state LIVE; EXITED at exit() (its destructor) or _exit();
 * EXEC while an exec-family call is under way (back to LIVE if it fails;
 * after a successful exec the new program replaces the file with its own
 * when it first tracks a TCP socket).  A process killed by a signal leaves
 * LIVE behind.  The file stays after exit, for a post-mortem; rsockx-stat
 * removes it once the pid is gone (kill(pid, 0) fails with ESRCH, or the
 * pid now belongs to a process started at another time than start_ticks).
 * A fork child gets a file of its own, starting from a copy of the
 * parent's counters and connections.
 *
 * Connections: one entry per connected or accepted TCP socket that the
 * library tracks, from accept()/connect() to the close of its last
 * descriptor, written only when that happens and when its state changes
 * (never per byte: bytes are counted per process only).  An entry is in
 * use while its fd is >= 0; the fields of an entry being changed may be
 * seen half changed.  Connections beyond nconns are not listed, only
 * counted in conns_full.  The addresses are not stored: a reader finds
 * them from the descriptor (/proc/PID/fd, /proc/PID/net/tcp).
 */
#define RSX_SHM_DIR		"/dev/shm"
#define RSX_SHM_PREFIX		"rsockx."
#define RSX_SHM_MAGIC		"RSXSTAT1"	/* 8 bytes, no NUL */
#define RSX_SHM_VERSION		1
#define RSX_SHM_HDR_SIZE	128
#define RSX_SHM_NAME_LEN	32
#define RSX_SHM_MAX_SIZE	(1u << 20)	/* readers refuse bigger */

#define RSX_SHM_CONNS		128

enum rsx_shm_state {
	RSX_SHM_LIVE = 1,
	RSX_SHM_EXITED = 2,
	RSX_SHM_EXEC = 3,
};

struct rsx_shm_hdr {
	char magic[8];		/* RSX_SHM_MAGIC, written last */
	uint32_t version;	/* RSX_SHM_VERSION */
	uint32_t size;		/* bytes of the whole file */
	uint32_t ncounters;
	uint32_t name_len;	/* RSX_SHM_NAME_LEN */
	uint32_t names_off;
	uint32_t counters_off;
	int32_t pid;
	uint32_t uid;		/* effective uid of the writer */
	_Atomic uint32_t state;	/* enum rsx_shm_state */
	uint32_t reserved0;
	uint64_t start_ticks;	/* /proc/PID/stat field 22 (0: unknown) */
	uint64_t start_ns;	/* CLOCK_REALTIME when the file was made */
	_Atomic uint64_t end_ns; /* CLOCK_REALTIME at exit or exec, or 0 */
	char comm[16];		/* program name, NUL terminated */
	uint32_t conns_off;
	uint32_t nconns;
	uint32_t conn_size;	/* sizeof(struct rsx_shm_conn) */
	_Atomic uint32_t conns_full; /* connections that found no entry */
	uint8_t reserved[128 - 104];
};

/* State of a connection: enum rsx_state of sock.h, by number. */
#define RSX_SHM_CONN_STATES						\
	{ "tcp", "client-new", "client-hello", "server-new",		\
	  "server-strip", "upgraded", "forked", "client-wait",		\
	  "client-oob", "server-wait" }
/* Role: enum rsx_sock_role of sock.h, by number. */
#define RSX_SHM_CONN_ROLES { "none", "listener", "connect", "accept" }

struct rsx_shm_conn {
	_Atomic int32_t fd;	/* the descriptor it got first; -1: free */
	_Atomic uint8_t state;	/* RSX_SHM_CONN_STATES */
	uint8_t role;		/* RSX_SHM_CONN_ROLES */
	uint8_t family;		/* AF_INET or AF_INET6 */
	uint8_t reserved0;
	uint64_t opened_ns;	/* CLOCK_REALTIME of accept()/connect() */
	_Atomic uint64_t since_ns; /* ... of the last change of state */
	uint8_t reserved[40];
};

_Static_assert(sizeof(struct rsx_shm_hdr) == RSX_SHM_HDR_SIZE,
	       "statistics region header layout");
_Static_assert(sizeof(struct rsx_shm_conn) == 64,
	       "statistics region connection entry layout");

/*
 * The start time of a process (field 22 of /proc/PID/stat, in clock ticks)
 * from that file's NUL-terminated text, or 0; *state gets field 3 (Z for a
 * zombie), or 0.  The library stamps its region with it and rsockx-stat
 * compares, so that a reused pid is not taken for the writer.
 */
static inline uint64_t rsx_proc_start_ticks(const char *buf, char *state)
{
	const char *p = strrchr(buf, ')');	/* names may hold ')' */
	uint64_t v = 0;
	int field;

	*state = 0;
	if (!p || !p[1] || !p[2])
		return 0;
	*state = p[2];
	for (p += 2, field = 3; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	while (*p >= '0' && *p <= '9')
		v = v * 10 + (*p++ - '0');
	return v;
}

#endif
