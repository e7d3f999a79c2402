// SPDX-License-Identifier: MIT
/*
 * echo-bench: loopback TCP echo, to measure what librsockx adds to each
 * intercepted call (tools/bench-passthrough.sh drives it).
 *
 * A client writes SIZE bytes and reads them back; a server reads SIZE bytes
 * and writes them back; N round trips over one TCP connection on 127.0.0.1.
 * The data path uses only read() and write(), and every call is counted, so
 * the number of intercepted calls in a run is known exactly (calls=); it is
 * 4 per round trip unless the kernel splits a transfer.
 *
 * By default client and server are two threads of one process: callgrind
 * then sees both sides in one profile (no --trace-children, no second
 * output file) and getrusage(RUSAGE_SELF) covers both.  -f puts the server
 * in a forked child instead.  -1 drives both ends from one thread: on
 * loopback a write() has queued its bytes at the receiver by the time it
 * returns, so no read() sleeps and no context switch or wake-up adds its
 * noise to the CPU time (the calls made are the same).
 *
 * Output, one line:
 *   n=N size=S calls=C user_us=U sys_us=S wall_us=W
 * where the times cover the round trips only, not the set-up.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SIZE	65536

struct side {
	int fd;			/* connected socket */
	unsigned long n;	/* round trips */
	size_t size;		/* bytes per message */
	unsigned long calls;	/* read() + write() calls made */
	int err;		/* errno of the first failure, or -1 on EOF */
};

static int read_full(struct side *s, char *buf)
{
	size_t done = 0;

	while (done < s->size) {
		ssize_t r = read(s->fd, buf + done, s->size - done);

		s->calls++;
		if (r > 0) {
			done += r;
		} else if (r == 0) {
			s->err = -1;
			return -1;
		} else if (errno != EINTR) {
			s->err = errno;
			return -1;
		}
	}
	return 0;
}

static int write_full(struct side *s, const char *buf)
{
	size_t done = 0;

	while (done < s->size) {
		ssize_t r = write(s->fd, buf + done, s->size - done);

		s->calls++;
		if (r >= 0) {
			done += r;
		} else if (errno != EINTR) {
			s->err = errno;
			return -1;
		}
	}
	return 0;
}

static void *server_loop(void *arg)
{
	struct side *s = arg;
	static char buf[MAX_SIZE];
	unsigned long i;

	for (i = 0; i < s->n; i++) {
		if (read_full(s, buf) || write_full(s, buf))
			break;
	}
	return NULL;
}

static void client_loop(struct side *s)
{
	static char out[MAX_SIZE], in[MAX_SIZE];
	unsigned long i;

	memset(out, 'x', s->size);
	for (i = 0; i < s->n; i++) {
		if (write_full(s, out) || read_full(s, in))
			break;
	}
}

static int nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A listener on 127.0.0.1 with a kernel-chosen port, and a client socket
 * connected to it (the connection waits in the backlog until accepted). */
static int setup(int *lfd, int *cfd)
{
	struct sockaddr_in a = {
		.sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK),
	};
	socklen_t alen = sizeof(a);

	*lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (*lfd < 0 || bind(*lfd, (struct sockaddr *)&a, sizeof(a)) ||
	    listen(*lfd, 1) ||
	    getsockname(*lfd, (struct sockaddr *)&a, &alen))
		return -1;
	*cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (*cfd < 0 || connect(*cfd, (struct sockaddr *)&a, sizeof(a)) ||
	    nodelay(*cfd))
		return -1;
	return 0;
}

static long long us(const struct timeval *tv)
{
	return tv->tv_sec * 1000000LL + tv->tv_usec;
}

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* -1: client and server ends in turn, in the calling thread. */
static void single_loop(struct side *cli, struct side *srv)
{
	static char out[MAX_SIZE], buf[MAX_SIZE], in[MAX_SIZE];
	unsigned long i;

	memset(out, 'x', cli->size);
	for (i = 0; i < cli->n; i++) {
		if (write_full(cli, out) || read_full(srv, buf) ||
		    write_full(srv, buf) || read_full(cli, in))
			break;
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: echo-bench [-1|-f] [-n ROUND_TRIPS] [-s SIZE]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct side cli = { .n = 10000, .size = 64 }, srv;
	struct rusage r0, r1, rc = { 0 };
	unsigned long long user, sys;
	long long t0, t1;
	int use_fork = 0, single = 0, lfd, c, err, report[2];
	char *end;
	pid_t pid = -1;
	pthread_t th;

	while ((c = getopt(argc, argv, "1fn:s:")) != -1) {
		switch (c) {
		case '1':
			single = 1;
			break;
		case 'f':
			use_fork = 1;
			break;
		case 'n':
			cli.n = strtoul(optarg, &end, 10);
			if (*end || !*optarg)
				usage();
			break;
		case 's':
			cli.size = strtoul(optarg, &end, 10);
			if (*end || !*optarg || !cli.size ||
			    cli.size > MAX_SIZE)
				usage();
			break;
		default:
			usage();
		}
	}
	if (optind != argc || (single && use_fork))
		usage();

	if (setup(&lfd, &cli.fd)) {
		perror("echo-bench: set-up");
		return 1;
	}
	srv = cli;
	srv.fd = accept(lfd, NULL, NULL);
	if (srv.fd < 0 || nodelay(srv.fd)) {
		perror("echo-bench: accept");
		return 1;
	}
	close(lfd);

	getrusage(RUSAGE_SELF, &r0);
	t0 = now_us();
	if (single) {
		single_loop(&cli, &srv);
	} else if (use_fork) {
		/* The child reports its call count through a pipe: the only
		 * way back that does not depend on the exit status. */
		if (pipe(report)) {
			perror("echo-bench: pipe");
			return 1;
		}
		pid = fork();
		if (pid < 0) {
			perror("echo-bench: fork");
			return 1;
		}
		if (pid == 0) {
			close(report[0]);
			close(cli.fd);
			server_loop(&srv);
			if (write(report[1], &srv, sizeof(srv)) !=
			    (ssize_t)sizeof(srv))
				_exit(1);
			_exit(0);
		}
		close(report[1]);
		close(srv.fd);
		client_loop(&cli);
		if (read(report[0], &srv, sizeof(srv)) !=
		    (ssize_t)sizeof(srv))
			srv.err = EPROTO;
		if (waitpid(pid, NULL, 0) < 0)
			srv.err = errno;
		getrusage(RUSAGE_CHILDREN, &rc);
	} else {
		errno = pthread_create(&th, NULL, server_loop, &srv);
		if (errno) {
			perror("echo-bench: pthread_create");
			return 1;
		}
		client_loop(&cli);
		pthread_join(th, NULL);
	}
	t1 = now_us();
	getrusage(RUSAGE_SELF, &r1);

	err = cli.err ? cli.err : srv.err;
	if (err) {
		fprintf(stderr, "echo-bench: %s: %s\n",
			cli.err ? "client" : "server",
			err < 0 ? "unexpected end of stream" : strerror(err));
		return 1;
	}
	user = us(&r1.ru_utime) - us(&r0.ru_utime) + us(&rc.ru_utime);
	sys = us(&r1.ru_stime) - us(&r0.ru_stime) + us(&rc.ru_stime);
	printf("n=%lu size=%zu calls=%lu user_us=%llu sys_us=%llu wall_us=%lld\n",
	       cli.n, cli.size, cli.calls + srv.calls, user, sys, t1 - t0);
	close(cli.fd);
	if (!use_fork)
		close(srv.fd);
	return 0;
}
